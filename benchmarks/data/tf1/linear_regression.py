"""Linear regression trained in a TF1 graph and session, with summaries and checkpoints."""

import numpy as np
import tensorflow as tf

tf.logging.set_verbosity(tf.logging.INFO)
FLAGS = tf.app.flags.FLAGS
tf.app.flags.DEFINE_integer("steps", 200, "training steps")
tf.app.flags.DEFINE_float("learning_rate", 0.05, "learning rate")
tf.app.flags.DEFINE_string("logdir", "/tmp/linreg", "where summaries and checkpoints go")


def make_data(count=256, features=4, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(count, features).astype(np.float32)
    true_w = rng.randn(features, 1).astype(np.float32)
    y = x.dot(true_w) + 0.1 * rng.randn(count, 1).astype(np.float32)
    return x, y


def build_graph(features):
    x = tf.placeholder(tf.float32, shape=[None, features], name="x")
    y = tf.placeholder(tf.float32, shape=[None, 1], name="y")
    training = tf.placeholder_with_default(False, shape=[], name="training")
    with tf.variable_scope("model"):
        w = tf.get_variable("w", [features, 1], initializer=tf.truncated_normal_initializer(stddev=0.1))
        b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
    noise = tf.random_normal(tf.shape(x), stddev=0.01)
    inputs = tf.cond(training, lambda: x + noise, lambda: x)
    prediction = tf.matmul(inputs, w) + b
    loss = tf.reduce_mean(tf.squared_difference(prediction, y))
    l2 = tf.reduce_sum(tf.square(w), reduction_indices=[0], keep_dims=True)
    total = loss + 1e-3 * tf.squeeze(l2, squeeze_dims=[0])
    global_step = tf.train.get_or_create_global_step()
    rate = tf.train.exponential_decay(FLAGS.learning_rate, global_step, 100, 0.9)
    train_op = tf.train.AdamOptimizer(rate).minimize(total, global_step=global_step)
    tf.summary.scalar("loss", loss)
    return x, y, training, loss, train_op, tf.summary.merge_all()


def main(_):
    features = 4
    data_x, data_y = make_data(features=features)
    x, y, training, loss, train_op, summaries = build_graph(features)
    saver = tf.train.Saver(max_to_keep=2)
    config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)
    with tf.Session(config=config) as sess:
        writer = tf.summary.FileWriter(FLAGS.logdir, sess.graph)
        sess.run(tf.global_variables_initializer())
        for step in range(FLAGS.steps):
            feed = {x: data_x, y: data_y, training: True}
            _, value, summary = sess.run([train_op, loss, summaries], feed_dict=feed)
            writer.add_summary(summary, step)
            if step % 50 == 0:
                tf.logging.info("step %d loss %.4f", step, value)
        saver.save(sess, FLAGS.logdir + "/model.ckpt")
        writer.close()
    if tf.gfile.Exists(FLAGS.logdir):
        tf.logging.info("checkpoints in %s", FLAGS.logdir)


if __name__ == "__main__":
    tf.app.run(main)
