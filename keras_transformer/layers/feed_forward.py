"""Position-wise feed-forward network, Eq. 2: max(0, x W1 + b1) W2 + b2.

Shape legend: B batch, T length, D d_model, F d_ff.
"""

import keras

from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.projection import Dense


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

    def call(self, inputs, training=None):
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
