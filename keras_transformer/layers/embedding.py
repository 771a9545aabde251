"""Token embeddings scaled by sqrt(d_model), reusable as the pre-softmax layer.

Shape legend: B batch, T length, D d_model, V vocabulary.
"""

import math

import keras
from keras import ops

from keras_transformer.checks import check_positive_int


@keras.saving.register_keras_serializable(package="keras_transformer")
class ScaledEmbedding(keras.layers.Layer):
    """Token embedding multiplied by sqrt(d_model) (section 3.4).

    The same matrix can serve as the pre-softmax projection: called with
    `reverse=True` the layer maps hidden states to logits `x @ E^T`, which is
    how the paper shares one matrix between the two embedding layers and the
    output projection.

    Args:
        vocab_size: V, rows of the embedding matrix.
        d_model: D, width of each embedding.
        embeddings_initializer: initializer of the [V, D] matrix. The default
            normal(0, D^-0.5) gives the scaled embeddings unit variance.
        mask_zero: as `keras.layers.Embedding`: id 0 is padding, and the
            embedded ids carry the Keras mask `ids != 0`, which the
            positional, attention, encoder and decoder layers follow. With
            `reverse=True` the hidden states' Keras mask carries over to
            the logits.
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: token ids [B, T] (forward; non-integer ids are cast to
            int32, as `keras.layers.Embedding` does) or hidden states
            [B, T, D] (`reverse=True`).
        reverse: project hidden states onto the vocabulary instead.
        transposed_embeddings: optional `transposed_embeddings()`, E^T as
            [D, V], for `reverse=True`. Decoding reads it once before its
            loop: oneDNN multiplies a few rows by a [D, V] matrix ~1.5x
            faster than by the transposed [V, D] one (~11 % of a base
            decoding call); training's many rows gain nothing from it.

    Returns:
        [B, T, D] scaled embeddings, or float32 logits [B, T, V] when
        `reverse=True` (float32 even under mixed precision, for a stable
        softmax).
    """

    def __init__(
        self,
        vocab_size,
        d_model,
        embeddings_initializer=None,
        mask_zero=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = check_positive_int("vocab_size", vocab_size)
        self.d_model = check_positive_int("d_model", d_model)
        if not isinstance(mask_zero, bool):
            raise TypeError(
                f"`mask_zero` must be a bool. Received: mask_zero={mask_zero!r}"
            )
        self.mask_zero = mask_zero
        # Position-wise in reverse: the hidden states' mask carries over.
        self.supports_masking = True
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer
            or keras.initializers.RandomNormal(stddev=self.d_model**-0.5)
        )

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocab_size, self.d_model),
            initializer=self.embeddings_initializer,
        )
        self.built = True

    def transposed_embeddings(self, dtype=None):
        """E^T, [D, V] in `dtype` (default: the compute dtype), a copy laid
        out for `call(..., reverse=True, transposed_embeddings=...)`."""
        return ops.transpose(
            ops.cast(self.embeddings, dtype or self.compute_dtype)
        )

    def call(self, inputs, reverse=False, transposed_embeddings=None):
        if reverse:
            self._check_hidden_states(inputs)
            # [B, T, D] -> [B * T, D] so that the projection is one 2-D
            # matmul (a broadcast batched matmul is much slower on CPU).
            hidden = ops.reshape(inputs, (-1, self.d_model))
            if transposed_embeddings is None:
                transposed_embeddings = self.transposed_embeddings(inputs.dtype)
            logits = ops.matmul(
                hidden, ops.cast(transposed_embeddings, inputs.dtype)
            )
            leading = ops.shape(inputs)[:-1]
            logits = ops.reshape(logits, (*leading, self.vocab_size))
            return ops.cast(logits, "float32")
        self._check_ids(inputs)
        # Float ids are cast as by `keras.layers.Embedding`: Keras rebuilds
        # a loaded subclassed model by calling it on float placeholders.
        embedded = ops.take(self.embeddings, ops.cast(inputs, "int32"), axis=0)
        return ops.cast(embedded, self.compute_dtype) * ops.cast(
            math.sqrt(self.d_model), self.compute_dtype
        )

    def _holds_hidden_states(self, inputs):
        # Keras passes `compute_mask` no `reverse`, so it tells hidden
        # states [B, T, D] from ids [B, T] by their float dtype and rank.
        return not _is_integer(inputs) and len(inputs.shape) >= 3

    def _check_ids(self, ids):
        dtype = ops.dtype(ids)
        if dtype == "string":
            raise TypeError(
                f"{self.name} takes integer token ids: tokenize the strings "
                f"first. Received: ids of dtype {dtype}"
            )
        if self.mask_zero and self._holds_hidden_states(ids):
            raise TypeError(
                f"{self.name}: with `mask_zero=True`, float inputs of rank 3 "
                "or more are read as hidden states (`reverse=True`) and would "
                "lose the padding mask: pass integer token ids. Received: ids "
                f"of dtype {dtype} and shape {tuple(ids.shape)}"
            )

    def _check_hidden_states(self, hidden):
        # Static shapes only: free in the decoding step.
        width = hidden.shape[-1] if len(hidden.shape) else None
        if width is not None and width != self.d_model:
            raise ValueError(
                f"{self.name} with `reverse=True` takes hidden states whose "
                f"last axis is d_model={self.d_model}. Received: inputs of "
                f"shape {tuple(hidden.shape)}"
            )
        if self.mask_zero and not self._holds_hidden_states(hidden):
            raise ValueError(
                f"{self.name}: with `mask_zero=True`, `reverse=True` takes "
                "float hidden states [batch, length, d_model], which "
                "`compute_mask` tells from token ids. Received: inputs of "
                f"dtype {ops.dtype(hidden)} and shape {tuple(hidden.shape)}"
            )

    def compute_mask(self, inputs, previous_mask=None):
        if self.mask_zero and not self._holds_hidden_states(inputs):
            return ops.not_equal(inputs, 0)
        # Hidden states (`reverse=True`): their mask carries over.
        return previous_mask

    def compute_output_shape(
        self, inputs_shape, reverse=False, transposed_embeddings=None
    ):
        if reverse:
            return (*inputs_shape[:-1], self.vocab_size)
        return (*inputs_shape, self.d_model)

    def compute_output_spec(
        self, inputs, reverse=False, transposed_embeddings=None
    ):
        if reverse:
            self._check_hidden_states(inputs)
        else:
            self._check_ids(inputs)
        shape = self.compute_output_shape(inputs.shape, reverse)
        dtype = "float32" if reverse else self.compute_dtype
        return keras.KerasTensor(shape, dtype=dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocab_size": self.vocab_size,
                "d_model": self.d_model,
                "embeddings_initializer": keras.initializers.serialize(
                    self.embeddings_initializer
                ),
                "mask_zero": self.mask_zero,
            }
        )
        return config


def _is_integer(tensor):
    return "int" in str(ops.dtype(tensor))
