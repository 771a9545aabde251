import warnings

import numpy as np
import tensorflow as tf
from absl.testing import parameterized
from keras import ops

from keras_transformer import layers
from keras_transformer.layers.attention_cache import in_place_cache_rows
from tests.test_case import TestCase


def numpy_multi_head_attention(layer, query, memory, mask=None):
    """Eq. 1 and the multi-head formula of section 3.2.2, in NumPy (with
    the layer's biases, if any)."""
    n, dk, dv = layer.num_heads, layer.key_dim, layer.value_dim
    w = {v.path.split("/")[-1]: v.numpy() for v in layer.weights}
    for name in ("query", "key", "value", "output"):
        w.setdefault(f"{name}_bias", 0.0)
    q = query @ w["query_kernel"] + w["query_bias"]
    k = memory @ w["key_kernel"] + w["key_bias"]
    v = memory @ w["value_kernel"] + w["value_bias"]
    heads = []
    for h in range(n):
        qh = q[..., h * dk : (h + 1) * dk]
        kh = k[..., h * dk : (h + 1) * dk]
        vh = v[..., h * dv : (h + 1) * dv]
        scores = qh @ np.swapaxes(kh, -1, -2) / np.sqrt(dk)
        if mask is not None:
            scores = np.where(mask, scores, -1e9)
        scores = scores - scores.max(-1, keepdims=True)
        weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
        heads.append(weights @ vh)
    concat = np.concatenate(heads, axis=-1)
    return concat @ w["output_kernel"] + w["output_bias"]


class MultiHeadAttentionTest(TestCase):
    def make_layer(self, **kwargs):
        # Random biases, so that the NumPy reference checks them too.
        args = dict(
            num_heads=4,
            key_dim=8,
            value_dim=6,
            bias_initializer="random_normal",
        )
        args.update(kwargs)
        return layers.MultiHeadAttention(**args)

    @parameterized.parameters(True, False)
    def test_matches_numpy_reference_with_independent_key_and_value_dims(
        self, use_bias
    ):
        layer = self.make_layer(use_bias=use_bias)
        rng = np.random.default_rng(0)
        query = rng.normal(size=(2, 5, 12)).astype("float32")
        memory = rng.normal(size=(2, 7, 12)).astype("float32")
        outputs = layer(query, memory=memory).numpy()
        self.assertEqual(outputs.shape, (2, 5, 12))
        self.assertAllClose(
            outputs, numpy_multi_head_attention(layer, query, memory), atol=1e-4
        )
        # The paper's projections (section 3.2.2): kernels only.
        names = [v.path.split("/")[-1] for v in layer.weights]
        kernels = [
            "query_kernel",
            "key_kernel",
            "value_kernel",
            "output_kernel",
        ]
        biases = [name.replace("kernel", "bias") for name in kernels]
        self.assertEqual(sorted(names), sorted(kernels + biases * use_bias))
        self.assertEqual(layer.key_bias is None, not use_bias)

    def test_self_attention_with_padding_mask_matches_reference(self):
        layer = self.make_layer()
        rng = np.random.default_rng(1)
        x = rng.normal(size=(2, 6, 12)).astype("float32")
        ids = np.array([[5, 6, 7, 0, 0, 0], [5, 6, 7, 8, 9, 10]], "int32")
        mask = layers.padding_mask(ids)
        outputs = layer(x, attention_mask=mask).numpy()
        expected = numpy_multi_head_attention(layer, x, x, np.asarray(mask))
        self.assertAllClose(outputs, expected, atol=1e-4)

    def test_masked_keys_get_zero_weight_and_rows_sum_to_one(self):
        layer = self.make_layer()
        x = np.random.default_rng(2).normal(size=(1, 4, 12)).astype("float32")
        mask = layers.padding_mask(np.array([[4, 5, 0, 0]], "int32"))
        _, weights = layer(
            x, attention_mask=mask, return_attention_weights=True
        )
        weights = weights.numpy()
        self.assertAllClose(weights.sum(-1), np.ones((1, 4, 4)), atol=1e-5)
        self.assertAllClose(weights[..., 2:], np.zeros((1, 4, 4, 2)))

    def test_query_by_key_and_int_masks_mean_what_bool_masks_do(self):
        # A [T, S] mask broadcasts over the batch and the heads. It used to
        # get a heads axis at 1 like a [B, T, S] one: with T = h = 3 it
        # masked heads, silently, and failed for other shapes.
        layer = self.make_layer(num_heads=3)
        x = np.random.default_rng(13).normal(size=(2, 3, 12)).astype("float32")
        causal = layer(x, use_causal_mask=True)
        self.assertAllClose(
            layer(x, attention_mask=layers.causal_mask(3, 3)), causal
        )
        ids = np.array([[4, 5, 0], [4, 0, 0]], "int32")
        padding = layers.padding_mask(ids)
        self.assertAllClose(
            layer(x, attention_mask=ops.cast(padding, "int32")),
            layer(x, attention_mask=padding),
        )

    @parameterized.parameters("float32", "mixed_float16", "mixed_bfloat16")
    def test_a_fully_masked_row_stays_finite(self, policy):
        layer = self.make_layer(dtype=policy)
        x = np.random.default_rng(14).normal(size=(2, 3, 12)).astype("float32")
        mask = layers.padding_mask(np.array([[0, 0, 0], [4, 5, 6]], "int32"))
        outputs, weights = layer(
            x, attention_mask=mask, return_attention_weights=True
        )
        self.assertTrue(np.isfinite(ops.cast(outputs, "float32")).all())
        self.assertAllClose(weights[0], np.full((4, 3, 3), 1 / 3))

    def test_causal_weights_are_lower_triangular(self):
        layer = self.make_layer()
        x = np.random.default_rng(3).normal(size=(2, 5, 12)).astype("float32")
        _, weights = layer(
            x, use_causal_mask=True, return_attention_weights=True
        )
        upper = np.triu(np.ones((5, 5)), k=1).astype(bool)
        self.assertAllClose(
            weights.numpy()[..., upper], np.zeros((2, 4, 10)), atol=0
        )

    def test_self_attention_cache_equals_full_causal_pass(self):
        layer = self.make_layer()
        x = np.random.default_rng(4).normal(size=(2, 5, 12)).astype("float32")
        full = layer(x, use_causal_mask=True).numpy()
        cache = layer.initial_cache(2, 5)
        steps = []
        for t in range(5):
            out, cache = layer(x[:, t : t + 1], cache=cache, cache_index=t)
            steps.append(out.numpy()[:, 0])
        self.assertAllClose(np.stack(steps, 1), full, atol=1e-5)

    def test_fixed_cache_takes_a_chunk_of_positions_then_steps(self):
        # A prompt written at once (a causal mask inside the chunk), then
        # steps: every position's keys and values land in the cache.
        layer = self.make_layer()
        x = np.random.default_rng(5).normal(size=(2, 5, 12)).astype("float32")
        full = layer(x, use_causal_mask=True).numpy()
        out, cache = layer(
            x[:, :3], cache=layer.initial_cache(2, 6), cache_index=0
        )
        steps = [out.numpy()]
        for t in range(3, 5):
            out, cache = layer(x[:, t : t + 1], cache=cache, cache_index=t)
            steps.append(out.numpy())
        self.assertAllClose(np.concatenate(steps, 1), full, atol=1e-5)
        self.assertAllClose(cache["key"][:, :, 5], np.zeros((2, 4, 8)), atol=0)

    def test_positions_past_a_fixed_cache_are_named(self):
        layer = self.make_layer()
        x = np.ones((2, 3, 12), "float32")
        with self.assertRaisesRegex(
            ValueError, r"`cache_index` 3 with 3 .* 5 pos"
        ):
            layer(x, cache=layer.initial_cache(2, 5), cache_index=3)
        with self.assertRaisesRegex(ValueError, "`cache_index` -1"):
            layer(x[:, :1], cache=layer.initial_cache(2, 5), cache_index=-1)
        in_place = layer.initial_cache(2, 5, in_place=True)
        rows = in_place_cache_rows(tf.zeros((2, 5), tf.int32), 0, 4)[1]
        with self.assertRaisesRegex(ValueError, "one query position per call"):
            layer(x, cache=in_place, cache_index=0, cache_rows=rows)
        with self.assertRaisesRegex(ValueError, "`cache_index` 5 with 1"):
            layer(x[:, :1], cache=in_place, cache_index=5, cache_rows=rows)

    def test_grouped_queries_of_another_batch_or_a_tiled_mask_are_named(self):
        layer = self.make_layer()
        queries = np.ones((6, 1, 12), "float32")
        layer(queries, memory=np.ones((6, 7, 12), "float32"))
        memory = layer.project_memory(np.ones((2, 7, 12), "float32"))
        with self.assertRaisesRegex(
            ValueError, "a multiple G of the memory batch"
        ):
            layer(queries[:5], memory=memory)
        tiled_mask = np.ones((6, 1, 7), bool)
        with self.assertRaisesRegex(
            ValueError,
            r"Axis 0 of `attention_mask` must match axis 0 of `memory\['key'\]",
        ):
            layer(queries, memory=memory, attention_mask=tiled_mask)

    def test_growing_cache_equals_full_causal_pass(self):
        layer = self.make_layer()
        x = np.random.default_rng(4).normal(size=(2, 5, 12)).astype("float32")
        full = layer(x, use_causal_mask=True).numpy()
        cache = layer.initial_cache(2)
        self.assertEqual(cache["key"].shape, (2, 4, 0, 8))
        # Two positions at once (a causal mask inside the chunk), then one.
        out, cache = layer(x[:, :2], cache=cache, use_causal_mask=True)
        steps = [out.numpy()]
        for t in range(2, 5):
            out, cache = layer(x[:, t : t + 1], cache=cache)
            steps.append(out.numpy())
        self.assertEqual(cache["value"].shape, (2, 4, 5, 6))
        self.assertAllClose(np.concatenate(steps, 1), full, atol=1e-5)

    def test_first_step_of_a_growing_cache_is_quiet(self):
        # One key: Keras's softmax warned of an axis of size 1.
        layer = self.make_layer()
        x = np.ones((2, 1, 12), "float32")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            layer(x, cache=layer.initial_cache(2))

    def test_in_place_cache_follows_its_ancestry(self):
        # Beam search: rows continue other rows' hypotheses. The growing
        # cache is gathered; the in-place one stays put and only its
        # ancestry is. Same outputs, and the in-place cache keeps its shape.
        layer = self.make_layer()
        x = (
            np.random.default_rng(10)
            .normal(size=(5, 3, 1, 12))
            .astype("float32")
        )
        parents = [[0, 0, 1], [2, 0, 0], [1, 1, 2], [0, 2, 1]]
        growing = layer.initial_cache(3)
        in_place = layer.initial_cache(3, 5, in_place=True)
        self.assertEqual(in_place["key"].shape, (3, 5, 4, 8))
        ancestry = tf.zeros([3, 5], tf.int32)
        for t in range(5):
            expected, growing = layer(x[t], cache=growing)
            ancestry, rows = in_place_cache_rows(ancestry, t, 4)
            self.assertEqual(rows.shape, (3, 4, t + 1))
            outputs, in_place = layer(
                x[t], cache=in_place, cache_index=t, cache_rows=rows
            )
            self.assertAllClose(outputs, expected, atol=1e-5)
            if t < len(parents):
                growing = tf.nest.map_structure(
                    lambda c, t=t: tf.gather(c, parents[t]), growing
                )
                ancestry = tf.gather(ancestry, parents[t])
        self.assertEqual(in_place["value"].shape, (3, 5, 4, 6))

    def test_in_place_caches_own_their_buffers(self):
        # Grappler merges identical ops (two zero caches would share one
        # buffer, and writing one would write the other); `Empty` is never
        # merged. The writes and reads below interleave in this order.
        layer = self.make_layer()
        x = (
            np.random.default_rng(11)
            .normal(size=(3, 2, 1, 12))
            .astype("float32")
        )

        @tf.function
        def steps(first_step, other, second_step):
            first = layer.initial_cache(2, 2, in_place=True)
            second = layer.initial_cache(2, 2, in_place=True)
            ancestry, rows = in_place_cache_rows(
                tf.zeros([2, 2], tf.int32), 0, 4
            )
            out, first = layer(
                first_step, cache=first, cache_index=0, cache_rows=rows
            )
            with tf.control_dependencies([out]):
                other = tf.identity(other)
            out, second = layer(
                other, cache=second, cache_index=0, cache_rows=rows
            )
            with tf.control_dependencies([out]):
                second_step = tf.identity(second_step)
            _, rows = in_place_cache_rows(ancestry, 1, 4)
            out, _ = layer(
                second_step, cache=first, cache_index=1, cache_rows=rows
            )
            return out

        expected = layer(np.concatenate([x[0], x[2]], 1), use_causal_mask=True)
        self.assertAllClose(steps(*x), expected[:, 1:], atol=1e-5)

    def test_in_place_cache_needs_its_length(self):
        with self.assertRaisesRegex(ValueError, "needs `max_length`"):
            self.make_layer().initial_cache(2, in_place=True)

    def test_cross_attention_cache_equals_memory_pass(self):
        layer = self.make_layer()
        rng = np.random.default_rng(5)
        query = rng.normal(size=(2, 3, 12)).astype("float32")
        memory = rng.normal(size=(2, 7, 12)).astype("float32")
        full = layer(query, memory=memory).numpy()
        cached = layer(query, memory=layer.project_memory(memory)).numpy()
        self.assertAllClose(cached, full, atol=1e-5)

    def test_grouped_queries_equal_tiled_memory(self):
        # Beam search: 3 one-step queries per sentence over untiled memory.
        layer = self.make_layer()
        rng = np.random.default_rng(6)
        query = rng.normal(size=(6, 1, 12)).astype("float32")
        memory = rng.normal(size=(2, 7, 12)).astype("float32")
        mask = layers.padding_mask(
            np.array([[5] * 7, [5] * 4 + [0] * 3], "int32")
        )
        tiled, tiled_weights = layer(
            query,
            memory=np.repeat(memory, 3, axis=0),
            attention_mask=np.repeat(mask, 3, axis=0),
            return_attention_weights=True,
        )
        grouped, weights = layer(
            query,
            memory=layer.project_memory(memory),
            attention_mask=mask,
            return_attention_weights=True,
        )
        self.assertEqual(weights.shape, (6, 4, 1, 7))
        self.assertAllClose(grouped, tiled, atol=1e-5)
        self.assertAllClose(weights, tiled_weights, atol=1e-6)
        self.assertAllClose(weights[3:, ..., 4:], np.zeros((3, 4, 1, 3)))

    def test_decoding_steps_run_their_tiny_matmuls_apart(self):
        # A step's score and value products as Eigen's `BatchMatMulV3`;
        # sequences keep `BatchMatMulV2` (oneDNN's). Values: the cache
        # tests above compare the steps with a full pass.
        layer = self.make_layer()
        x = np.random.default_rng(8).normal(size=(2, 3, 12)).astype("float32")
        layer(x)

        def matmul_types(fn, *args):
            graph = tf.function(fn).get_concrete_function(*args).graph
            return {
                op.type
                for op in graph.get_operations()
                if "BatchMatMul" in op.type
            }

        cache = layer.initial_cache(2)
        step = matmul_types(lambda s: layer(s, cache=cache)[0], x[:, :1])
        projected = layer.project_memory(x)
        cross_step = matmul_types(
            lambda s: layer(s, memory=projected), x[:, :1]
        )
        sequence = matmul_types(lambda s: layer(s, use_causal_mask=True), x)
        self.assertEqual(step, {"BatchMatMulV3"})
        self.assertEqual(cross_step, {"BatchMatMulV3"})
        self.assertEqual(sequence, {"BatchMatMulV2"})

    @parameterized.parameters("mixed_float16", "mixed_bfloat16")
    def test_decoding_steps_under_mixed_precision(self, policy):
        # Half-precision steps keep `tf.matmul` (no float16 kernel for the
        # step's `BatchMatMulV3` on CPU) and match the full pass, also with
        # what is computed outside `__call__` (no autocast there): the
        # decoding weights and the projected memory.
        layer = self.make_layer(dtype=policy)
        rng = np.random.default_rng(9)
        x = rng.normal(size=(2, 3, 12)).astype("float32")
        memory = rng.normal(size=(2, 5, 12)).astype("float32")
        atol = 2e-2 if policy == "mixed_bfloat16" else 2e-3
        full = layer(x, use_causal_mask=True)
        for weights in (None, layer.decoding_weights()):
            cache = layer.initial_cache(2, dtype=layer.compute_dtype)
            steps = []
            for t in range(3):
                out, cache = layer(
                    x[:, t : t + 1], cache=cache, decoding_weights=weights
                )
                steps.append(out)
            self.assertAllClose(ops.concatenate(steps, 1), full, atol=atol)
        projected = layer.project_memory(ops.cast(memory, layer.compute_dtype))
        self.assertEqual(projected["key"].dtype, layer.compute_dtype)
        self.assertEqual(projected["value"].dtype, layer.compute_dtype)
        for weights in (None, layer.decoding_weights(cross_attention=True)):
            self.assertAllClose(
                layer(x, memory=projected, decoding_weights=weights),
                layer(x, memory=memory),
                atol=atol,
            )

    def test_attention_dropout_follows_the_layer_policy(self):
        layer = self.make_layer(dropout=0.5, dtype="mixed_float16")
        self.assertEqual(layer.dropout_layer.dtype_policy.name, "mixed_float16")
        x = np.random.default_rng(12).normal(size=(2, 3, 12)).astype("float32")
        outputs = layer(x, training=True)
        self.assertEqual(outputs.dtype, "float16")
        self.assertNotAllClose(outputs, layer(x))  # dropped some weights

    @parameterized.parameters(True, False)
    def test_decoding_weights_give_the_same_steps(self, use_bias):
        # 4 heads x 128 = 512 floats per kernel row: padded (see
        # `layers.aliasing_padding`); values of 128 and an output of 256.
        layer = self.make_layer(
            key_dim=128, value_dim=128, output_dim=256, use_bias=use_bias
        )
        rng = np.random.default_rng(7)
        x = rng.normal(size=(2, 3, 512)).astype("float32")
        memory = rng.normal(size=(2, 5, 512)).astype("float32")
        layer.build(x.shape, memory.shape)
        weights = layer.decoding_weights()
        self.assertEqual(weights["inputs"][0].shape, (512, 3 * 512 + 16))
        self.assertEqual(weights["output"][0].shape, (512, 256))
        self.assertEqual(weights["inputs"][1] is None, not use_bias)
        cache = ours = layer.initial_cache(2)
        for t in range(3):
            step = x[:, t : t + 1]
            expected, cache = layer(step, cache=cache)
            outputs, ours = layer(step, cache=ours, decoding_weights=weights)
            self.assertAllClose(outputs, expected, atol=1e-4)
            self.assertAllClose(ours, cache, atol=1e-4)
        projected = layer.project_memory(memory)
        cross = layer.decoding_weights(cross_attention=True)
        self.assertEqual(cross["inputs"][0].shape, (512, 512 + 16))
        self.assertAllClose(
            layer(x, memory=projected, decoding_weights=cross),
            layer(x, memory=projected),
            atol=1e-4,
        )

    def test_invalid_arguments(self):
        with self.assertRaisesRegex(ValueError, "num_heads=0"):
            layers.MultiHeadAttention(num_heads=0, key_dim=4)
        with self.assertRaisesRegex(ValueError, "dropout=1.5"):
            layers.MultiHeadAttention(num_heads=2, key_dim=4, dropout=1.5)
        # Not a TypeError from a comparison, nor a bool taken for 1 head.
        with self.assertRaisesRegex(ValueError, "Received: dropout='0.1'"):
            layers.MultiHeadAttention(num_heads=2, key_dim=4, dropout="0.1")
        with self.assertRaisesRegex(ValueError, "Received: num_heads=True"):
            layers.MultiHeadAttention(num_heads=True, key_dim=4)
        for name in ("value_dim", "output_dim"):
            with self.assertRaisesRegex(ValueError, f"Received: {name}=0"):
                layers.MultiHeadAttention(num_heads=2, key_dim=4, **{name: 0})

    def test_mismatched_masks_and_widths_are_named(self):
        # Each used to fail inside a TensorFlow kernel (SelectV2, MatMul).
        layer = layers.MultiHeadAttention(num_heads=2, key_dim=4)
        x = np.ones((2, 5, 8), "float32")
        layer(x)
        for mask, message in (
            (np.ones((2, 6), bool), r"Axis -1 of `query._keras_mask`"),
            (np.ones((3, 5), bool), r"Axis 0 of `query._keras_mask`"),
        ):
            query = tf.identity(x)
            query._keras_mask = tf.constant(mask)  # As `mask_zero` sets it.
            with self.assertRaisesRegex(ValueError, message + r".*\(2, 5, 8\)"):
                layer(query)
        memory = tf.ones((2, 4, 8))
        memory._keras_mask = tf.ones((2, 3), bool)
        with self.assertRaisesRegex(
            ValueError, r"Axis -1 of `memory._keras_mask` must match axis 1 of"
        ):
            layer(x, memory=memory)
        for shape, axis in (((2, 6, 5), -2), ((3, 1, 5), 0), ((2, 5), -2)):
            with self.assertRaisesRegex(
                ValueError,
                rf"Axis {axis} of `attention_mask`.*Received: attention_mask "
                rf"of shape \({shape[0]}, ",
            ):
                layer(x, attention_mask=np.ones(shape, bool))
        with self.assertRaisesRegex(
            ValueError, r"built for `query` of width 8.*shape \(2, 5, 6\)"
        ):
            layer(np.ones((2, 5, 6), "float32"))
        with self.assertRaisesRegex(
            ValueError, r"built for `memory` of width 8"
        ):
            layer(x, memory=np.ones((2, 4, 6), "float32"))
        # Masks that broadcast still pass.
        layer(x, attention_mask=np.ones((1, 1, 5), bool))
        layer(x, attention_mask=np.ones((5, 5), bool))

    def test_config_round_trip(self):
        self.assert_serialization_round_trip(self.make_layer(dropout=0.1))
