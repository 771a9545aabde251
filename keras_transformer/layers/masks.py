"""Attention masks: padding (from token ids) and causal (section 3.2.3),
and the layers' reading of Keras masks (`apply_keras_mask`).

Masks are boolean, True where a query may attend to a key. Shape legend:
B batch, T query length, S key length.
"""

import keras
from keras import ops

from keras_transformer import tokens
from keras_transformer.checks import check_pad_id
from keras_transformer.layers.checks import check_sentence_mask


def padding_mask(ids, pad_id=tokens.PAD_ID):
    """The padding mask of a batch of token ids.

    Args:
        ids: int [B, S] token ids.
        pad_id: the padding id.

    Returns:
        bool [B, 1, S], True at real (non-padding) keys.
    """
    return ops.expand_dims(ops.not_equal(ids, pad_id), axis=1)


def causal_mask(query_length, key_length, query_start=0):
    """The causal mask of section 3.2.3.

    Args:
        query_length: T.
        key_length: S.
        query_start: the position of the first query.

    Returns:
        bool [T, S]: query `query_start + t` sees keys 0..query_start + t.
    """
    query_positions = ops.arange(query_length) + query_start
    key_positions = ops.arange(key_length)
    return key_positions[None, :] <= query_positions[:, None]


def keras_mask(tensor):
    """The Keras mask [B, S] attached to `tensor` (e.g. by
    `keras.layers.Embedding(mask_zero=True)`), or None. Keras 3 keeps it as
    the tensor's `_keras_mask` and has no public getter."""
    return getattr(tensor, "_keras_mask", None)


def sentence_mask(mask):
    """A padding mask as bool [B, 1, S]: a [B, S] one (a Keras mask's shape)
    gains the query axis, rather than being read as a [T, S] mask that
    `MultiHeadAttention` would apply to every sentence alike."""
    mask = ops.cast(mask, "bool")
    return ops.expand_dims(mask, axis=1) if len(mask.shape) == 2 else mask


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
        mask = keras_mask(inputs)
    if padding_mask is not None:
        check_sentence_mask("padding_mask", padding_mask, "inputs", inputs)
        padding_mask = sentence_mask(padding_mask)
    if mask is None:
        return inputs, padding_mask
    if padding_mask is None:
        padding_mask = sentence_mask(mask)
    return ops.copy(inputs), padding_mask


def merge_masks(*masks):
    """Logical AND of the masks that are not None (None if all are None)."""
    result = None
    for mask in masks:
        if mask is None:
            continue
        result = mask if result is None else ops.logical_and(result, mask)
    return result


@keras.saving.register_keras_serializable(package="keras_transformer")
class PaddingMask(keras.layers.Layer):
    """Layer form of `padding_mask`, so the functional model shows it.

    Args:
        pad_id: the padding id.
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: int ids [B, S].

    Returns:
        bool [B, 1, S], True at real tokens.
    """

    def __init__(self, pad_id=tokens.PAD_ID, **kwargs):
        super().__init__(**kwargs)
        self.pad_id = check_pad_id(pad_id)

    def call(self, inputs):
        return padding_mask(inputs, self.pad_id)

    def get_config(self):
        config = super().get_config()
        config.update({"pad_id": self.pad_id})
        return config

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], 1, inputs_shape[1])

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(
            self.compute_output_shape(inputs.shape), dtype="bool"
        )
