"""One encoder layer: self-attention and feed-forward (section 3.1, Fig. 1).

Shape legend: B batch, S source length, D d_model, N heads.
"""

import keras
from keras import ops

from keras_transformer.checks import (
    check_bool,
    check_positive_int,
    check_positive_number,
    check_rate,
)
from keras_transformer.layers import masks
from keras_transformer.layers.attention import MultiHeadAttention
from keras_transformer.layers.checks import check_sentence_mask, check_sequence_shape
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

    Call arguments:
        inputs: [B, S, D].
        padding_mask: bool [B, 1, S] (or [B, S]), True at real tokens.
        return_attention_weights: also return the self-attention weights
            [B, N, S, S].
        training: enables dropout.
        mask: the Keras mask [B, S] of `inputs` (e.g. of
            `keras.layers.Embedding(mask_zero=True)`), which Keras passes
            itself: the padding mask when `padding_mask` is None. The
            output keeps it.

    Returns:
        [B, S, D] (and the weights when asked).

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
        check_sequence_shape(type(self).__name__, "inputs", inputs_shape)
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
            use_bias=self.attention_bias,
            dtype=self.dtype_policy,
            name=name,
        )

    def call(
        self,
        inputs,
        padding_mask=None,
        return_attention_weights=False,
        training=None,
        mask=None,
    ):
        x, padding_mask = apply_keras_mask(inputs, padding_mask, mask)
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
        mask=None,
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
                "attention_bias": self.attention_bias,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        # Layers saved before `attention_bias` existed had the biases.
        return super().from_config({"attention_bias": True, **config})


def apply_keras_mask(inputs, padding_mask, mask):
    """`(inputs, padding_mask)` for a layer given the Keras mask `mask`.

    Keras passes the mask [B, S] of `keras.layers.Embedding(mask_zero=True)`
    (or of a masking layer) as `mask`, but only when `inputs` is the call's
    one tensor; with a `padding_mask` tensor too, it is read from `inputs`.
    It becomes the bool [B, 1, S] padding mask unless one is given, and
    `inputs` loses it: the sublayers take the padding mask instead. A
    padding mask [B, S] (a Keras mask's shape) is read as [B, 1, S].
    """
    if mask is None:
        mask = masks.keras_mask(inputs)
    if padding_mask is not None:
        check_sentence_mask("padding_mask", padding_mask, "inputs", inputs)
        padding_mask = masks.sentence_mask(padding_mask)
    if mask is None:
        return inputs, padding_mask
    if padding_mask is None:
        padding_mask = masks.sentence_mask(mask)
    return ops.copy(inputs), padding_mask
