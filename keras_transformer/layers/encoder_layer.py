"""One encoder layer: self-attention and feed-forward (section 3.1, Fig. 1).

Shape legend: B batch, S source length, D d_model, N heads.
"""

import keras

from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.residual import ResidualConnection


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoderLayer(keras.layers.Layer):
    """Multi-head self-attention then a feed-forward network, each wrapped in
    a residual connection with layer normalisation.

    Args:
        num_heads: h.
        d_ff: inner width of the feed-forward network.
        key_dim: d_k per head. Defaults to d_model / h.
        value_dim: d_v per head. Defaults to `key_dim`.
        dropout: P_drop on each sublayer output.
        attention_dropout: dropout on the attention weights.
        norm_position: "post" (paper) or "pre".
        layer_norm_epsilon: LayerNormalization epsilon.
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: [B, S, D].
        padding_mask: bool [B, 1, S], True at real tokens.
        return_attention_weights: also return the self-attention weights
            [B, N, S, S].
        training: enables dropout.

    Returns:
        [B, S, D] (and the weights when asked).

    Raises:
        ValueError: if `num_heads` or `layer_norm_epsilon` is not positive,
            or (when built) if `key_dim` is unset and d_model is not
            divisible by h.
    """

    def __init__(
        self,
        num_heads,
        d_ff,
        key_dim=None,
        value_dim=None,
        dropout=0.1,
        attention_dropout=0.0,
        norm_position="post",
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(
                "`num_heads` must be a positive integer. "
                f"Received: num_heads={num_heads!r}"
            )
        if not layer_norm_epsilon > 0:
            raise ValueError(
                "`layer_norm_epsilon` must be positive. "
                f"Received: layer_norm_epsilon={layer_norm_epsilon}"
            )
        self.num_heads = num_heads
        self.d_ff = d_ff
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.norm_position = norm_position
        self.layer_norm_epsilon = layer_norm_epsilon
        self.self_attention = None
        self.feed_forward = PositionwiseFeedForward(
            d_ff, dtype=self.dtype_policy, name="feed_forward"
        )
        self.attention_residual, self.feed_forward_residual = (
            ResidualConnection(
                dropout,
                norm_position,
                layer_norm_epsilon,
                dtype=self.dtype_policy,
                name=name,
            )
            for name in ("self_attention_residual", "feed_forward_residual")
        )

    def build(self, inputs_shape):
        self.self_attention = self._attention(inputs_shape[-1], "self_attention")
        self.self_attention.build(inputs_shape)
        self.feed_forward.build(inputs_shape)
        self.attention_residual.build(inputs_shape)
        self.feed_forward_residual.build(inputs_shape)
        self.built = True

    def _attention(self, d_model, name):
        """A `MultiHeadAttention` sublayer of `num_heads` heads of
        `key_dim`, by default d_model / h."""
        if self.key_dim is None and d_model % self.num_heads:
            raise ValueError(
                "`d_model` must be divisible by `num_heads` when `key_dim` "
                "is unset (it defaults to d_model / h). Set it explicitly "
                "or change num_heads. "
                f"Received: d_model={d_model}, num_heads={self.num_heads}"
            )
        return MultiHeadAttention(
            self.num_heads,
            self.key_dim or d_model // self.num_heads,
            self.value_dim,
            dropout=self.attention_dropout,
            dtype=self.dtype_policy,
            name=name,
        )

    def call(
        self,
        inputs,
        padding_mask=None,
        return_attention_weights=False,
        training=None,
    ):
        x = inputs
        attended = self.self_attention(
            self.attention_residual.normalize_input(x),
            attention_mask=padding_mask,
            return_attention_weights=return_attention_weights,
            training=training,
        )
        if return_attention_weights:
            attended, weights = attended
        x = self.attention_residual(x, attended, training=training)
        transformed = self.feed_forward(
            self.feed_forward_residual.normalize_input(x), training=training
        )
        x = self.feed_forward_residual(x, transformed, training=training)
        if return_attention_weights:
            return x, weights
        return x

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def compute_output_spec(
        self,
        inputs,
        padding_mask=None,
        return_attention_weights=False,
        training=None,
    ):
        # The flag decides the outputs: Keras does not pass it to
        # `compute_output_shape`.
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_weights:
            return outputs
        _, weights = self.self_attention.compute_output_spec(
            inputs, attention_mask=padding_mask, return_attention_weights=True
        )
        return outputs, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "d_ff": self.d_ff,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "norm_position": self.norm_position,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
