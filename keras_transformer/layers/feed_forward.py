"""Position-wise feed-forward network, Eq. 2: max(0, x W1 + b1) W2 + b2.

Shape legend: B batch, T length, D d_model, F d_ff.
"""

import keras
from keras import ops

from keras_transformer.checks import check_positive_int, check_rate
from keras_transformer.layers.checks import check_built
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.initializers import initializer_copy
from keras_transformer.layers.projection import (
    Dense,
    decoding_projection,
    project,
    project_parts,
)


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
        self.d_ff = check_positive_int("d_ff", d_ff)
        activation_dropout = check_rate(
            "activation_dropout", activation_dropout
        )
        self.activation = keras.activations.get(activation)
        self.activation_dropout = activation_dropout
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        # Keras's Dense with a faster backward pass (see `projection.py`).
        self.inner = Dense(
            self.d_ff,
            activation=self.activation,
            # Each kernel its own draw (`initializers.py`).
            kernel_initializer=initializer_copy(self.kernel_initializer, 0),
            dtype=self.dtype_policy,
            name="inner",
        )
        self.dropout_layer = Dropout(
            activation_dropout, dtype=self.dtype_policy, name="dropout"
        )
        self.outer = None
        self.supports_masking = True  # Position-wise: the mask carries over.

    def build(self, inputs_shape):
        self.inner.build(inputs_shape)
        self.outer = Dense(
            inputs_shape[-1],
            kernel_initializer=initializer_copy(self.kernel_initializer, 1),
            dtype=self.dtype_policy,
            name="outer",
        )
        self.outer.build((*inputs_shape[:-1], self.d_ff))
        self.built = True

    def decoding_weights(self):
        """The weights for `call(decoding_weights=...)` at decoding steps.

        Laid out for a step's few rows (see `projection.aliasing_padding`):
        when a row of the inner kernel [D, F] would span a multiple of 2 KiB,
        F gains one cache line of units whose inner weights, bias and outer
        weights are zero, which add exactly 0 whatever the activation; the
        outer kernel gains zero columns the same way, dropped after its
        matmul. The output is the layer's own.

        Returns:
            `(inner_kernel [D, F'], inner_bias [F'], outer_kernel [F', D'],
            outer_bias [D'])` in the compute dtype; None for a quantized
            layer (its own weights serve).
        """
        check_built(self, "decoding_weights")
        if self.inner.quantization_mode or self.outer.quantization_mode:
            return None
        dtype = self.compute_dtype
        inner_kernel, inner_bias = decoding_projection(
            [self.inner.kernel], [self.inner.bias], dtype
        )
        extra_units = inner_kernel.shape[-1] - self.d_ff
        outer_kernel = ops.pad(
            ops.cast(self.outer.kernel, dtype), [[0, extra_units], [0, 0]]
        )
        outer_kernel, outer_bias = decoding_projection(
            [outer_kernel], [self.outer.bias], dtype
        )
        return inner_kernel, inner_bias, outer_kernel, outer_bias

    def call(self, inputs, training=None, decoding_weights=None):
        if decoding_weights is not None:
            inner_kernel, inner_bias, outer_kernel, outer_bias = (
                decoding_weights
            )
            flat = ops.reshape(inputs, (-1, inputs.shape[-1]))
            hidden = self.activation(project(flat, inner_kernel, inner_bias))
            (outputs,) = project_parts(
                hidden, outer_kernel, outer_bias, [inputs.shape[-1]]
            )
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
