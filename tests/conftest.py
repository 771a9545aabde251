"""Pytest set-up shared by every test: the TF backend, quiet logs, one seed."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Before TensorFlow, so that the tests run with the package's settings of it.
import keras_transformer  # noqa: F401, I001
import tensorflow as tf

# Split the CPU into 8 logical devices before TensorFlow initialises, so the
# distribution tests can run MirroredStrategy with 8 replicas (one per GPU
# of the design target). Ops without a strategy still run on CPU:0.
NUM_LOGICAL_CPUS = 8
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS,
)
