# TensorFlow 1 code running on TF 2: the v1 API lives under tf.compat.v1.
# Completions after `tf.compat.v1.` name members that exist in the installed TensorFlow.
import tensorflow as tf

labels = tf.constant([[1.0, 2.0]])
predictions = tf.constant([[1.5, 2.5]])
loss = tf.compat.v1.losses.