"""The encoder and decoder stacks of N identical layers (section 3.1).

Shape legend: B batch, S source length, T target length, D d_model.
"""

import keras

from keras_transformer.checks import check_positive_int
from keras_transformer.config import with_legacy_values
from keras_transformer.layers.checks import check_built
from keras_transformer.layers.decoder_layer import TransformerDecoderLayer
from keras_transformer.layers.encoder_layer import TransformerEncoderLayer
from keras_transformer.layers.layer_norm import LayerNormalization
from keras_transformer.layers.masks import apply_keras_mask
from keras_transformer.layers.outputs import pack_outputs, unpack_outputs


class _Stack(keras.layers.Layer):
    """N layers of one kind, plus a final LayerNorm for pre-norm stacks."""

    layer_class = None
    layer_prefix = None

    def __init__(
        self,
        num_layers,
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
        self.num_layers = check_positive_int("num_layers", num_layers)
        self.layer_arguments = dict(
            num_heads=num_heads,
            d_ff=d_ff,
            key_dim=key_dim,
            value_dim=value_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_position=norm_position,
            layer_norm_epsilon=layer_norm_epsilon,
            attention_bias=attention_bias,
        )
        self.sublayers = [
            self.layer_class(
                **self.layer_arguments,
                dtype=self.dtype_policy,
                name=f"{self.layer_prefix}_{index}",
            )
            for index in range(self.num_layers)
        ]
        # The values the layers checked (e.g. numpy ints made Python ints),
        # so that `get_config` is JSON-serializable.
        self.layer_arguments = {
            name: getattr(self.sublayers[0], name)
            for name in self.layer_arguments
        }
        # Read as the layers' own: `encoder.num_heads`, `encoder.dropout`.
        for name, value in self.layer_arguments.items():
            setattr(self, name, value)
        # Pre-norm leaves the last residual sum unnormalised.
        self.final_norm = None
        if norm_position == "pre":
            self.final_norm = LayerNormalization(
                epsilon=layer_norm_epsilon,
                dtype=self.dtype_policy,
                name="final_layer_norm",
            )

    def _finish(self, x):
        return self.final_norm(x) if self.final_norm is not None else x

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self.layer_arguments})
        return config

    @classmethod
    def from_config(cls, config):
        # Stacks saved before `attention_bias` existed had the biases.
        return super().from_config(
            with_legacy_values(config, f"{cls.__name__} layer")
        )


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerEncoder(_Stack):
    """N encoder layers.

    Args:
        num_layers: N.
        num_heads, d_ff, key_dim, value_dim, dropout, attention_dropout,
        norm_position, layer_norm_epsilon, attention_bias: as in
        `TransformerLayer`.
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: [B, S, D] embedded source.
        padding_mask: bool [B, 1, S] (or [B, S]), True at real tokens.
        return_attention_weights: also return the list of per-layer
            self-attention weights [B, N, S, S].
        training: enables dropout.
        mask: the Keras mask [B, S] of `inputs` (e.g. of
            `keras.layers.Embedding(mask_zero=True)`), which Keras passes
            itself: the padding mask when `padding_mask` is None. The
            output keeps it, so a `TransformerDecoder` given the output as
            `memory` receives it as its `memory_mask`.

    Returns:
        [B, S, D] encoder output (and the weights list when asked).
    """

    layer_class = TransformerEncoderLayer
    layer_prefix = "encoder_layer"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The output positions are the input's: a Keras mask carries over.
        self.supports_masking = True

    def build(self, inputs_shape):
        for layer in self.sublayers:
            layer.build(inputs_shape)
        if self.final_norm is not None:
            self.final_norm.build(inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        padding_mask=None,
        return_attention_weights=False,
        training=None,
        mask=None,
    ):
        x, padding_mask = apply_keras_mask(inputs, padding_mask, mask)
        all_weights = []
        for layer in self.sublayers:
            x = layer(
                x,
                padding_mask=padding_mask,
                return_attention_weights=return_attention_weights,
                training=training,
            )
            if return_attention_weights:
                x, weights = x
                all_weights.append(weights)
        return pack_outputs(
            self._finish(x), all_weights if return_attention_weights else None
        )

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
        return outputs, [
            layer.compute_output_spec(inputs, padding_mask, True)[1]
            for layer in self.sublayers
        ]


@keras.saving.register_keras_serializable(package="keras_transformer")
class TransformerDecoder(_Stack):
    """N decoder layers, with per-layer caches for incremental decoding.

    Args:
        num_layers: N.
        num_heads, d_ff, key_dim, value_dim, dropout, attention_dropout,
        norm_position, layer_norm_epsilon, attention_bias: as in
        `TransformerLayer` (`attention_bias` of both attentions).
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: [B, T, D] embedded (shifted) target.
        memory: [B, S, D] encoder output.
        memory_mask: bool [B, 1, S] (or [B, S]), True at real source
            tokens; or the Keras mask [B, S] of `memory` (e.g. the output
            of a `TransformerEncoder` over `Embedding(mask_zero=True)`),
            which Keras passes itself.
        self_attention_cache: list of N per-layer caches (see
            `initial_cache`), for incremental decoding.
        cache_index: int32 scalar, the position of the first of the T
            positions in fixed-size caches (T = 1 in in-place caches);
            None for growing caches.
        cache_rows: the rows in-place caches are read at, shared by the
            layers (see `MultiHeadAttention`).
        cross_attention_cache: list of N per-layer projected encoder
            keys/values (see `project_memory`).
        decoding_weights: list of N per-layer weights laid out for decoding
            steps (see `decoding_weights`).
        return_attention_weights: also return the per-layer list of
            {"self", "cross"} weights.
        training: enables dropout.

    Returns:
        [B, T, D]; then the weights list when asked; then the updated list of
        self-attention caches when caches were given.
    """

    layer_class = TransformerDecoderLayer
    layer_prefix = "decoder_layer"

    def build(self, inputs_shape, memory_shape=None):
        for layer in self.sublayers:
            layer.build(inputs_shape, memory_shape)
        if self.final_norm is not None:
            self.final_norm.build(inputs_shape)
        self.built = True

    def project_memory(self, memory):
        """Per-layer encoder keys/values, computed once per source batch."""
        check_built(self, "project_memory")
        return [
            layer.cross_attention.project_memory(memory)
            for layer in self.sublayers
        ]

    def decoding_weights(self):
        """Per-layer `TransformerDecoderLayer.decoding_weights()`, computed
        once per decoding call."""
        check_built(self, "decoding_weights")
        return [layer.decoding_weights() for layer in self.sublayers]

    def initial_cache(
        self, batch_size, max_length=None, dtype=None, in_place=False
    ):
        """Per-layer empty self-attention caches: fixed-size ones of
        `max_length` positions (in place with `in_place`), or growing ones
        when it is None; of the layers' compute dtype unless `dtype` says."""
        check_built(self, "initial_cache")
        return [
            layer.self_attention.initial_cache(
                batch_size, max_length, dtype, in_place
            )
            for layer in self.sublayers
        ]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # As in its layers: the target's Keras mask carries over.
        self.supports_masking = True

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
        x = inputs
        all_weights, new_caches = [], []
        for index, layer in enumerate(self.sublayers):
            outputs = layer(
                x,
                memory=memory,
                memory_mask=memory_mask,
                self_attention_cache=(
                    None
                    if self_attention_cache is None
                    else self_attention_cache[index]
                ),
                cache_index=cache_index,
                cache_rows=cache_rows,
                cross_attention_cache=(
                    None
                    if cross_attention_cache is None
                    else cross_attention_cache[index]
                ),
                decoding_weights=(
                    None
                    if decoding_weights is None
                    else decoding_weights[index]
                ),
                return_attention_weights=return_attention_weights,
                training=training,
            )
            x, weights, new_cache = unpack_outputs(
                outputs,
                return_attention_weights,
                self_attention_cache is not None,
            )
            all_weights.append(weights)
            new_caches.append(new_cache)
        return pack_outputs(
            self._finish(x),
            all_weights if return_attention_weights else None,
            new_caches if self_attention_cache is not None else None,
        )

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
        # The outputs of `call`, from the layers' specs (Keras passes no
        # flag to `compute_output_shape`).
        per_layer = [
            layer.compute_output_spec(
                inputs,
                memory,
                memory_mask,
                None
                if self_attention_cache is None
                else self_attention_cache[index],
                cache_index,
                cache_rows,
                None
                if cross_attention_cache is None
                else cross_attention_cache[index],
                return_attention_weights=return_attention_weights,
            )
            for index, layer in enumerate(self.sublayers)
        ]
        _, all_weights, new_caches = zip(
            *(
                unpack_outputs(
                    outputs,
                    return_attention_weights,
                    self_attention_cache is not None,
                )
                for outputs in per_layer
            )
        )
        return pack_outputs(
            keras.KerasTensor(inputs.shape, dtype=self.compute_dtype),
            list(all_weights) if return_attention_weights else None,
            list(new_caches) if self_attention_cache is not None else None,
        )
