"""A small convolutional classifier on random images, TF1 layers and queues-era APIs."""

import numpy as np
import tensorflow as tf

IMAGE = 28
CLASSES = 10


def inputs(batch=32):
    images = np.random.rand(512, IMAGE, IMAGE, 1).astype(np.float32)
    labels = np.random.randint(0, CLASSES, size=512).astype(np.int64)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(512).batch(batch).repeat()
    iterator = dataset.make_one_shot_iterator()
    return iterator.get_next()


def model(images, keep_prob, is_training):
    resized = tf.image.resize_images(images, [32, 32])
    net = tf.layers.conv2d(resized, 16, 3, padding="same", activation=tf.nn.relu)
    net = tf.layers.max_pooling2d(net, 2, 2)
    net = tf.layers.conv2d(net, 32, 3, padding="same", activation=tf.nn.relu)
    net = tf.layers.batch_normalization(net, training=is_training)
    net = tf.layers.flatten(net)
    net = tf.nn.dropout(net, keep_prob=keep_prob)
    return tf.layers.dense(net, CLASSES)


def losses(logits, labels):
    onehot = tf.one_hot(labels, CLASSES)
    cross = tf.nn.softmax_cross_entropy_with_logits_v2(labels=onehot, logits=logits)
    loss = tf.reduce_mean(cross)
    probabilities = tf.nn.softmax(logits, dim=-1)
    confidence = tf.reduce_max(probabilities, reduction_indices=1)
    predicted = tf.argmax(logits, dimension=1)
    accuracy, update = tf.metrics.accuracy(labels, predicted)
    return loss, tf.reduce_mean(confidence), accuracy, update


def train(steps=20):
    images, labels = inputs()
    keep_prob = tf.placeholder(tf.float32, shape=[])
    is_training = tf.placeholder(tf.bool, shape=[])
    logits = model(images, keep_prob, is_training)
    loss, confidence, accuracy, update = losses(logits, labels)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    with tf.control_dependencies(update_ops):
        train_op = tf.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
    init = tf.group(tf.global_variables_initializer(), tf.local_variables_initializer())
    with tf.Session() as sess:
        sess.run(init)
        for _step in range(steps):
            feed = {keep_prob: 0.5, is_training: True}
            _, value, _ = sess.run([train_op, loss, update], feed_dict=feed)
        print("loss", value, "accuracy", sess.run(accuracy), "confidence", sess.run(confidence, {keep_prob: 1.0, is_training: False}))
        variables = tf.trainable_variables()
        print("parameters", sum(np.prod(v.get_shape().as_list()) for v in variables))


if __name__ == "__main__":
    train()
