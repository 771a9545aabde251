"""Position-wise feed-forward network, Eq. 2: max(0, x W1 + b1) W2 + b2.

Shape legend: B batch, T length, D d_model, F d_ff.
"""

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.projection import Dense, project

# `decoding_weights` pads the inner width by one cache line of zero units when
# a row of the inner kernel spans a multiple of this many bytes.
_ALIASING_ROW_BYTES = 2048
_CACHE_LINE_BYTES = 64


@keras.saving.register_keras_serializable(package="keras_transformer")
class PositionwiseFeedForward(keras.layers.Layer):
    """Two linear maps with a ReLU between them, applied at every position.

    Args:
        d_ff: inner width (2048 in the base model).
        activation: the inner activation ("relu" in the paper).
        activation_dropout: dropout after the activation (not in the paper).
        kernel_initializer: initializer of both kernels.
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: [B, T, D].
        training: enables dropout.
        decoding_weights: optional weights of `decoding_weights()`, computed
            once per decoding call, used instead of the layer's own (the
            output is the same).

    Returns:
        [B, T, D].
    """

    def __init__(
        self,
        d_ff,
        activation="relu",
        activation_dropout=0.0,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(d_ff, int) or d_ff < 1:
            raise ValueError(
                f"`d_ff` must be a positive integer. Received: d_ff={d_ff!r}"
            )
        self.d_ff = d_ff
        self.activation = keras.activations.get(activation)
        self.activation_dropout = activation_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        # Keras's Dense with a faster backward pass (see `projection.py`).
        self.inner = Dense(
            d_ff,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="inner",
        )
        self.dropout_layer = Dropout(
            activation_dropout, dtype=self.dtype_policy, name="dropout"
        )
        self.outer = None

    def build(self, inputs_shape):
        self.inner.build(inputs_shape)
        self.outer = Dense(
            inputs_shape[-1],
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="outer",
        )
        self.outer.build((*inputs_shape[:-1], self.d_ff))
        self.built = True

    def decoding_weights(self):
        """The weights for `call(decoding_weights=...)` at decoding steps.

        A decoding step multiplies few rows (beam x batch) by the inner
        kernel [D, F], and oneDNN's matmul then reads the kernel row by row:
        rows a multiple of 2 KiB apart (F = 1024, 2048 in float32) fall on
        the same L1 cache sets, and the matmul ran at half speed ([64, 256] x
        [256, 1024] at 39 GFLOP/s, with F = 1040 at 85; README, Performance).
        So F is padded by one cache line of units whose inner weights, bias
        and outer weights are zero: they add exactly 0 to the output, which is
        the layer's own, whatever the activation.

        Returns:
            `(inner_kernel [D, F'], inner_bias [F'], outer_kernel [F', D],
            outer_bias [D])` in the compute dtype, F' > F; or None when the
            layer's own weights serve (no padding needed, or a quantized
            layer).
        """
        dtype = tf.as_dtype(self.compute_dtype)
        if self.inner.quantization_mode or self.outer.quantization_mode:
            return None
        if (self.d_ff * dtype.size) % _ALIASING_ROW_BYTES:
            return None
        pad = _CACHE_LINE_BYTES // dtype.size
        inner_kernel, inner_bias, outer_kernel, outer_bias = (
            ops.cast(weight, dtype)
            for weight in (
                self.inner.kernel,
                self.inner.bias,
                self.outer.kernel,
                self.outer.bias,
            )
        )
        return (
            ops.pad(inner_kernel, [[0, 0], [0, pad]]),
            ops.pad(inner_bias, [[0, pad]]),
            ops.pad(outer_kernel, [[0, pad], [0, 0]]),
            outer_bias,
        )

    def call(self, inputs, training=None, decoding_weights=None):
        if decoding_weights is not None:
            inner_kernel, inner_bias, outer_kernel, outer_bias = decoding_weights
            flat = ops.reshape(inputs, (-1, inputs.shape[-1]))
            hidden = self.activation(project(flat, inner_kernel, inner_bias))
            outputs = project(hidden, outer_kernel, outer_bias)
            return ops.reshape(outputs, ops.shape(inputs))
        hidden = self.inner(inputs, training=training)
        if self.activation_dropout:
            hidden = self.dropout_layer(hidden, training=training)
        return self.outer(hidden, training=training)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "d_ff": self.d_ff,
                "activation": keras.activations.serialize(self.activation),
                "activation_dropout": self.activation_dropout,
                "kernel_initializer": keras.initializers.serialize(
                    self.kernel_initializer
                ),
            }
        )
        return config
