"""Feed-forward, residual, embedding, encoder/decoder layers and stacks."""

import os
import re
import warnings

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from keras_transformer import layers
from keras_transformer.layers.attention_cache import in_place_cache_rows
from keras_transformer.layers.outputs import pack_outputs, unpack_outputs
from tests.test_case import TestCase


class FeedForwardTest(TestCase):
    def test_is_relu_mlp_applied_per_position(self):
        layer = layers.PositionwiseFeedForward(d_ff=16)
        x = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
        outputs = layer(x).numpy()
        w1, b1 = layer.inner.kernel.numpy(), layer.inner.bias.numpy()
        w2, b2 = layer.outer.kernel.numpy(), layer.outer.bias.numpy()
        expected = np.maximum(0, x @ w1 + b1) @ w2 + b2
        self.assertAllClose(outputs, expected, atol=1e-5)

    @parameterized.parameters(
        ("float32", 512, 528),  # rows of 2 KiB: one cache line more
        ("float32", 300, 300),
        ("mixed_bfloat16", 1024, 1056),
        ("mixed_bfloat16", 512, 512),  # rows of 1 KiB in bfloat16
    )
    def test_decoding_weights_pad_aliasing_rows_and_change_nothing(
        self, policy, d_ff, padded_width
    ):
        keras.config.set_dtype_policy(policy)
        layer = layers.PositionwiseFeedForward(d_ff)
        x = np.random.default_rng(1).normal(size=(6, 1, 16)).astype("float32")
        expected = layer(x)
        weights = layer.decoding_weights()
        inner_kernel, inner_bias, outer_kernel, outer_bias = weights
        self.assertEqual(inner_kernel.shape, (16, padded_width))
        self.assertEqual(outer_kernel.shape, (padded_width, 16))
        self.assertEqual(inner_kernel.dtype, layer.compute_dtype)
        self.assertAllEqual(inner_bias[d_ff:], np.zeros(padded_width - d_ff))
        self.assertAllEqual(
            outer_kernel[d_ff:], np.zeros((padded_width - d_ff, 16))
        )
        outputs = layer(x, decoding_weights=weights)
        self.assertEqual(outputs.dtype, expected.dtype)
        atol = 1e-5 if policy == "float32" else 2e-2
        self.assertAllClose(outputs, expected, atol=atol, rtol=atol)

    def test_bad_width(self):
        with self.assertRaisesRegex(ValueError, "d_ff=0"):
            layers.PositionwiseFeedForward(d_ff=0)

    def test_bad_dropout_names_its_argument(self):
        # Not Keras's message, which names the inner Dropout's `rate`.
        with self.assertRaisesRegex(
            ValueError, "Received: activation_dropout=-0.1"
        ):
            layers.PositionwiseFeedForward(8, activation_dropout=-0.1)

    def test_config_round_trip(self):
        self.assert_serialization_round_trip(layers.PositionwiseFeedForward(8))


class ResidualConnectionTest(TestCase):
    def test_post_norm_normalises_the_sum(self):
        layer = layers.ResidualConnection(dropout=0.0)
        x = np.random.default_rng(1).normal(size=(2, 3, 8)).astype("float32")
        y = np.random.default_rng(2).normal(size=(2, 3, 8)).astype("float32")
        out = layer(x, y).numpy()
        s = x + y
        expected = (s - s.mean(-1, keepdims=True)) / np.sqrt(
            s.var(-1, keepdims=True) + 1e-6
        )
        self.assertAllClose(out, expected, atol=1e-4)
        self.assertIs(layer.normalize_input(x), x)

    def test_pre_norm_normalises_the_input(self):
        layer = layers.ResidualConnection(dropout=0.0, norm_position="pre")
        x = np.random.default_rng(1).normal(size=(2, 3, 8)).astype("float32")
        normed = layer.normalize_input(x).numpy()
        self.assertAllClose(normed.mean(-1), np.zeros((2, 3)), atol=1e-5)
        self.assertAllClose(layer(x, x).numpy(), 2 * x)

    @parameterized.parameters("post", "pre")
    def test_dropout_drops_the_sublayer_output_in_training_only(
        self, norm_position
    ):
        # Residual dropout (section 5.4): on the sublayer's output, before
        # the sum; the residual itself is never dropped.
        layer = layers.ResidualConnection(
            dropout=0.5, norm_position=norm_position
        )
        x = np.random.default_rng(1).normal(size=(2, 3, 8)).astype("float32")
        y = np.random.default_rng(2).normal(size=(2, 3, 8)).astype("float32")
        plain = layers.ResidualConnection(
            dropout=0.0, norm_position=norm_position
        )
        self.assertAllClose(layer(x, y, training=False), plain(x, y))
        outputs = layer(x, y, training=True)
        self.assertNotAllClose(outputs, plain(x, y))
        if norm_position == "pre":  # x + dropout(y): each unit 0 or 2 y
            kept = np.isclose(outputs - x, 2 * y, atol=1e-6)
            self.assertTrue(np.all(kept | np.isclose(outputs, x, atol=1e-6)))
            self.assertTrue(0 < kept.mean() < 1)

    def test_bad_position(self):
        with self.assertRaisesRegex(ValueError, "norm_position='middle'"):
            layers.ResidualConnection(0.1, norm_position="middle")

    def test_bad_epsilon(self):
        with self.assertRaisesRegex(ValueError, "Received: epsilon=0"):
            layers.ResidualConnection(0.1, epsilon=0)

    def test_bad_dropout_names_its_argument(self):
        for value in (-0.1, 1.0, "0.1"):
            with self.assertRaisesRegex(
                ValueError, f"Received: dropout={value!r}"
            ):
                layers.ResidualConnection(value)


class LayerNormalizationTest(TestCase):
    def keras_twin(self, layer, inputs):
        """Keras's own layer with the same config and weights."""
        twin = keras.layers.LayerNormalization.from_config(layer.get_config())
        twin.build(inputs.shape)
        twin.set_weights(layer.get_weights())
        return twin

    @parameterized.product(
        policy=("float32", "mixed_bfloat16"), training=(True, False)
    )
    def test_matches_keras_values_and_gradients(self, policy, training):
        keras.config.set_dtype_policy(policy)
        layer = layers.LayerNormalization(epsilon=1e-6)
        rng = np.random.default_rng(4)
        inputs = tf.constant(rng.normal(3.0, 2.0, size=(2, 5, 16)), "float32")
        layer.build(inputs.shape)
        layer.set_weights([rng.normal(size=16), rng.normal(size=16)])
        twin = self.keras_twin(layer, inputs)

        def values_and_gradients(norm):
            with tf.GradientTape() as tape:
                tape.watch(inputs)
                outputs = norm(inputs, training=training)
                loss = tf.reduce_sum(tf.cast(outputs, "float32") * inputs)
            return [outputs] + tape.gradient(loss, [inputs, *norm.weights])

        ours, theirs = values_and_gradients(layer), values_and_gradients(twin)
        self.assertEqual(ours[0].dtype, theirs[0].dtype)
        atol = 1e-5 if policy == "float32" else 2e-2
        for a, b in zip(ours, theirs):
            self.assertAllClose(a, b, atol=atol, rtol=atol)

    def test_runs_fewer_ops_than_keras(self):
        layer = layers.LayerNormalization(epsilon=1e-6)
        inputs = tf.zeros((2, 3, 8))
        layer.build(inputs.shape)

        def compute_ops(norm):
            graph = tf.function(norm).get_concrete_function(inputs).graph
            skipped = {
                "Placeholder",
                "Const",
                "Identity",
                "NoOp",
                "ReadVariableOp",
            }
            return [
                op.type
                for op in graph.get_operations()
                if op.type not in skipped
            ]

        self.assertLen(compute_ops(layer), 9)
        self.assertGreater(len(compute_ops(self.keras_twin(layer, inputs))), 9)

    def test_other_settings_run_keras_code(self):
        inputs = (
            np.random.default_rng(5).normal(size=(2, 3, 8)).astype("float32")
        )
        for kwargs in (dict(axis=1), dict(axis=[1, 2]), dict(center=False)):
            layer = layers.LayerNormalization(**kwargs)
            outputs = layer(inputs)
            self.assertAllClose(
                outputs, self.keras_twin(layer, inputs)(inputs), atol=1e-5
            )

    def test_serialization_round_trip(self):
        self.assert_serialization_round_trip(
            layers.LayerNormalization(epsilon=1e-6)
        )


class Float64PolicyTest(TestCase):
    """Under a float64 dtype policy the layers compute in float64, as
    Keras's own do (numerical gradient checks need it)."""

    def test_gradients_match_finite_differences(self):
        rng = np.random.default_rng(0)
        x = tf.constant(rng.normal(size=(1, 3, 16)), tf.float64)
        memory = tf.constant(rng.normal(size=(1, 4, 16)), tf.float64)
        encoder = layers.TransformerEncoderLayer(
            2, 16, dropout=0.0, dtype="float64"
        )
        decoder = layers.TransformerDecoderLayer(
            2, 16, dropout=0.0, dtype="float64"
        )
        for name, function in (
            ("encoder", encoder),
            ("decoder", lambda x: decoder(x, memory)),
        ):
            with self.subTest(name):
                self.assertEqual(function(x).dtype, tf.float64)
                theoretical, numerical = tf.test.compute_gradient(function, [x])
                # float32 statistics or softmax would err by ~3e-4.
                self.assertAllClose(
                    theoretical[0], numerical[0], atol=1e-6, rtol=0
                )

    def test_attention_weights_are_float64(self):
        layer = layers.MultiHeadAttention(2, 8, dtype="float64")
        x = tf.constant(np.ones((1, 3, 16)), tf.float64)
        outputs, weights = layer(x, return_attention_weights=True)
        self.assertEqual((outputs.dtype, weights.dtype), (tf.float64,) * 2)
        spec = layer.compute_output_spec(
            keras.KerasTensor((1, 3, 16), "float64"),
            return_attention_weights=True,
        )
        self.assertEqual(spec[1].dtype, "float64")


class ScaledEmbeddingTest(TestCase):
    def test_scales_by_sqrt_d_model_and_reverses_with_the_same_matrix(self):
        layer = layers.ScaledEmbedding(vocab_size=10, d_model=16)
        ids = np.array([[1, 2, 3]], "int32")
        embedded = layer(ids).numpy()
        matrix = layer.embeddings.numpy()
        self.assertAllClose(embedded[0], matrix[[1, 2, 3]] * 4.0)
        logits = layer(embedded, reverse=True).numpy()
        self.assertEqual(logits.dtype, np.float32)
        self.assertAllClose(logits, embedded @ matrix.T, atol=1e-4)

    def test_reverse_with_transposed_embeddings_read_once_is_identical(self):
        # Decoding passes E^T, laid out once before its loop; the logits must
        # not change by a single bit.
        layer = layers.ScaledEmbedding(vocab_size=50, d_model=16)
        hidden = (
            np.random.default_rng(3).normal(size=(6, 1, 16)).astype("float32")
        )
        logits = layer(hidden, reverse=True).numpy()
        transposed = layer.transposed_embeddings()
        self.assertAllEqual(transposed.numpy(), layer.embeddings.numpy().T)
        self.assertAllEqual(
            layer(
                hidden, reverse=True, transposed_embeddings=transposed
            ).numpy(),
            logits,
        )

    def test_default_initializer_gives_unit_variance_after_scaling(self):
        # N(0, d_model^-1/2), so that times sqrt(d_model) the embeddings
        # are of the positional encodings' scale (section 3.4).
        layer = layers.ScaledEmbedding(1000, 256)
        layer.build()
        self.assertAllClose(
            np.std(layer.embeddings.numpy()), 256**-0.5, rtol=0.02
        )

    def test_bad_sizes(self):
        with self.assertRaisesRegex(ValueError, "vocab_size=0"):
            layers.ScaledEmbedding(0, 4)

    def test_config_round_trip(self):
        self.assert_serialization_round_trip(layers.ScaledEmbedding(10, 4))
        revived = self.assert_serialization_round_trip(
            layers.ScaledEmbedding(10, 4, mask_zero=True)
        )
        self.assertTrue(revived.mask_zero)

    def test_mask_zero_masks_the_padding_through_an_encoder_to_the_logits(self):
        ids = np.array([[5, 6, 7, 0], [4, 3, 0, 0]], "int32")
        embedding = layers.ScaledEmbedding(10, 8, mask_zero=True)
        positional = layers.SinusoidalPositionalEncoding()
        encoder = layers.TransformerEncoder(num_layers=1, num_heads=2, d_ff=16)
        source = keras.Input((None,), dtype="int32")
        model = keras.Model(source, encoder(positional(embedding(source))))
        embedded = embedding(ids)
        self.assertAllEqual(embedded._keras_mask, ids != 0)
        # The same as the explicit padding mask on unmasked embeddings.
        unmasked = positional(tf.identity(embedded))
        expected = encoder(unmasked, padding_mask=layers.padding_mask(ids))
        self.assertAllClose(model(ids), expected)
        # Reversed, the hidden states' mask carries over to the logits.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            logits = embedding(encoder(positional(embedded)), reverse=True)
        self.assertAllEqual(logits._keras_mask, ids != 0)
        # Without mask_zero nothing is masked, as in Keras.
        plain = layers.ScaledEmbedding(10, 8)(ids)
        self.assertIsNone(getattr(plain, "_keras_mask", None))

    def test_float_ids_are_cast_and_masked_as_by_keras_embedding(self):
        # As `keras.layers.Embedding`: Keras rebuilds a loaded subclassed
        # model by calling it on float placeholders.
        embedding = layers.ScaledEmbedding(10, 8, mask_zero=True)
        ids = np.array([[5, 6, 0], [4, 0, 0]], "int32")
        expected = embedding(ids)
        embedded = embedding(ids.astype("float32"))
        self.assertAllEqual(embedded, expected)
        self.assertAllEqual(embedded._keras_mask, ids != 0)
        symbolic = embedding(keras.Input((None,)))
        self.assertEqual(symbolic.shape, (None, None, 8))
        self.assertIsNotNone(getattr(symbolic, "_keras_mask", None))

    def test_ids_that_would_lose_the_mask_or_fail_later_are_named(self):
        embedding = layers.ScaledEmbedding(10, 8, mask_zero=True)
        with self.assertRaisesRegex(TypeError, "tokenize the strings"):
            embedding(tf.constant([["a", "b"]]))
        # Float ids of rank 3 would be read as hidden states by compute_mask.
        with self.assertRaisesRegex(TypeError, "pass integer token ids"):
            embedding(np.ones((2, 3, 4), "float32"))
        with self.assertRaisesRegex(ValueError, r"shape \(2, 8\)"):
            embedding(np.ones((2, 8), "float32"), reverse=True)
        with self.assertRaisesRegex(ValueError, "last axis is d_model=8"):
            layers.ScaledEmbedding(10, 8)(
                np.ones((2, 3, 6), "float32"), reverse=True
            )
        with self.assertRaisesRegex(TypeError, "mask_zero=1"):
            layers.ScaledEmbedding(10, 8, mask_zero=1)

    def test_subclassed_model_with_mask_zero_reloads_its_weights(self):
        model = SubclassedEncoder()
        model.compile(
            optimizer="adam",
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        ids = np.array([[5, 6, 7, 0], [1, 2, 3, 4]], "int32")
        model.fit(ids, ids, verbose=0)
        path = os.path.join(self.get_temp_dir(), "subclassed.keras")
        model.save(path)
        with warnings.catch_warnings():
            # "cannot be built automatically" came before the weights were
            # silently left at their initial values.
            warnings.simplefilter("error")
            revived = keras.models.load_model(path)
        self.assertAllEqual(
            revived.predict(ids, verbose=0), model.predict(ids, verbose=0)
        )
        self.assertEqual(len(revived.weights), len(model.weights))
        for revived_weight, weight in zip(revived.weights, model.weights):
            self.assertAllEqual(revived_weight, weight)


@keras.saving.register_keras_serializable(package="keras_transformer_tests")
class SubclassedEncoder(keras.Model):
    """A user's subclassed model (built by Keras on float placeholders)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embedding = layers.ScaledEmbedding(50, 16, mask_zero=True)
        self.encoder = layers.TransformerEncoder(1, 2, 32)
        self.logits = keras.layers.Dense(50)

    def call(self, ids):
        return self.logits(self.encoder(self.embedding(ids)))


class StackTest(TestCase):
    def test_encoder_and_decoder_config_round_trips(self):
        for cls in (layers.TransformerEncoder, layers.TransformerDecoder):
            stack = cls(num_layers=2, num_heads=2, d_ff=8, norm_position="pre")
            revived = self.assert_serialization_round_trip(stack)
            self.assertLen(revived.sublayers, 2)
            self.assertIsNotNone(revived.final_norm)

    @parameterized.parameters("post", "pre")
    def test_stacks_end_normalised(self, norm_position):
        # Post-norm's last residual normalises; pre-norm stacks apply their
        # final layer norm (its gain 1 and bias 0 before training).
        x = np.random.default_rng(4).normal(3.0, 5.0, size=(2, 5, 8))
        memory = np.random.default_rng(5).normal(size=(2, 4, 8))
        for stack, kwargs in (
            (layers.TransformerEncoder, {}),
            (layers.TransformerDecoder, {"memory": memory.astype("float32")}),
        ):
            layer = stack(
                num_layers=2, num_heads=2, d_ff=16, norm_position=norm_position
            )
            outputs = np.asarray(layer(x.astype("float32"), **kwargs))
            self.assertAllClose(outputs.mean(-1), np.zeros((2, 5)), atol=1e-5)
            self.assertAllClose(outputs.std(-1), np.ones((2, 5)), atol=1e-3)

    @parameterized.product(decoder=(False, True), norm_position=("post", "pre"))
    def test_layers_compose_their_sublayers_as_the_paper(
        self, decoder, norm_position
    ):
        # Section 3.1: LayerNorm(x + Sublayer(x)) after each sublayer
        # (post), or x + Sublayer(LayerNorm(x)) (pre); the decoder's
        # sublayers are causal self-attention, cross-attention over the
        # memory and the feed-forward network.
        rng = np.random.default_rng(6)
        x = rng.normal(size=(2, 5, 8)).astype("float32")
        memory = rng.normal(size=(2, 4, 8)).astype("float32")
        kwargs = dict(
            num_heads=2, d_ff=16, dropout=0.0, norm_position=norm_position
        )
        if decoder:
            layer = layers.TransformerDecoderLayer(**kwargs)
            outputs = layer(x, memory=memory)
            sublayers = [
                lambda q: layer.self_attention(q, use_causal_mask=True),
                lambda q: layer.cross_attention(q, memory=memory),
                layer.feed_forward,
            ]
        else:
            layer = layers.TransformerEncoderLayer(**kwargs)
            outputs = layer(x)
            sublayers = [layer.self_attention, layer.feed_forward]

        def norm(v):
            centred = v - v.mean(-1, keepdims=True)
            return centred / np.sqrt(v.var(-1, keepdims=True) + 1e-6)

        h = x
        for sublayer in sublayers:
            if norm_position == "post":
                h = norm(h + np.asarray(sublayer(h)))
            else:
                h = h + np.asarray(sublayer(norm(h)))
        self.assertAllClose(outputs, h, atol=1e-5)

    def test_layer_config_round_trips(self):
        for cls in (
            layers.TransformerEncoderLayer,
            layers.TransformerDecoderLayer,
        ):
            for attention_bias in (False, True):
                revived = self.assert_serialization_round_trip(
                    cls(
                        num_heads=2,
                        d_ff=8,
                        key_dim=3,
                        value_dim=5,
                        dropout=0.2,
                        attention_bias=attention_bias,
                    )
                )
                self.assertIs(revived.attention_bias, attention_bias)

    def attention_biases(self, layer):
        """The bias names of `layer`'s attention sublayers."""
        return sorted(
            v.path.split("/")[-1]
            for v in layer.weights
            if "attention/" in v.path and v.path.endswith("_bias")
        )

    def test_attention_bias_switches_every_attention_projection_bias(self):
        x = np.ones((2, 3, 8), "float32")
        biases = ["key_bias", "output_bias", "query_bias", "value_bias"]
        two_layers, with_memory = dict(num_layers=2), {"memory": x}
        for cls, stack, memory, attentions in (
            (layers.TransformerEncoderLayer, {}, {}, 1),
            (layers.TransformerDecoderLayer, {}, with_memory, 2),  # self, cross
            (layers.TransformerEncoder, two_layers, {}, 2),
            (layers.TransformerDecoder, two_layers, with_memory, 4),
        ):
            # The paper's (section 3.2.2) by default: none.
            layer = cls(num_heads=2, d_ff=8, **stack)
            layer(x, **memory)
            self.assertIs(layer.get_config()["attention_bias"], False)
            self.assertEqual(self.attention_biases(layer), [])
            layer = cls(num_heads=2, d_ff=8, attention_bias=True, **stack)
            layer(x, **memory)
            self.assertEqual(
                self.attention_biases(layer), sorted(biases * attentions)
            )

    def test_configs_saved_without_attention_bias_had_the_biases(self):
        for layer in (
            layers.TransformerEncoderLayer(num_heads=2, d_ff=8),
            layers.TransformerDecoderLayer(num_heads=2, d_ff=8),
            layers.TransformerEncoder(num_layers=1, num_heads=2, d_ff=8),
            layers.TransformerDecoder(num_layers=1, num_heads=2, d_ff=8),
        ):
            config = keras.saving.serialize_keras_object(layer)
            del config["config"]["attention_bias"]  # as before the switch
            with self.assertWarnsRegex(
                UserWarning,
                f"The {type(layer).__name__} layer config has no "
                "attention_bias: taking attention_bias=True",
            ):
                revived = keras.saving.deserialize_keras_object(config)
            self.assertIs(revived.get_config()["attention_bias"], True)
            for sublayer in getattr(revived, "sublayers", [revived]):
                self.assertIs(sublayer.attention_bias, True)

    def test_bad_num_layers(self):
        with self.assertRaisesRegex(ValueError, "num_layers=0"):
            layers.TransformerEncoder(num_layers=0, num_heads=2, d_ff=8)

    @parameterized.parameters(
        layers.TransformerEncoderLayer, layers.TransformerDecoderLayer
    )
    def test_head_width_needs_d_model_divisible_by_heads(self, cls):
        x = np.ones((1, 2, 16), "float32")
        # A decoder layer attends over a memory too.
        memory = {} if cls is layers.TransformerEncoderLayer else {"memory": x}
        for num_heads in (3, 32):
            with self.assertRaisesRegex(
                ValueError,
                "`d_model` must be divisible by `num_heads`.*"
                f"Received: d_model=16, num_heads={num_heads}",
            ):
                cls(num_heads=num_heads, d_ff=8)(x, **memory)
        # An explicit head width needs no divisibility.
        layer = cls(num_heads=3, d_ff=8, key_dim=4)
        self.assertEqual(layer(x, **memory).shape, x.shape)

    def test_bad_layer_arguments(self):
        # All raised at construction (the attention sublayers are made by
        # `build`), each naming the argument given.
        for kwargs, message in (
            (dict(num_heads=0), "Received: num_heads=0"),
            (dict(num_heads=True), "Received: num_heads=True"),
            (dict(key_dim=0), "Received: key_dim=0"),
            (dict(value_dim=-2), "Received: value_dim=-2"),
            (dict(dropout=-0.1), "Received: dropout=-0.1"),
            (dict(attention_dropout=1.5), "Received: attention_dropout=1.5"),
            (dict(layer_norm_epsilon=0.0), "Received: layer_norm_epsilon=0.0"),
            (
                dict(attention_bias=1),
                "True or False. Received: attention_bias=1",
            ),
            (dict(attention_bias="no"), "Received: attention_bias='no'"),
        ):
            arguments = {"num_heads": 2, "d_ff": 8, **kwargs}
            with self.assertRaisesRegex(ValueError, message):
                layers.TransformerEncoderLayer(**arguments)
            with self.assertRaisesRegex(ValueError, message):
                layers.TransformerDecoder(num_layers=1, **arguments)


class NumpyArgumentsTest(TestCase):
    """Sizes and rates may be numpy scalars (e.g. read from an array or a
    sweep); the configs keep Python numbers, which JSON can write."""

    @parameterized.named_parameters(
        ("attention", layers.MultiHeadAttention, dict(num_heads=2, key_dim=4)),
        (
            "attention_dims",
            layers.MultiHeadAttention,
            dict(num_heads=2, key_dim=4, value_dim=3, output_dim=8),
        ),
        ("feed_forward", layers.PositionwiseFeedForward, dict(d_ff=8)),
        ("embedding", layers.ScaledEmbedding, dict(vocab_size=10, d_model=4)),
        ("positions", layers.LearnedPositionalEmbedding, dict(max_length=6)),
        (
            "encoder_layer",
            layers.TransformerEncoderLayer,
            dict(num_heads=2, d_ff=8, key_dim=3, value_dim=5),
        ),
        (
            "decoder_layer",
            layers.TransformerDecoderLayer,
            dict(num_heads=2, d_ff=8),
        ),
        (
            "encoder",
            layers.TransformerEncoder,
            dict(num_layers=2, num_heads=2, d_ff=8, key_dim=3),
        ),
        (
            "decoder",
            layers.TransformerDecoder,
            dict(num_layers=1, num_heads=2, d_ff=8),
        ),
    )
    def test_numpy_integers_are_stored_as_ints_and_serialize(self, cls, sizes):
        layer = cls(**{name: np.int64(size) for name, size in sizes.items()})
        config = layer.get_config()
        for name, size in sizes.items():
            self.assertIs(type(config[name]), int, name)
            self.assertEqual(config[name], size)
        # JSON, as a `.keras` file stores it.
        self.assert_serialization_round_trip(layer)
        self.assert_config_round_trip(layer)

    @parameterized.named_parameters(
        (
            "attention",
            layers.MultiHeadAttention,
            dict(num_heads=2, key_dim=4),
            dict(dropout=0.1),
        ),
        (
            "feed_forward",
            layers.PositionwiseFeedForward,
            dict(d_ff=8),
            dict(activation_dropout=0.1),
        ),
        (
            "encoder_layer",
            layers.TransformerEncoderLayer,
            dict(num_heads=2, d_ff=8),
            dict(dropout=0.1, attention_dropout=0.2, layer_norm_epsilon=1e-5),
        ),
        (
            "decoder",
            layers.TransformerDecoder,
            dict(num_layers=1, num_heads=2, d_ff=8),
            dict(dropout=0.1, attention_dropout=0.2, layer_norm_epsilon=1e-5),
        ),
    )
    def test_numpy_floats_are_stored_as_floats_and_serialize(
        self, cls, sizes, rates
    ):
        layer = cls(
            **sizes, **{name: np.float32(rate) for name, rate in rates.items()}
        )
        config = layer.get_config()
        for name, rate in rates.items():
            self.assertIs(type(config[name]), float, name)
            self.assertAllClose(config[name], rate)
        self.assert_serialization_round_trip(layer)

    def test_bools_and_floats_are_still_rejected(self):
        for value in (True, np.True_, 2.0, np.float64(2.0), "2"):
            with self.assertRaisesRegex(
                ValueError, "`num_heads` must be a positive integer"
            ):
                layers.TransformerEncoderLayer(num_heads=value, d_ff=8)
        with self.assertRaisesRegex(
            ValueError, re.escape("Received: d_ff=np.int32(0)")
        ):
            layers.TransformerEncoder(
                num_layers=1, num_heads=2, d_ff=np.int32(0)
            )


class KerasMaskTest(TestCase):
    """A Keras mask (e.g. of `Embedding(mask_zero=True)`) is the padding."""

    def setUp(self):
        super().setUp()
        self.source = np.array([[5, 6, 7, 0], [4, 3, 0, 0]], "int32")
        self.embedding = keras.layers.Embedding(10, 8, mask_zero=True)
        self.target = np.random.default_rng(3).normal(size=(2, 3, 8))
        self.target = self.target.astype("float32")

    def test_encoders_use_and_keep_it(self):
        padding = layers.padding_mask(self.source)
        for encoder in (
            layers.TransformerEncoderLayer(num_heads=2, d_ff=16),
            layers.TransformerEncoder(num_layers=2, num_heads=2, d_ff=16),
        ):
            masked = self.embedding(self.source)
            outputs = encoder(masked)
            # It used to be ignored: the padding was attended.
            unmasked = tf.identity(masked)  # the same values, no Keras mask
            self.assertAllClose(
                outputs, encoder(unmasked, padding_mask=padding)
            )
            self.assertAllEqual(outputs._keras_mask, self.source != 0)

    def test_decoders_take_it_as_the_memory_mask(self):
        # Keras passes the memory's [B, S] mask as `memory_mask`; with as
        # many heads as sentences it used to mask heads, silently.
        memory = self.embedding(self.source)
        padding = layers.padding_mask(self.source)
        for decoder in (
            layers.TransformerDecoderLayer(num_heads=2, d_ff=16),
            layers.TransformerDecoder(num_layers=2, num_heads=2, d_ff=16),
        ):
            self.assertAllClose(
                decoder(self.target, memory=memory),
                decoder(self.target, memory=memory, memory_mask=padding),
            )

    def test_decoder_stacks_keep_the_targets_mask(self):
        # The stack used to warn that it destroys the mask (while its last
        # layer's output kept it).
        target = tf.constant(self.target)
        target._keras_mask = tf.constant(
            [[True, True, False], [True, False, False]]
        )
        memory = self.embedding(self.source)
        decoder = layers.TransformerDecoder(num_layers=1, num_heads=2, d_ff=16)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            outputs = decoder(target, memory=memory)
        self.assertAllEqual(outputs._keras_mask, target._keras_mask)

    def test_a_targets_mask_adds_to_the_causal_mask(self):
        # Both masks hold (AND): a target without padding gives the causal
        # decoder's output, and no position sees a later one.
        target = tf.constant(self.target)
        target._keras_mask = tf.ones((2, 3), tf.bool)
        memory = self.embedding(self.source)
        decoder = layers.TransformerDecoderLayer(num_heads=2, d_ff=16)
        outputs, weights = decoder(
            target, memory=memory, return_attention_weights=True
        )
        self.assertAllClose(
            outputs, decoder(tf.identity(target), memory=memory)
        )
        self.assertAllEqual(
            np.triu(weights["self"], k=1), np.zeros((2, 2, 3, 3))
        )

    def test_functional_model_with_a_masking_embedding(self):
        source = keras.Input((None,), dtype="int32")
        target = keras.Input((None, 8))
        encoder = layers.TransformerEncoder(num_layers=1, num_heads=2, d_ff=16)
        decoder = layers.TransformerDecoder(num_layers=1, num_heads=2, d_ff=16)
        memory = encoder(self.embedding(source))
        model = keras.Model([source, target], decoder(target, memory=memory))
        padding = layers.padding_mask(self.source)
        expected = decoder(
            self.target,
            memory=encoder(
                tf.identity(self.embedding(self.source)), padding_mask=padding
            ),
            memory_mask=padding,
        )
        self.assertAllClose(model([self.source, self.target]), expected)

    def test_position_wise_layers_carry_it_to_the_encoder(self):
        # Every Transformer has a positional layer between its embedding and
        # its encoder; they used to drop the mask, and the padding was
        # attended (a Keras warning the only sign).
        padding = layers.padding_mask(self.source)
        encoder = layers.TransformerEncoder(num_layers=1, num_heads=2, d_ff=16)
        for positional in (
            layers.SinusoidalPositionalEncoding(),
            layers.LearnedPositionalEmbedding(max_length=4),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # No sublayer drops the mask.
                outputs = encoder(positional(self.embedding(self.source)))
            unmasked = positional(tf.identity(self.embedding(self.source)))
            self.assertAllClose(
                outputs, encoder(unmasked, padding_mask=padding)
            )
            self.assertAllEqual(outputs._keras_mask, self.source != 0)

    def test_attention_masks_the_keys_as_keras_does(self):
        masked = self.embedding(self.source)
        unmasked = tf.identity(masked)
        padding = layers.padding_mask(self.source)
        attention = layers.MultiHeadAttention(num_heads=2, key_dim=4)
        outputs = attention(masked)
        self.assertAllClose(
            outputs, attention(unmasked, attention_mask=padding)
        )
        self.assertAllEqual(outputs._keras_mask, self.source != 0)
        # Cross-attention: the memory's mask.
        self.assertAllClose(
            attention(self.target, memory=masked),
            attention(self.target, memory=unmasked, attention_mask=padding),
        )

    def test_a_masked_input_with_an_explicit_padding_mask(self):
        # Keras passes `mask` only when `inputs` is the one tensor argument;
        # the layer read it from `inputs` and its sublayers warned.
        encoder = layers.TransformerEncoderLayer(num_heads=2, d_ff=16)
        padding = layers.padding_mask(self.source)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            outputs = encoder(self.embedding(self.source), padding_mask=padding)
        self.assertAllEqual(outputs._keras_mask, self.source != 0)

    def test_a_causal_padding_mask_makes_a_decoder_only_encoder(self):
        # As the README writes it: a [B, T, T] mask is taken whole.
        ids = np.array([[5, 6, 7, 8, 0], [4, 3, 9, 0, 0]])
        mask = layers.causal_mask(5, 5) & layers.padding_mask(ids)
        encoder = layers.TransformerEncoder(1, num_heads=2, d_ff=16)
        x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
        outputs = encoder(x, padding_mask=mask)
        for position in (1, 2):
            with self.subTest(position=position):
                changed = x.copy()
                changed[:, position] += 1.0
                after = encoder(changed, padding_mask=mask)
                # Earlier positions do not see it, the next one does.
                self.assertAllClose(after[:, :position], outputs[:, :position])
                self.assertNotAllClose(
                    after[:, position + 1], outputs[:, position + 1]
                )

    def test_a_sentence_padding_mask_of_a_keras_masks_shape(self):
        # [B, S] with B == S: it used to be read as a [T, S] mask, the same
        # for every sentence, silently.
        source = np.array([[5, 6, 0], [4, 0, 0], [1, 2, 3]], "int32")
        inputs = tf.identity(self.embedding(source))
        for layer in (
            layers.TransformerEncoderLayer(num_heads=2, d_ff=16),
            layers.TransformerEncoder(num_layers=1, num_heads=2, d_ff=16),
        ):
            self.assertAllClose(
                layer(inputs, padding_mask=source != 0),
                layer(inputs, padding_mask=layers.padding_mask(source)),
            )


class InitializationTest(TestCase):
    """Each kernel its own draw: one unseeded Keras initializer instance
    gives every weight it makes the same values."""

    def kernels(self, layer):
        return [w.numpy().ravel() for w in layer.weights if "kernel" in w.path]

    def assert_distinct(self, kernels):
        for i, first in enumerate(kernels):
            for second in kernels[i + 1 :]:
                size = min(first.size, second.size)
                self.assertFalse(np.array_equal(first[:size], second[:size]))

    def test_attention_and_feed_forward_kernels_start_distinct(self):
        x = np.ones((2, 3, 16), "float32")
        for make in (
            lambda **init: layers.MultiHeadAttention(4, 4, **init),
            lambda **init: layers.PositionwiseFeedForward(64, **init),
        ):
            layer = make()
            layer(x)
            self.assert_distinct(self.kernels(layer))
            # A seed makes them reproducible, still distinct.
            seeded = [
                make(
                    kernel_initializer=keras.initializers.GlorotUniform(seed=7)
                )
                for _ in range(2)
            ]
            for layer in seeded:
                layer(x)
            self.assert_distinct(self.kernels(seeded[0]))
            for a, b in zip(self.kernels(seeded[0]), self.kernels(seeded[1])):
                self.assertAllEqual(a, b)


class InputShapeTest(TestCase):
    def test_inputs_without_a_known_width_are_named(self):
        for layer in (
            layers.MultiHeadAttention(2, 4),
            layers.TransformerEncoderLayer(num_heads=2, d_ff=16),
            layers.TransformerDecoderLayer(num_heads=2, d_ff=16),
        ):
            for shape in ((16,), (None, None)):
                with self.assertRaisesRegex(
                    ValueError,
                    r"of shape \[batch, length, width\] with a known width",
                ):
                    if isinstance(layer, layers.TransformerDecoderLayer):
                        layer(keras.Input(shape), memory=keras.Input((None, 8)))
                    else:
                        layer(keras.Input(shape))


class CallShapeTest(TestCase):
    def test_mismatched_batches_and_mask_lengths_are_named(self):
        query = np.ones((2, 4, 16), "float32")
        memory = np.ones((3, 5, 16), "float32")
        with self.assertRaisesRegex(
            ValueError, r"Axis 0 of `memory` must match axis 0 of `query` \(2\)"
        ):
            layers.TransformerDecoderLayer(num_heads=4, d_ff=32)(
                query, memory=memory
            )
        # The layers' own mask arguments are named, not the attention's
        # `attention_mask` they become.
        for layer, padding_mask, message in (
            (
                layers.TransformerEncoderLayer(num_heads=4, d_ff=32),
                np.ones((2, 1, 7), bool),
                r"Axis -1 of `padding_mask` must match axis 1 of `inputs` "
                r"\(4\)\. Received: padding_mask of shape \(2, 1, 7\)",
            ),
            (
                layers.TransformerEncoder(num_layers=1, num_heads=4, d_ff=32),
                np.ones((3, 4), bool),
                r"Axis 0 of `padding_mask` must match axis 0 of `inputs` \(2\)",
            ),
        ):
            with self.assertRaisesRegex(ValueError, message):
                layer(query, padding_mask=padding_mask)
        for decoder in (
            layers.TransformerDecoderLayer(num_heads=4, d_ff=32),
            layers.TransformerDecoder(num_layers=1, num_heads=4, d_ff=32),
        ):
            with self.assertRaisesRegex(
                ValueError,
                r"Axis -1 of `memory_mask` must match axis 1 of `memory` \(5\)",
            ):
                decoder(
                    query, memory=memory[:2], memory_mask=np.ones((2, 7), bool)
                )

    def test_integer_vectors_are_named(self):
        # Keras casts float inputs only; integers failed in a MatMul kernel.
        vectors = np.ones((2, 4, 16), "float32")
        for call, name in (
            (
                lambda: layers.TransformerEncoder(1, 4, 32)(
                    vectors.astype(int)
                ),
                "query",
            ),
            (
                lambda: layers.TransformerDecoderLayer(4, 32)(
                    vectors, memory=vectors.astype("int32")
                ),
                "memory",
            ),
        ):
            with self.assertRaisesRegex(
                TypeError,
                f"takes `{name}` as float vectors .* Received: {name} of "
                "dtype int",
            ):
                call()

    def test_use_bias_must_be_a_bool(self):
        with self.assertRaisesRegex(ValueError, "Received: use_bias='no'"):
            layers.MultiHeadAttention(2, 4, use_bias="no")


class DecoderMemoryTest(TestCase):
    def test_decoders_need_a_memory(self):
        # Without one, the cross-attention used to attend over the target.
        x = np.ones((2, 3, 8), "float32")
        for decoder in (
            layers.TransformerDecoderLayer(num_heads=2, d_ff=16),
            layers.TransformerDecoder(num_layers=1, num_heads=2, d_ff=16),
        ):
            for inputs in (x, keras.Input((None, 8))):
                with self.assertRaisesRegex(
                    ValueError, "Received: memory=None"
                ):
                    decoder(inputs)


class DecodingHelpersTest(TestCase):
    def test_helpers_of_an_unbuilt_layer_say_to_build_it(self):
        decoder = layers.TransformerDecoder(num_layers=1, num_heads=2, d_ff=16)
        decoder_layer = layers.TransformerDecoderLayer(num_heads=2, d_ff=16)
        attention = layers.MultiHeadAttention(2, 4)
        feed_forward = layers.PositionwiseFeedForward(16)
        memory = np.ones((2, 3, 8), "float32")
        for layer, name, call in (
            (decoder, "initial_cache", lambda: decoder.initial_cache(2, 4)),
            (decoder, "project_memory", lambda: decoder.project_memory(memory)),
            (decoder, "decoding_weights", decoder.decoding_weights),
            (decoder_layer, "decoding_weights", decoder_layer.decoding_weights),
            (
                attention,
                "project_memory",
                lambda: attention.project_memory(memory),
            ),
            (attention, "decoding_weights", attention.decoding_weights),
            (feed_forward, "decoding_weights", feed_forward.decoding_weights),
        ):
            message = rf"{type(layer).__name__}\.{name} .* call the layer"
            with (
                self.subTest(type(layer).__name__, method=name),
                self.assertRaisesRegex(ValueError, message),
            ):
                call()

    def test_caches_take_the_compute_dtype_of_the_layers(self):
        decoder = layers.TransformerDecoder(
            num_layers=1, num_heads=2, d_ff=16, dtype="mixed_bfloat16"
        )
        x = np.ones((2, 1, 8), "float32")
        decoder(x, memory=x)
        for max_length in (None, 4):
            (cache,) = decoder.initial_cache(2, max_length)
            _, (new_cache,) = decoder(
                x,
                memory=x,
                self_attention_cache=[cache],
                cache_index=None if max_length is None else 0,
            )
            for name in ("key", "value"):
                self.assertEqual(cache[name].dtype, "bfloat16")
                self.assertEqual(new_cache[name].dtype, cache[name].dtype)


class PaddingMaskTest(TestCase):
    def test_output_shape(self):
        layer = layers.PaddingMask()
        ids = np.array([[4, 0, 0]], "int32")
        self.assertEqual(layer.compute_output_shape((None, 3)), (None, 1, 3))
        self.assertEqual(
            tuple(layer(ids).shape), layer.compute_output_shape((1, 3))
        )

    def test_pad_id_and_config(self):
        layer = layers.PaddingMask(pad_id=np.int64(7))
        self.assertAllEqual(
            layer(np.array([[4, 7, 0]])), [[[True, False, True]]]
        )
        self.assertEqual(
            layers.PaddingMask.from_config(layer.get_config()).pad_id, 7
        )
        with self.assertRaisesRegex(ValueError, "Received: pad_id='0'"):
            layers.PaddingMask(pad_id="0")


def _spec(x):
    """The `keras.KerasTensor` of a tensor; other arguments as they are."""
    return keras.KerasTensor(x.shape, dtype=x.dtype) if tf.is_tensor(x) else x


class OutputsTest(TestCase):
    def test_unpack_inverts_pack(self):
        for weights in (None, "weights"):
            for cache in (None, "cache"):
                with self.subTest(weights=weights, cache=cache):
                    packed = pack_outputs("outputs", weights, cache)
                    if weights is None and cache is None:
                        self.assertEqual(packed, "outputs")
                    self.assertEqual(
                        unpack_outputs(
                            packed, weights is not None, cache is not None
                        ),
                        ("outputs", weights, cache),
                    )

    def test_a_missing_part_is_named(self):
        with self.assertRaisesRegex(
            ValueError, r"Expected 2 outputs.*Received: 1"
        ):
            unpack_outputs("outputs", with_weights=True, with_cache=False)

    def test_a_decoder_layer_is_not_an_encoder_layer(self):
        # Code that picks a layer's call by its class sees two kinds.
        decoder_layer = layers.TransformerDecoderLayer(num_heads=2, d_ff=8)
        self.assertNotIsInstance(decoder_layer, layers.TransformerEncoderLayer)
        self.assertIsInstance(decoder_layer, layers.TransformerLayer)


class WeightPathsTest(TestCase):
    def test_weight_paths_and_order_are_those_saved_files_hold(self):
        # A `.keras` file stores each layer's weights by these paths, in
        # this order: a refactor that renames a sublayer or builds them in
        # another order would no longer load the models already trained.
        encoder_layer = layers.TransformerEncoderLayer(
            num_heads=2, d_ff=16, name="e"
        )
        encoder_layer(np.zeros((1, 3, 8), "float32"))
        decoder_layer = layers.TransformerDecoderLayer(
            num_heads=2, d_ff=16, name="d"
        )
        decoder_layer(
            np.zeros((1, 3, 8), "float32"), memory=np.zeros((1, 4, 8))
        )

        def paths(prefix, cross):
            residuals = ["self_attention", "feed_forward"] + [
                "cross_attention"
            ] * cross
            attentions = ["self_attention"] + ["cross_attention"] * cross
            return (
                [
                    f"{prefix}/feed_forward/{name}"
                    for name in (
                        "inner/kernel",
                        "inner/bias",
                        "outer/kernel",
                        "outer/bias",
                    )
                ]
                + [
                    f"{prefix}/{residual}_residual/layer_norm/{name}"
                    for residual in residuals
                    for name in ("gamma", "beta")
                ]
                + [
                    f"{prefix}/{attention}/{name}_kernel"
                    for attention in attentions
                    for name in ("query", "key", "value", "output")
                ]
            )

        self.assertEqual(
            [w.path for w in encoder_layer.weights], paths("e", False)
        )
        self.assertEqual(
            [w.path for w in decoder_layer.weights], paths("d", True)
        )


class SymbolicCallTest(TestCase):
    """Symbolic calls (functional models) return what eager calls return."""

    def assert_symbolic_call_matches(self, layer, *args, **kwargs):
        eager = layer(*args, **kwargs)  # also builds the layer
        symbolic = layer(
            *tf.nest.map_structure(_spec, args),
            **tf.nest.map_structure(_spec, kwargs),
        )
        tf.nest.assert_same_structure(symbolic, eager)
        for spec, tensor in zip(
            tf.nest.flatten(symbolic), tf.nest.flatten(eager)
        ):
            self.assertIsInstance(spec, keras.KerasTensor)
            self.assertEqual(spec.shape, tuple(tensor.shape))
            self.assertEqual(spec.dtype, tensor.dtype.name)

    def test_attention(self):
        layer = layers.MultiHeadAttention(4, 8, value_dim=6, output_dim=10)
        rng = np.random.default_rng(0)
        x = tf.constant(rng.normal(size=(2, 3, 12)), tf.float32)
        memory = tf.constant(rng.normal(size=(2, 5, 12)), tf.float32)
        mask = layers.padding_mask(tf.constant([[5] * 5, [5] * 3 + [0] * 2]))
        step = x[:, :1]
        rows = in_place_cache_rows(tf.zeros([2, 4], tf.int32), 0, 4)[1]
        for case, call in (
            ("self", lambda: (x,)),
            ("cross", lambda: (x, memory, mask)),
            ("projected", lambda: (step, layer.project_memory(memory), mask)),
            (
                "grouped",
                lambda: (
                    tf.tile(step, [2, 1, 1]),
                    layer.project_memory(memory),
                ),
            ),
        ):
            for weights in (False, True):
                with self.subTest(case, weights=weights):
                    self.assert_symbolic_call_matches(
                        layer, *call(), return_attention_weights=weights
                    )
        for case, cache, kwargs in (
            ("growing", layer.initial_cache(2, None), {}),
            ("fixed", layer.initial_cache(2, 4), dict(cache_index=1)),
            (
                "in place",
                layer.initial_cache(2, 4, in_place=True),
                dict(cache_index=0, cache_rows=rows),
            ),
        ):
            for weights in (False, True):
                with self.subTest(case, weights=weights):
                    self.assert_symbolic_call_matches(
                        layer,
                        step,
                        cache=cache,
                        return_attention_weights=weights,
                        **kwargs,
                    )

    def test_encoder_and_decoder_layers_and_stacks(self):
        rng = np.random.default_rng(1)
        x = tf.constant(rng.normal(size=(2, 3, 16)), tf.float32)
        memory = tf.constant(rng.normal(size=(2, 5, 16)), tf.float32)
        mask = layers.padding_mask(tf.constant([[5] * 5, [5] * 3 + [0] * 2]))
        arguments = dict(num_heads=2, d_ff=8)
        for encoder in (
            layers.TransformerEncoderLayer(**arguments),
            layers.TransformerEncoder(num_layers=2, **arguments),
        ):
            for weights in (False, True):
                with self.subTest(encoder.name, weights=weights):
                    self.assert_symbolic_call_matches(
                        encoder,
                        memory,
                        padding_mask=mask,
                        return_attention_weights=weights,
                    )
        layer = layers.TransformerDecoderLayer(**arguments)
        stack = layers.TransformerDecoder(num_layers=2, **arguments)
        for decoder, caches in (
            (
                layer,
                lambda: (
                    layer.self_attention.initial_cache(2, 4),
                    layer.cross_attention.project_memory(memory),
                ),
            ),
            (
                stack,
                lambda: (
                    stack.initial_cache(2, 4),
                    stack.project_memory(memory),
                ),
            ),
        ):
            decoder(x, memory=memory)  # builds it
            self_cache, cross_cache = caches()
            for weights in (False, True):
                with self.subTest(decoder.name, weights=weights):
                    self.assert_symbolic_call_matches(
                        decoder,
                        x,
                        memory=memory,
                        memory_mask=mask,
                        return_attention_weights=weights,
                    )
                    self.assert_symbolic_call_matches(
                        decoder,
                        x[:, :1],
                        memory_mask=mask,
                        self_attention_cache=self_cache,
                        cache_index=0,
                        cross_attention_cache=cross_cache,
                        return_attention_weights=weights,
                    )

    def test_functional_model_exposes_attention_weights(self):
        encoder = layers.TransformerEncoder(num_layers=2, num_heads=2, d_ff=8)
        inputs = keras.Input((None, 16))
        model = keras.Model(
            inputs, encoder(inputs, return_attention_weights=True)
        )
        x = np.random.default_rng(2).normal(size=(2, 3, 16)).astype("float32")
        self.assertAllClose(model(x), encoder(x, return_attention_weights=True))


class ConfigTest(TestCase):
    """Every constructor argument is in the config and survives a round
    trip (comparing a revived layer's config with the original's cannot
    see an argument that neither holds)."""

    @parameterized.named_parameters(
        ("dense", layers.Dense, {"units": 4}, {
            "use_bias": False, "activation": "relu",
            "kernel_initializer": "zeros",
        }),
        ("dropout", layers.Dropout, {"rate": 0.1}, {"seed": 3}),
        ("layer_norm", layers.LayerNormalization, {}, {"epsilon": 1e-6}),
        ("learned_positions", layers.LearnedPositionalEmbedding,
         {"max_length": 8}, {
            "initializer": "zeros"
        }),
        ("attention", layers.MultiHeadAttention,
         {"num_heads": 2, "key_dim": 4}, {
            "value_dim": 3, "output_dim": 6, "dropout": 0.1, "use_bias": False,
            "kernel_initializer": "zeros", "bias_initializer": "ones",
        }),
        ("padding_mask", layers.PaddingMask, {}, {"pad_id": 5}),
        ("feed_forward", layers.PositionwiseFeedForward, {"d_ff": 8}, {
            "activation": "gelu", "activation_dropout": 0.1,
            "kernel_initializer": "zeros",
        }),
        ("residual", layers.ResidualConnection, {"dropout": 0.1}, {
            "norm_position": "pre", "epsilon": 1e-3
        }),
        ("embedding", layers.ScaledEmbedding,
         {"vocab_size": 10, "d_model": 4}, {
            "embeddings_initializer": "zeros", "mask_zero": True
        }),
        ("sinusoids", layers.SinusoidalPositionalEncoding, {}, {
            "max_wavelength": 500.0
        }),
        *(
            (cls.__name__, cls, {"num_heads": 2, "d_ff": 8, **stack}, {
                "key_dim": 3, "value_dim": 5, "dropout": 0.2,
                "attention_dropout": 0.1, "norm_position": "pre",
                "layer_norm_epsilon": 1e-3, "attention_bias": True,
            })
            for cls, stack in (
                (layers.TransformerEncoderLayer, {}),
                (layers.TransformerDecoderLayer, {}),
                (layers.TransformerEncoder, {"num_layers": 3}),
                (layers.TransformerDecoder, {"num_layers": 3}),
            )
        ),
    )  # fmt: skip
    def test_every_argument_is_kept(self, cls, required, optional):
        default = cls(**required).get_config()
        revived = self.assert_serialization_round_trip(
            cls(**required, **optional)
        )
        config = revived.get_config()
        for name in {**required, **optional}:
            self.assertIn(name, config)
            if not name.endswith(("initializer", "activation")):  # objects
                self.assertEqual(getattr(revived, name), config[name], name)
        for name in optional:
            self.assertNotEqual(config[name], default[name], name)
