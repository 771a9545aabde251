"""One encoder layer: self-attention and feed-forward (section 3.1, Fig. 1).

Shape legend: B batch, S source length, D d_model, N heads.
"""

import keras

from keras_transformer.layers.masks import apply_keras_mask
from keras_transformer.layers.outputs import pack_outputs
from keras_transformer.layers.transformer_layer import TransformerLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoderLayer(TransformerLayer):
    """Multi-head self-attention then a feed-forward network, each wrapped in
    a residual connection with layer normalisation.

    Args:
        *args, **kwargs: those of `TransformerLayer`: `num_heads`, `d_ff`,
            `key_dim`, `value_dim`, `dropout`, `attention_dropout`,
            `norm_position`, `layer_norm_epsilon`, `attention_bias` and the
            base layer keywords.

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
        ValueError: as `TransformerLayer`.
    """

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
        weights = None
        if return_attention_weights:
            attended, weights = attended
        x = self.attention_residual(x, attended, training=training)
        transformed = self.feed_forward(
            self.feed_forward_residual.normalize_input(x), training=training
        )
        x = self.feed_forward_residual(x, transformed, training=training)
        return pack_outputs(x, weights)

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
        weights = None
        if return_attention_weights:
            _, weights = self.self_attention.compute_output_spec(
                inputs,
                attention_mask=padding_mask,
                return_attention_weights=True,
            )
        return pack_outputs(outputs, weights)
