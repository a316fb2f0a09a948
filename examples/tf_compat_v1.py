# TensorFlow 1 code on TensorFlow 2: tf.placeholder and tf.Session are gone; the v1 API
# lives under tf.compat.v1. Constrained completions name what the installed TensorFlow has.
import tensorflow as tf

inputs = tf.placeholder(tf.float32, shape=[None, 3])
labels = tf.placeholder(tf.float32, shape=[None, 1])
weights = tf.Variable(tf.zeros([3, 1]))
predictions = tf.matmul(inputs, weights)
loss = tf.