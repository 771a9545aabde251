"""Linear projections `x W + b` with a faster backward pass on CPU.

Shape legend: N rows, I input width, O output width.
"""

import keras
import tensorflow as tf
from keras import ops


def project(inputs, kernel, bias=None, training=False):
    """`inputs @ kernel + bias` for 2-D `inputs`.

    The values are those of a matmul and a bias add. In training, the
    gradient is written by hand for one reason: TensorFlow's own gradient of
    a 2-D matmul takes `dx = dy @ kernel^T` as a `MatMul` with a transposed
    right operand, and oneDNN runs that kernel at 0.45-0.9x its untransposed
    speed for these shapes (e.g. [2048, 512] x [512, 512]^T: 184 vs 396
    GFLOP/s). A batched matmul with `adjoint_b` runs through oneDNN's matmul
    primitive instead, at full speed. (Grappler folds an explicit transpose
    back into the 2-D `MatMul`, so that is no way out.) Outside training the
    plain ops run: the custom gradient's `IdentityN` would add an op to each
    projection of every decoding step, and any gradient taken there is still
    exact.

    Args:
        inputs: [N, I].
        kernel: [I, O].
        bias: optional [O].
        training: whether a backward pass follows.

    Returns:
        [N, O].
    """
    if not training:
        outputs = tf.matmul(inputs, kernel)
        return outputs if bias is None else outputs + bias
    # Variables are read here: a custom gradient sees tensors only.
    kernel = tf.convert_to_tensor(kernel)
    if bias is None:
        return _project(inputs, kernel)
    return _project_with_bias(inputs, kernel, tf.convert_to_tensor(bias))


# At a decoding step's few rows, oneDNN's matmul reads its right operand row by
# row, and rows a multiple of 2 KiB apart fall on the same L1 cache sets: at 64
# rows and one thread, [512, 512] ran at 56-63 GFLOP/s and [512, 528] at 87-93,
# [256, 1024] at 39 and [256, 1040] at 85 (benchmarks/PERFORMANCE.md).
_ALIASING_ROW_BYTES = 2048
_CACHE_LINE_BYTES = 64


def aliasing_padding(width, dtype):
    """Zero columns that keep a kernel's rows of `width` elements of `dtype`
    off multiples of 2 KiB: one cache line of them, or 0."""
    size = tf.as_dtype(dtype).size
    return (
        _CACHE_LINE_BYTES // size
        if (width * size) % _ALIASING_ROW_BYTES == 0
        else 0
    )


def decoding_projection(kernels, biases, dtype):
    """Projections fused and laid out for `project_parts`, once per decoding
    call.

    Args:
        kernels: list of [I, O_i].
        biases: list of [O_i] or of None.
        dtype: the compute dtype.

    Returns:
        `(kernel [I, O'], bias [O'] or None)`: the kernels side by side in
        `dtype`, then `aliasing_padding` zero columns.
    """
    kernel = ops.concatenate([ops.cast(k, dtype) for k in kernels], axis=-1)
    pad = aliasing_padding(kernel.shape[-1], dtype)
    kernel = ops.pad(kernel, [[0, 0], [0, pad]])
    if biases[0] is None:
        return kernel, None
    bias = ops.concatenate([ops.cast(b, dtype) for b in biases], axis=0)
    return kernel, ops.pad(bias, [[0, pad]])


def project_parts(inputs, kernel, bias, widths):
    """`project` by a kernel of `decoding_projection`, split back into the
    projections of `widths` (the padding dropped)."""
    outputs = project(inputs, kernel, bias)
    pad = kernel.shape[-1] - sum(widths)
    if len(widths) == 1 and not pad:
        return [outputs]
    return tf.split(outputs, [*widths, pad], axis=-1)[: len(widths)]


def _matmul_gradients(inputs, kernel, upstream):
    """(d inputs, d kernel) of `inputs @ kernel` for `upstream` [N, O]."""
    # [1, N, O] x [1, I, O]^T -> [N, I], as `BatchMatMulV2` (see `project`).
    inputs_gradient = tf.linalg.matmul(
        upstream[None], kernel[None], adjoint_b=True
    )
    width, units = kernel.shape  # A kernel's shape is static.
    if width > units:
        # `inputs^T upstream` with the wider operand on the left (the
        # feed-forward's outer kernel): oneDNN's transposed-A 2-D kernel ran
        # at 0.5-0.7x the batched matmul's speed on an Intel Xeon with
        # AVX-512 ([2048, 2048]^T x [2048, 512]: 46 vs 70 GFLOP/s at one
        # thread, 102 vs 150 at two); at the other shapes the two ran alike.
        kernel_gradient = tf.linalg.matmul(
            inputs[None], upstream[None], adjoint_a=True
        )
        return inputs_gradient[0], kernel_gradient[0]
    return inputs_gradient[0], tf.matmul(inputs, upstream, transpose_a=True)


@tf.custom_gradient
def _project(inputs, kernel):
    def gradient(upstream):
        return _matmul_gradients(inputs, kernel, upstream)

    return tf.matmul(inputs, kernel), gradient


@tf.custom_gradient
def _project_with_bias(inputs, kernel, bias):
    def gradient(upstream):
        bias_gradient = tf.raw_ops.BiasAddGrad(out_backprop=upstream)
        return (*_matmul_gradients(inputs, kernel, upstream), bias_gradient)

    # MatMul + BiasAdd: Grappler fuses the two into one oneDNN kernel.
    return tf.nn.bias_add(tf.matmul(inputs, kernel), bias), gradient


@keras.saving.register_keras_serializable(package="keras_transformer")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` whose matmul runs through `project`.

    Same arguments, weights and config as Keras's layer (LoRA included:
    `self.kernel` adds its product). Outside training it is Keras's `call`.
    Like any subclass of Keras's Dense, `model.quantize` leaves it alone
    (the feed-forward network creates it in `build`, so its quantized
    weights would not reload).

    Call arguments:
        inputs: [..., I].
        training: whether a backward pass follows (see `project`).

    Returns:
        [..., O].
    """

    def call(self, inputs, training=None):
        if not training:
            return super().call(inputs, training=training)
        flat = ops.reshape(inputs, (-1, inputs.shape[-1]))
        outputs = project(flat, self.kernel, self.bias, training)
        outputs = ops.reshape(
            outputs, (*ops.shape(inputs)[:-1], outputs.shape[-1])
        )
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
