import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import keras_transformer as kt
from keras_transformer import layers
from keras_transformer.layers import projection
from tests.test_case import TestCase


def _plain(inputs, kernel, bias):
    outputs = tf.matmul(inputs, kernel)
    return outputs if bias is None else outputs + bias


def _values_and_gradients(fn, inputs, kernel, bias):
    weights = [inputs, kernel] + ([] if bias is None else [bias])
    with tf.GradientTape() as tape:
        tape.watch(weights)
        outputs = fn(inputs, kernel, bias)
        # A loss whose gradient differs per element.
        loss = tf.reduce_sum(tf.sin(outputs) * outputs)
    return [outputs] + tape.gradient(loss, weights)


class ProjectTest(TestCase):
    def setUp(self):
        super().setUp()
        rng = np.random.default_rng(0)
        self.inputs = tf.constant(rng.normal(size=(6, 5)), tf.float32)
        self.kernel = tf.constant(rng.normal(size=(5, 3)), tf.float32)
        self.bias = tf.constant(rng.normal(size=(3,)), tf.float32)

    @parameterized.product(
        with_bias=(True, False),
        mode=("eager", "graph", "xla"),
        # Wider and narrower inputs than outputs: the kernel's gradient
        # takes another op for each.
        widths=((5, 3), (3, 5)),
    )
    def test_values_and_gradients_are_the_matmuls(
        self, with_bias, mode, widths
    ):
        rng = np.random.default_rng(1)
        inputs = tf.constant(rng.normal(size=(6, widths[0])), tf.float32)
        kernel = tf.constant(rng.normal(size=widths), tf.float32)
        bias = tf.constant(rng.normal(size=widths[1:]), tf.float32)
        bias = bias if with_bias else None

        def ours(inputs, kernel, bias):
            return projection.project(inputs, kernel, bias, training=True)

        def run(fn):
            def call():
                return _values_and_gradients(fn, inputs, kernel, bias)

            if mode != "eager":
                call = tf.function(call, jit_compile=mode == "xla")
            return call()

        for a, b in zip(run(ours), run(_plain)):
            self.assertAllClose(a, b, atol=1e-5, rtol=1e-5)

    def test_input_gradient_avoids_the_transposed_2d_matmul(self):
        # The reason for the module: dx as `BatchMatMulV2(adj_y)`, never as a
        # 2-D `MatMul` with a transposed right operand.
        @tf.function
        def gradients(inputs, kernel, bias):
            return _values_and_gradients(
                lambda *args: projection.project(*args, training=True),
                inputs,
                kernel,
                bias,
            )

        graph = gradients.get_concrete_function(
            self.inputs, self.kernel, self.bias
        ).graph
        ops = graph.get_operations()
        self.assertTrue(
            any(
                op.type == "BatchMatMulV2" and op.get_attr("adj_y")
                for op in ops
            )
        )
        self.assertFalse(
            any(
                op.type == "MatMul" and op.get_attr("transpose_b") for op in ops
            )
        )

    def test_kernel_gradient_of_wider_inputs_avoids_the_transposed_2d_matmul(
        self,
    ):
        # `inputs^T upstream` as `BatchMatMulV2(adj_x)` when `inputs` is the
        # wider operand, else as a 2-D `MatMul(transpose_a)`.
        def kernel_gradient_ops(width, units):
            inputs = tf.zeros([4, width])
            kernel = tf.zeros([width, units])

            @tf.function
            def gradient():
                with tf.GradientTape() as tape:
                    tape.watch(kernel)
                    outputs = projection.project(inputs, kernel, training=True)
                return tape.gradient(outputs, kernel)

            ops = gradient.get_concrete_function().graph.get_operations()
            return {
                "adj_x": any(
                    op.type == "BatchMatMulV2" and op.get_attr("adj_x")
                    for op in ops
                ),
                "transpose_a": any(
                    op.type == "MatMul" and op.get_attr("transpose_a")
                    for op in ops
                ),
            }

        self.assertEqual(
            kernel_gradient_ops(8, 2), {"adj_x": True, "transpose_a": False}
        )
        for width in (2, 8):
            self.assertEqual(
                kernel_gradient_ops(width, 8),
                {"adj_x": False, "transpose_a": True},
            )

    def test_outside_training_the_plain_ops_run(self):
        graph = (
            tf.function(lambda *args: projection.project(*args, training=False))
            .get_concrete_function(self.inputs, self.kernel, self.bias)
            .graph
        )
        types = {op.type for op in graph.get_operations()}
        self.assertNotIn("IdentityN", types)  # No custom gradient.
        self.assertIn("MatMul", types)


class DecodingProjectionTest(TestCase):
    @parameterized.parameters(
        (512, "float32", 16),  # rows of 2 KiB
        (1024, "float32", 16),
        (300, "float32", 0),
        (256, "float32", 0),  # 1 KiB
        (1024, "bfloat16", 32),
        (512, "bfloat16", 0),
    )
    def test_aliasing_padding_is_one_cache_line_at_multiples_of_2_kib(
        self, width, dtype, padding
    ):
        self.assertEqual(projection.aliasing_padding(width, dtype), padding)

    @parameterized.parameters(True, False)
    def test_fused_and_padded_kernels_give_each_projection(self, with_bias):
        # Widths 200 + 312 = 512 floats per row: padded to 528.
        rng = np.random.default_rng(1)
        inputs = tf.constant(rng.normal(size=(6, 8)), tf.float32)
        kernels = [
            tf.constant(rng.normal(size=(8, w)), tf.float32) for w in (200, 312)
        ]
        biases = [
            tf.constant(rng.normal(size=(w,)), tf.float32)
            if with_bias
            else None
            for w in (200, 312)
        ]
        kernel, bias = projection.decoding_projection(
            kernels, biases, "float32"
        )
        self.assertEqual(kernel.shape, (8, 528))
        self.assertAllEqual(kernel[:, 512:], np.zeros((8, 16)))
        self.assertEqual(bias is None, not with_bias)
        parts = projection.project_parts(inputs, kernel, bias, [200, 312])
        for part, k, b in zip(parts, kernels, biases):
            self.assertAllClose(part, _plain(inputs, k, b), atol=1e-5)


class DenseTest(TestCase):
    def _twins(self, **kwargs):
        ours = layers.Dense(4, name="dense", **kwargs)
        theirs = keras.layers.Dense(4, name="dense", **kwargs)
        inputs = (
            np.random.default_rng(1).normal(size=(2, 3, 5)).astype("float32")
        )
        ours.build(inputs.shape)
        theirs.build(inputs.shape)
        theirs.set_weights(ours.get_weights())
        return ours, theirs, tf.constant(inputs)

    def test_matches_keras_dense_in_values_and_gradients(self):
        for kwargs in (dict(activation="relu"), dict(use_bias=False)):
            ours, theirs, inputs = self._twins(**kwargs)
            for training in (True, False):
                results = []
                for layer in (ours, theirs):
                    with tf.GradientTape() as tape:
                        tape.watch(inputs)
                        outputs = layer(inputs, training=training)
                        loss = tf.reduce_sum(tf.sin(outputs) * outputs)
                    weights = [w.value for w in layer.trainable_weights]
                    results.append(
                        [outputs] + tape.gradient(loss, [inputs, *weights])
                    )
                for a, b in zip(*results):
                    self.assertAllClose(a, b, atol=1e-5, rtol=1e-5)

    def test_same_weights_and_config_as_keras_dense(self):
        ours, theirs, _ = self._twins(activation="relu")
        self.assertEqual(
            [w.path.split("/")[-1] for w in ours.weights],
            [w.path.split("/")[-1] for w in theirs.weights],
        )
        self.assertEqual(ours.get_config(), theirs.get_config())
        self.assert_serialization_round_trip(ours)

    def test_mixed_bfloat16_training_gradient(self):
        layer = layers.Dense(4, dtype="mixed_bfloat16")
        inputs = tf.ones((2, 3, 5))
        with tf.GradientTape() as tape:
            outputs = layer(inputs, training=True)
            loss = tf.reduce_sum(tf.cast(outputs, "float32"))
        gradients = tape.gradient(
            loss, [w.value for w in layer.trainable_weights]
        )
        self.assertEqual(outputs.dtype, tf.bfloat16)
        # d loss / d bias = the number of rows; d / d kernel = sum of inputs.
        self.assertAllClose(gradients[1], np.full(4, 6.0))
        self.assertAllClose(gradients[0], np.full((5, 4), 6.0))

    def test_the_model_projects_through_it(self):
        config = kt.TransformerConfig.preset(
            "tiny", vocab_size=20, d_model=8, d_ff=16, num_heads=2, num_layers=1
        )
        model = kt.build_transformer(config)
        feed_forwards = [
            layer
            for layer in model._flatten_layers()
            if isinstance(layer, layers.PositionwiseFeedForward)
        ]
        self.assertLen(feed_forwards, 2)
        for feed_forward in feed_forwards:
            self.assertIsInstance(feed_forward.inner, layers.Dense)
            self.assertIsInstance(feed_forward.outer, layers.Dense)
