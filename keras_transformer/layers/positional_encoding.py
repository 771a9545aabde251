"""Positional encodings: the paper's sinusoids (section 3.5) and a learned
table.

Shape legend: B batch, T sequence length, D d_model.
"""

import math

import keras
import tensorflow as tf
from keras import ops

from keras_transformer.checks import (
    check_positive_int,
    check_positive_number,
    is_integer,
)
from keras_transformer.layers.checks import check_sequence_shape


@keras.saving.register_keras_serializable(package="keras_transformer")
class SinusoidalPositionalEncoding(keras.layers.Layer):
    """Adds the fixed sinusoidal positional encoding of section 3.5.

    `PE(pos, 2i) = sin(pos / 10000^(2i / d_model))` and
    `PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))`, with sine and cosine
    interleaved exactly as in the paper. The encoding is computed for the
    length of each input, so it works for sequences longer than any seen in
    training.

    Args:
        max_wavelength: the base of the geometric progression of wavelengths
            (10000 in the paper).
        **kwargs: base layer keyword arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: float tensor [B, T, D], the scaled token embeddings. Its
            Keras mask, if any, carries over to the output.
        start_index: int, position of `inputs[:, 0]` (non-zero when decoding
            one step at a time).

    Returns:
        `inputs + PE[start_index : start_index + T]`, shape [B, T, D].
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = check_positive_number(
            "max_wavelength", max_wavelength
        )
        # Position-wise: a Keras mask (`Embedding(mask_zero=True)`) carries
        # over to the encoder or decoder that follows.
        self.supports_masking = True

    def call(self, inputs, start_index=0):
        check_sequence_shape(type(self).__name__, "inputs", inputs.shape)
        length = ops.shape(inputs)[1]
        d_model = inputs.shape[-1]
        encoding = sinusoidal_encoding(
            length, d_model, start_index, self.max_wavelength
        )
        return inputs + ops.cast(encoding, inputs.dtype)

    def compute_output_shape(self, input_shape):
        check_sequence_shape(type(self).__name__, "inputs", input_shape)
        _check_even(input_shape[-1])
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config


def sinusoidal_encoding(length, d_model, start_index=0, max_wavelength=1e4):
    """The paper's sinusoid table for positions `start_index + [0, length)`.

    Returns:
        float32 tensor [length, d_model].
    """
    _check_even(d_model)
    positions = ops.cast(
        ops.arange(length) + ops.cast(start_index, "int32"), "float32"
    )
    # 1 / 10000^(2i / d_model) for i in [0, d_model / 2).
    inverse_frequencies = ops.exp(
        ops.arange(0, d_model, 2, dtype="float32")
        * (-math.log(max_wavelength) / d_model)
    )
    angles = positions[:, None] * inverse_frequencies[None, :]  # [T, D/2]
    # Interleave: column 2i is the sine, column 2i + 1 the cosine.
    pairs = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)
    return ops.reshape(pairs, (length, d_model))


def _check_even(d_model):
    if d_model % 2:
        raise ValueError(
            "The sinusoidal encoding interleaves sine and cosine pairs, so "
            f"`d_model` must be even. Received: d_model={d_model}"
        )


_TOO_LONG = (
    "LearnedPositionalEmbedding: the sequence is longer than the learned "
    "position table (max_length). Build the layer with a larger max_length, "
    "or use SinusoidalPositionalEncoding (TransformerConfig's "
    "positional='sinusoidal'), which has no limit."
)


@keras.saving.register_keras_serializable(package="keras_transformer")
class LearnedPositionalEmbedding(keras.layers.Layer):
    """Adds a learned position embedding (Table 3, row E).

    Unlike the sinusoid it cannot extrapolate: inputs longer than
    `max_length` positions fail with a clear error.

    Args:
        max_length: number of positions in the table.
        initializer: initializer of the [max_length, D] table.
        **kwargs: base layer keyword arguments.

    Call arguments:
        inputs: float tensor [B, T, D]. Its Keras mask, if any, carries
            over to the output.
        start_index: int, position of `inputs[:, 0]`.

    Returns:
        `inputs + table[start_index : start_index + T]`, shape [B, T, D].
    """

    def __init__(self, max_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.max_length = check_positive_int("max_length", max_length)
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True  # As the sinusoid's.

    def build(self, inputs_shape):
        check_sequence_shape(type(self).__name__, "inputs", inputs_shape)
        self.table = self.add_weight(
            name="table",
            shape=(self.max_length, inputs_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def call(self, inputs, start_index=0):
        self._check_static_length(inputs, start_index)
        start_index = tf.cast(start_index, tf.int32)  # int64 too
        length = ops.shape(inputs)[1]
        check = tf.debugging.assert_less_equal(
            start_index + length, self.max_length, message=_TOO_LONG
        )
        # A slice, not a gather: XLA drops the assertion and clamps a
        # gather's indices (positions past the table would reuse its last
        # row), but fails to compile a slice past the table's end when its
        # start is known (a whole sequence). A start that is a loop's
        # tensor (decoding) still clamps: `Transformer.initial_decoding_state`
        # refuses a decoding length past the table instead.
        with tf.control_dependencies([check]):
            encoding = tf.slice(
                self.table,
                tf.stack([start_index, 0]),
                tf.stack([length, self.table.shape[1]]),
                name="positions_within_max_length",
            )
        return inputs + ops.cast(encoding, inputs.dtype)

    def _check_static_length(self, inputs, start_index):
        """Raises the ValueError of a sequence past the table when its
        positions are known while tracing (a symbolic `keras.Input`, an
        eager call, a static batch shape), before any kernel runs."""
        check_sequence_shape(type(self).__name__, "inputs", inputs.shape)
        if is_integer(start_index):
            start = start_index
        elif tf.is_tensor(start_index):
            start = tf.get_static_value(start_index)
        else:  # A symbolic `start_index` (a KerasTensor): no value yet.
            start = None
        length = inputs.shape[1]
        if None not in (start, length) and start + length > self.max_length:
            raise ValueError(
                f"{_TOO_LONG} Received: positions {start} to "
                f"{start + length - 1}, max_length={self.max_length}"
            )

    def compute_output_shape(self, input_shape):
        check_sequence_shape(type(self).__name__, "inputs", input_shape)
        return input_shape

    def compute_output_spec(self, inputs, start_index=0):
        self._check_static_length(inputs, start_index)
        return keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
