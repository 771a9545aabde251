"""The project's TestCase: deterministic seeds and Keras layer checks."""

import functools
import json
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized


@functools.cache
def eight_replica_strategy():
    """One MirroredStrategy over the 8 logical CPUs for the whole session.

    TensorFlow numbers collective groups and instances per strategy from the
    same starting keys, so two strategies that both run all-reduces in one
    process collide ("joining a group with size 8, but that group has size
    2", "Shape mismatch in the collective instance"): tests share this one.
    """
    from keras_transformer.training import distribution

    return distribution.create_strategy("mirrored", num_gpus=8)


class TestCase(tf.test.TestCase, parameterized.TestCase):
    """Base class of every test: fixed seeds and layer round-trip helpers."""

    # tf.test.TestCase's deprecated `test_session` is not a test.
    test_session = None

    def setUp(self):
        super().setUp()
        keras.utils.set_random_seed(1337)
        keras.config.set_dtype_policy("float32")

    def tearDown(self):
        keras.config.set_dtype_policy("float32")
        super().tearDown()

    def assert_config_round_trip(self, layer):
        """`from_config(get_config())` rebuilds a layer with the same config."""
        config = layer.get_config()
        revived = layer.__class__.from_config(config)
        self.assertEqual(revived.get_config(), config)
        return revived

    def assert_serialization_round_trip(self, layer):
        """`keras.saving.serialize_keras_object` round trip keeps the config,
        which is JSON (as in a `.keras` file: no numpy scalars)."""
        serialized = json.loads(
            json.dumps(keras.saving.serialize_keras_object(layer))
        )
        revived = keras.saving.deserialize_keras_object(serialized)
        self.assertEqual(revived.get_config(), layer.get_config())
        return revived

    def random_ids(self, shape, vocab_size, seed=0, low=4):
        """Random token ids in [low, vocab_size) as int32 (no specials)."""
        rng = np.random.default_rng(seed)
        return rng.integers(low, vocab_size, size=shape).astype("int32")
