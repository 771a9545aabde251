"""One decoder layer: masked self-attention, encoder-decoder attention and
feed-forward (section 3.1, Fig. 1).

Shape legend: B batch, T target length, S source length, D d_model, N heads,
L cache length.
"""

import keras

from keras_transformer.layers import masks
from keras_transformer.layers.checks import (
    check_built,
    check_sentence_mask,
    check_sequence_shape,
)
from keras_transformer.layers.outputs import pack_outputs, unpack_outputs
from keras_transformer.layers.transformer_layer import TransformerLayer


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoderLayer(TransformerLayer):
    """Causal multi-head self-attention, multi-head attention over the
    encoder output (the "memory"), then a feed-forward network, each wrapped
    in a residual connection with layer normalisation.

    Args:
        *args, **kwargs: those of `TransformerLayer`: `num_heads`, `d_ff`,
            `key_dim`, `value_dim`, `dropout`, `attention_dropout`,
            `norm_position`, `layer_norm_epsilon`, `attention_bias` (of
            both attentions) and the base layer keywords.

    Call arguments:
        inputs: [B, T, D] target representations. Their Keras mask, if
            any, carries over to the output.
        memory: [B, S, D] encoder outputs (None only when
            `cross_attention_cache` is given).
        memory_mask: bool [B, 1, S], True at real source tokens; or the
            Keras mask [B, S] of `memory` (e.g. of a
            `TransformerEncoder` over `Embedding(mask_zero=True)`), which
            Keras passes itself.
        self_attention_cache: dict "key"/"value" [B, N, L, H] of
            `self_attention.initial_cache`, for incremental decoding.
        cache_index: int32 scalar position of the first of the T
            positions being decoded in a fixed-size cache (T = 1 in an
            in-place cache); None for a growing cache.
        cache_rows: the rows an in-place cache is read at (see
            `MultiHeadAttention`).
        cross_attention_cache: the encoder keys/values of
            `cross_attention.project_memory(memory)`, computed once.
        decoding_weights: `decoding_weights()`, computed once per decoding
            call, for incremental decoding (T = 1).
        return_attention_weights: also return a dict with the "self" and
            "cross" attention weights [B, N, T, T or L] and [B, N, T, S].
        training: enables dropout.

    Returns:
        [B, T, D]; then the weights dict when asked; then the updated
        self-attention cache when one was given.

    Raises:
        ValueError: as `TransformerLayer`; when called without
            `memory` or `cross_attention_cache`.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A target's Keras mask carries over to the output (inherited);
        # its self-attention masks the padded keys, which the causal mask
        # already hides from every real position.
        self.cross_attention = None
        self.cross_attention_residual = self._residual(
            "cross_attention_residual"
        )

    def build(self, inputs_shape, memory_shape=None):
        super().build(inputs_shape)
        if memory_shape is not None:
            check_sequence_shape(type(self).__name__, "memory", memory_shape)
        self.cross_attention = self._attention(
            inputs_shape[-1], "cross_attention"
        )
        self.cross_attention.build(inputs_shape, memory_shape or inputs_shape)
        self.cross_attention_residual.build(inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        memory=None,
        memory_mask=None,
        self_attention_cache=None,
        cache_index=None,
        cache_rows=None,
        cross_attention_cache=None,
        decoding_weights=None,
        return_attention_weights=False,
        training=None,
    ):
        memory_mask = _check_memory(memory, memory_mask, cross_attention_cache)
        x = inputs
        weights_of = (decoding_weights or {}).get
        outputs = self.self_attention(
            self.attention_residual.normalize_input(x),
            use_causal_mask=True,
            cache=self_attention_cache,
            cache_index=cache_index,
            cache_rows=cache_rows,
            return_attention_weights=return_attention_weights,
            training=training,
            decoding_weights=weights_of("self_attention"),
        )
        attended, self_weights, new_cache = unpack_outputs(
            outputs, return_attention_weights, self_attention_cache is not None
        )
        x = self.attention_residual(x, attended, training=training)

        attended = self.cross_attention(
            self.cross_attention_residual.normalize_input(x),
            memory=memory
            if cross_attention_cache is None
            else cross_attention_cache,
            attention_mask=memory_mask,
            return_attention_weights=return_attention_weights,
            training=training,
            decoding_weights=weights_of("cross_attention"),
        )
        weights = None
        if return_attention_weights:
            attended, cross_weights = attended
            weights = {"self": self_weights, "cross": cross_weights}
        x = self.cross_attention_residual(x, attended, training=training)

        transformed = self.feed_forward(
            self.feed_forward_residual.normalize_input(x),
            training=training,
            decoding_weights=weights_of("feed_forward"),
        )
        x = self.feed_forward_residual(x, transformed, training=training)
        return pack_outputs(x, weights, new_cache)

    def decoding_weights(self):
        """The sublayers' weights laid out for decoding steps (see
        `MultiHeadAttention.decoding_weights` and
        `PositionwiseFeedForward.decoding_weights`): a dict of
        "self_attention", "cross_attention" and "feed_forward"."""
        check_built(self, "decoding_weights")
        return {
            "self_attention": self.self_attention.decoding_weights(),
            "cross_attention": self.cross_attention.decoding_weights(
                cross_attention=True
            ),
            "feed_forward": self.feed_forward.decoding_weights(),
        }

    def compute_output_shape(self, inputs_shape, memory_shape=None):
        return inputs_shape

    def compute_output_spec(
        self,
        inputs,
        memory=None,
        memory_mask=None,
        self_attention_cache=None,
        cache_index=None,
        cache_rows=None,
        cross_attention_cache=None,
        decoding_weights=None,
        return_attention_weights=False,
        training=None,
    ):
        # The outputs of `call`, from the sublayers' specs (Keras passes no
        # flag to `compute_output_shape`).
        _check_memory(memory, memory_mask, cross_attention_cache)
        outputs = self.self_attention.compute_output_spec(
            inputs,
            use_causal_mask=True,
            cache=self_attention_cache,
            cache_index=cache_index,
            cache_rows=cache_rows,
            return_attention_weights=return_attention_weights,
        )
        _, self_weights, new_cache = unpack_outputs(
            outputs, return_attention_weights, self_attention_cache is not None
        )
        weights = None
        if return_attention_weights:
            _, cross = self.cross_attention.compute_output_spec(
                inputs,
                memory=memory
                if cross_attention_cache is None
                else cross_attention_cache,
                attention_mask=memory_mask,
                return_attention_weights=True,
            )
            weights = {"self": self_weights, "cross": cross}
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        return pack_outputs(outputs, weights, new_cache)


def _check_memory(memory, memory_mask, cross_attention_cache):
    """The memory mask as bool [B, 1, S]; raises without a memory.

    Without one the cross-attention would attend over the target itself,
    silently. Keras passes the Keras mask [B, S] of `memory` as
    `memory_mask` (its `<argument>_mask` convention); broadcast against the
    [B, N, T, S] scores it would mask heads instead of sentences.
    """
    if memory is None and cross_attention_cache is None:
        raise ValueError(
            "A decoder layer attends over the encoder output: pass "
            "`memory` [B, S, D] (or `cross_attention_cache` of "
            "`cross_attention.project_memory(memory)`). Received: memory=None"
        )
    if memory_mask is None:
        return None
    if memory is not None:
        check_sentence_mask("memory_mask", memory_mask, "memory", memory)
    return masks.sentence_mask(memory_mask)
