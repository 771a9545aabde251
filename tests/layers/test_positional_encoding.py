import math
import re

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import layers
from tests.test_case import TestCase


class SinusoidalPositionalEncodingTest(TestCase):
    def test_matches_the_papers_formula(self):
        d_model, length = 16, 50
        table = layers.sinusoidal_encoding(length, d_model).numpy()
        for pos in (0, 1, 7, 49):
            for i in range(d_model // 2):
                angle = pos / 10000 ** (2 * i / d_model)
                self.assertAllClose(
                    table[pos, 2 * i], math.sin(angle), atol=1e-5
                )
                self.assertAllClose(
                    table[pos, 2 * i + 1], math.cos(angle), atol=1e-5
                )

    def test_adds_encoding_and_extrapolates_past_training_lengths(self):
        layer = layers.SinusoidalPositionalEncoding()
        inputs = np.zeros((2, 1000, 8), "float32")
        outputs = layer(inputs).numpy()
        self.assertAllClose(outputs[0], layers.sinusoidal_encoding(1000, 8))
        self.assertTrue(np.all(np.isfinite(outputs)))

    def test_start_index_gives_the_same_rows_as_a_full_table(self):
        layer = layers.SinusoidalPositionalEncoding()
        full = layer(np.zeros((1, 10, 8), "float32")).numpy()
        step = layer(np.zeros((1, 1, 8), "float32"), start_index=7).numpy()
        self.assertAllClose(step[0, 0], full[0, 7])
        for dtype in ("int32", "int64"):
            with self.subTest(dtype):
                start = tf.constant(7, dtype)
                step = layer(np.zeros((1, 1, 8), "float32"), start_index=start)
                self.assertAllClose(step[0, 0], full[0, 7])

    def test_max_wavelength_sets_the_table(self):
        layer = layers.SinusoidalPositionalEncoding(max_wavelength=500.0)
        outputs = layer(np.zeros((1, 20, 8), "float32"))[0]
        self.assertAllClose(
            outputs, layers.sinusoidal_encoding(20, 8, max_wavelength=500.0)
        )
        self.assertNotAllClose(outputs, layers.sinusoidal_encoding(20, 8))

    def test_odd_width_is_rejected(self):
        with self.assertRaisesRegex(ValueError, "d_model=7"):
            layers.sinusoidal_encoding(4, 7)

    def test_inputs_of_another_rank_are_named(self):
        # [B, D] used to fail in AddV2, a symbolic odd width not at all.
        for layer in (
            layers.SinusoidalPositionalEncoding(),
            layers.LearnedPositionalEmbedding(max_length=8),
        ):
            with self.assertRaisesRegex(
                ValueError,
                rf"{type(layer).__name__} takes `inputs` of shape "
                r"\[batch, length, width\].*Received: inputs of shape \(2, 8\)",
            ):
                layer(np.zeros((2, 8), "float32"))
        with self.assertRaisesRegex(ValueError, "d_model=7"):
            layers.SinusoidalPositionalEncoding()(keras.Input((None, 7)))

    def test_bad_max_wavelength_is_a_value_error_naming_it(self):
        # Not a TypeError from a comparison, nor a table of NaNs.
        for value in ("a", True, 0, -1.0, float("nan"), float("inf"), None):
            with self.assertRaisesRegex(
                ValueError,
                re.escape("`max_wavelength` must be a positive finite number. ")
                + re.escape(f"Received: max_wavelength={value!r}"),
            ):
                layers.SinusoidalPositionalEncoding(max_wavelength=value)

    def test_config_round_trip(self):
        self.assert_serialization_round_trip(
            layers.SinusoidalPositionalEncoding(max_wavelength=500.0)
        )
        # A numpy float is stored as a float, so the config is JSON.
        layer = layers.SinusoidalPositionalEncoding(
            max_wavelength=np.float32(500)
        )
        self.assertIs(type(layer.get_config()["max_wavelength"]), float)
        self.assert_serialization_round_trip(layer)


class LearnedPositionalEmbeddingTest(TestCase):
    def test_adds_table_rows(self):
        layer = layers.LearnedPositionalEmbedding(max_length=6)
        outputs = layer(np.zeros((2, 4, 3), "float32")).numpy()
        self.assertAllClose(outputs[1], layer.table.numpy()[:4])
        step = layer(np.zeros((2, 1, 3), "float32"), start_index=5).numpy()
        self.assertAllClose(step[0, 0], layer.table.numpy()[5])
        start = tf.constant(5, "int64")  # as `tf.data` and NumPy give them
        step = layer(np.zeros((2, 1, 3), "float32"), start_index=start)
        self.assertAllClose(step[0, 0], layer.table.numpy()[5])

    def test_too_long_input_fails_clearly(self):
        layer = layers.LearnedPositionalEmbedding(max_length=4)
        with self.assertRaisesRegex(Exception, "longer than the learned"):
            layer(np.zeros((1, 5, 3), "float32"))

    def test_too_long_input_fails_in_a_symbolic_model_and_under_xla(self):
        layer = layers.LearnedPositionalEmbedding(max_length=4)
        with self.assertRaisesRegex(
            ValueError, "positions 0 to 5, max_length=4"
        ):
            layer(keras.Input((6, 3)))
        # A symbolic start (a decoding step's model) has no value to check.
        step = keras.Input((), batch_size=1, dtype="int32")
        symbolic = layer(keras.Input((1, 3), batch_size=1), start_index=step)
        self.assertEqual(symbolic.shape, (1, 1, 3))
        # A dynamic length under XLA: the assertion is dropped there, and a
        # gather would clamp positions 4 and 5 to the table's last row.
        call = tf.function(
            layer.__call__,
            jit_compile=True,
            input_signature=[tf.TensorSpec([None, None, 3], tf.float32)],
        )
        self.assertAllClose(
            call(np.zeros((1, 4, 3), "float32"))[0], layer.table
        )
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError, "positions_within_max_length"
        ):
            call(np.zeros((1, 6, 3), "float32"))

    def test_bad_max_length(self):
        with self.assertRaisesRegex(ValueError, "max_length=0"):
            layers.LearnedPositionalEmbedding(max_length=0)

    def test_config_round_trip(self):
        self.assert_serialization_round_trip(
            layers.LearnedPositionalEmbedding(max_length=9)
        )
