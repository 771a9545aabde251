import keras
import numpy as np
import tensorflow as tf

import keras_transformer as kt
from keras_transformer import layers
from tests.test_case import TestCase

# 2^16 levels: rate 0.1 drops below round(6553.6) = 6554.
_KEEP_01 = 1 - 6554 / 65536


class DropoutTest(TestCase):
    def test_drops_at_the_rate_and_keeps_the_expectation(self):
        layer = layers.Dropout(0.1, seed=3)
        x = tf.ones(
            [999, 999]
        )  # 4k + 1 elements: the last word is a quarter used.
        outputs = layer(x, training=True).numpy()
        dropped = outputs == 0
        # Binomial std of the fraction is 3e-4 at 1M elements.
        self.assertAllClose(dropped.mean(), 0.1, atol=1.5e-3)
        self.assertAllClose(
            outputs[~dropped], np.full((~dropped).sum(), 1 / _KEEP_01)
        )
        self.assertAllClose(outputs.mean(), 1.0, atol=2e-3)

    def test_masks_are_uniform_over_positions(self):
        # The four 16-bit quarters of each word, and every row, drop alike.
        outputs = layers.Dropout(0.5, seed=1)(
            tf.ones([400, 500]), training=True
        )
        dropped = outputs.numpy() == 0
        for quarter in range(4):  # Binomial std 2.2e-3 at 50,000 elements.
            self.assertAllClose(dropped[:, quarter::4].mean(), 0.5, atol=7e-3)
        self.assertAllClose(dropped.mean(axis=1), np.full(400, 0.5), atol=0.12)

    def test_identity_when_not_training_or_rate_zero(self):
        x = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
        self.assertAllEqual(layers.Dropout(0.3)(x, training=False), x)
        self.assertAllEqual(layers.Dropout(0.0)(x, training=True), x)
        self.assertAllEqual(
            layers.Dropout(1.0)(x, training=True), np.zeros_like(x)
        )

    def test_successive_calls_draw_new_masks_seeds_repeat(self):
        x = tf.ones([64, 64])
        layer = layers.Dropout(0.5, seed=7)
        first, second = layer(x, training=True), layer(x, training=True)
        self.assertNotAllEqual(first, second)
        again = layers.Dropout(0.5, seed=7)
        self.assertAllEqual(again(x, training=True), first)

    def test_same_masks_with_xla(self):
        x = tf.ones([37, 53])
        masks = []
        for jit_compile in (False, True):
            layer = layers.Dropout(0.25, seed=11)
            call = tf.function(
                lambda x, layer=layer: layer(x, training=True),
                jit_compile=jit_compile,
            )
            masks.append(call(x).numpy() == 0)
        self.assertAllEqual(masks[0], masks[1])

    def test_noise_shape_shares_the_mask(self):
        layer = layers.Dropout(0.5, noise_shape=(None, 1, 6), seed=2)
        outputs = layer(tf.ones([4, 5, 6]), training=True).numpy()
        self.assertAllEqual(
            outputs, np.broadcast_to(outputs[:, :1], outputs.shape)
        )
        self.assertTrue((outputs == 0).any() and (outputs != 0).any())

    def test_gradient_is_the_mask_times_the_scale(self):
        layer = layers.Dropout(0.1, seed=5)
        x = tf.random.normal([16, 32])
        with tf.GradientTape() as tape:
            tape.watch(x)
            outputs = layer(x, training=True)
        gradient = tape.gradient(outputs, x).numpy()
        expected = np.where(outputs.numpy() == 0, 0.0, 1 / _KEEP_01)
        self.assertAllClose(gradient, expected)

    def test_mixed_bfloat16(self):
        layer = layers.Dropout(0.1, dtype="mixed_bfloat16", seed=4)
        outputs = layer(tf.ones([8, 8], tf.bfloat16), training=True)
        self.assertEqual(outputs.dtype, tf.bfloat16)

    def test_serialization_round_trip(self):
        revived = self.assert_serialization_round_trip(
            layers.Dropout(0.2, noise_shape=(None, 1), seed=3)
        )
        self.assertIsInstance(revived, layers.Dropout)

    def test_model_uses_it(self):
        model = kt.build_transformer(
            kt.TransformerConfig.preset("tiny", vocab_size=32)
        )
        dropouts = [
            layer
            for layer in model._flatten_layers()
            if isinstance(layer, keras.layers.Dropout)
        ]
        self.assertNotEmpty(dropouts)
        for layer in dropouts:
            self.assertIsInstance(layer, layers.Dropout)
