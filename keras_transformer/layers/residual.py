"""The residual connection around every sublayer (section 3.1, 5.4).

Shape legend: B batch, T length, D d_model.
"""

import keras

from keras_transformer.checks import check_positive_number, check_rate
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.layer_norm import LayerNormalization


@keras.saving.register_keras_serializable(package="keras_transformer")
class ResidualConnection(keras.layers.Layer):
    """`LayerNorm(x + Dropout(Sublayer(x)))`, or its pre-norm variant.

    Post-norm (the paper) normalises the sum; pre-norm normalises the
    sublayer input instead (`x + Dropout(Sublayer(LayerNorm(x)))`), which
    trains deep stacks without warmup tricks. A layer uses it as:

        y = sublayer(residual.normalize_input(x))
        x = residual(x, y)

    Args:
        dropout: P_drop, applied to the sublayer output before the sum.
        norm_position: "post" or "pre".
        epsilon: LayerNormalization epsilon.
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: the residual x, [B, T, D].
        sublayer_output: Sublayer(...), [B, T, D].
        training: enables dropout.

    Returns:
        [B, T, D].
    """

    def __init__(self, dropout, norm_position="post", epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        dropout = check_rate("dropout", dropout)
        if norm_position not in ("post", "pre"):
            raise ValueError(
                "`norm_position` must be 'post' or 'pre'. "
                f"Received: norm_position={norm_position!r}"
            )
        epsilon = check_positive_number("epsilon", epsilon)
        self.dropout = dropout
        self.norm_position = norm_position
        self.epsilon = epsilon
        self.layer_norm = LayerNormalization(
            epsilon=epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout_layer = Dropout(
            dropout, dtype=self.dtype_policy, name="dropout"
        )
        self.supports_masking = (
            True  # Position-wise: x's Keras mask carries over.
        )

    def build(self, inputs_shape, sublayer_output_shape=None):
        self.layer_norm.build(inputs_shape)
        self.built = True

    def normalize_input(self, inputs):
        """The sublayer's input: LayerNorm(x) for pre-norm, else x."""
        if self.norm_position == "pre":
            if not self.built:
                self.build(inputs.shape)
            return self.layer_norm(inputs)
        return inputs

    def call(self, inputs, sublayer_output, training=None):
        outputs = inputs + self.dropout_layer(
            sublayer_output, training=training
        )
        if self.norm_position == "post":
            outputs = self.layer_norm(outputs)
        return outputs

    def compute_output_shape(self, inputs_shape, sublayer_output_shape=None):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "dropout": self.dropout,
                "norm_position": self.norm_position,
                "epsilon": self.epsilon,
            }
        )
        return config
