"""What the encoder and decoder layers share (section 3.1, Fig. 1): their
arguments, the self-attention and feed-forward sublayers, and the residual
connections around them.

Shape legend: B batch, T length, D d_model.
"""

import keras

from keras_transformer.checks import (
    check_bool,
    check_positive_int,
    check_positive_number,
    check_rate,
)
from keras_transformer.config import with_legacy_values
from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.checks import check_sequence_shape
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.residual import ResidualConnection


class TransformerLayer(keras.layers.Layer):
    """The base of `TransformerEncoderLayer` and `TransformerDecoderLayer`:
    a self-attention and a feed-forward sublayer, each wrapped in a residual
    connection with layer normalisation. Subclasses write `call`.

    Args:
        num_heads: h.
        d_ff: inner width of the feed-forward network.
        key_dim: d_k per head. Defaults to d_model / h.
        value_dim: d_v per head. Defaults to `key_dim`, as in
            `keras.layers.MultiHeadAttention` (`TransformerConfig` instead
            keeps d_v at d_model / h when only `key_dim` is set, as Table
            3's row B does; `build_transformer` passes both).
        dropout: P_drop on each sublayer output.
        attention_dropout: dropout on the attention weights.
        norm_position: "post" (paper) or "pre".
        layer_norm_epsilon: LayerNormalization epsilon.
        attention_bias: whether the attention projections (W^Q, W^K, W^V,
            W^O) have biases; the paper's have none (section 3.2.2).
        **kwargs: base layer keyword arguments.

    Raises:
        ValueError: for a non-positive `num_heads`, `key_dim`, `value_dim`,
            `d_ff` or `layer_norm_epsilon`, a dropout rate outside [0, 1),
            an unknown `norm_position`, a non-bool `attention_bias`, or
            (when built) an unset `key_dim` with d_model not divisible by h.
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
        attention_bias=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = check_positive_int("num_heads", num_heads)
        # The feed-forward sublayer checks it too; stored here as an int.
        self.d_ff = check_positive_int("d_ff", d_ff)
        if key_dim is not None:
            key_dim = check_positive_int("key_dim", key_dim)
        if value_dim is not None:
            value_dim = check_positive_int("value_dim", value_dim)
        # Checked here, not when `build` makes the attention sublayer: the
        # error comes at construction, naming this layer's argument.
        dropout = check_rate("dropout", dropout)
        attention_dropout = check_rate("attention_dropout", attention_dropout)
        layer_norm_epsilon = check_positive_number(
            "layer_norm_epsilon", layer_norm_epsilon
        )
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.norm_position = norm_position
        self.layer_norm_epsilon = layer_norm_epsilon
        self.attention_bias = check_bool("attention_bias", attention_bias)
        # The output positions are the input's: a Keras mask carries over.
        self.supports_masking = True
        self.self_attention = None
        self.feed_forward = PositionwiseFeedForward(
            self.d_ff, dtype=self.dtype_policy, name="feed_forward"
        )
        self.attention_residual = self._residual("self_attention_residual")
        self.feed_forward_residual = self._residual("feed_forward_residual")

    def _residual(self, name):
        """A `ResidualConnection` of this layer's dropout and norm."""
        return ResidualConnection(
            self.dropout,
            self.norm_position,
            self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name=name,
        )

    def build(self, inputs_shape):
        check_sequence_shape(type(self).__name__, "inputs", inputs_shape)
        self.self_attention = self._attention(
            inputs_shape[-1], "self_attention"
        )
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
            use_bias=self.attention_bias,
            dtype=self.dtype_policy,
            name=name,
        )

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

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
                "attention_bias": self.attention_bias,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        # Layers saved before `attention_bias` existed had the biases.
        return super().from_config(
            with_legacy_values(config, f"{cls.__name__} layer")
        )
