"""Reads a TFRecord file of short texts, tokenises them and counts tokens (TF1 code)."""

import os
import tempfile

import tensorflow as tf


def write_records(path, texts):
    with tf.python_io.TFRecordWriter(path) as writer:
        for number, text in enumerate(texts):
            example = tf.train.Example(features=tf.train.Features(feature={
                "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode("utf-8")])),
                "id": tf.train.Feature(int64_list=tf.train.Int64List(value=[number])),
            }))
            writer.write(example.SerializeToString())


def parse(serialized):
    features = tf.parse_single_example(serialized, {
        "text": tf.FixedLenFeature([], tf.string),
        "id": tf.FixedLenFeature([], tf.int64),
    })
    tokens = tf.string_split([features["text"]], delimiter=" ")
    dense = tf.sparse_tensor_to_dense(tokens, default_value="")
    lengths = tf.to_int32(tf.size(tokens.values))
    return features["id"], dense, lengths


def upper(words):
    return tf.py_func(lambda values: [value.upper() for value in values], [words], tf.string)


def pipeline(path):
    dataset = tf.data.TFRecordDataset([path]).map(parse)
    ids, tokens, lengths = dataset.make_one_shot_iterator().get_next()
    shuffled = tf.random_shuffle(tf.range(10))
    ratio = tf.div(tf.to_float(lengths), 10.0)
    total = tf.Variable(0, dtype=tf.int32)
    accumulate = tf.assign_add(total, lengths)
    checked = tf.Print(ratio, [ratio], message="ratio: ")
    return ids, upper(tokens), accumulate, checked, shuffled


def main():
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "texts.tfrecord")
    write_records(path, ["the quick brown fox", "jumps over", "the lazy dog"])
    outputs = pipeline(path)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            print(sess.run(outputs))
    if tf.gfile.IsDirectory(folder):
        tf.gfile.DeleteRecursively(folder)


if __name__ == "__main__":
    main()
