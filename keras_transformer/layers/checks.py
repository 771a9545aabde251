"""Checks of the layers' arguments.

Each raises a one-line ValueError that names the layer's own argument, at
construction or when the layer is called, rather than a later error from a
sublayer or from TensorFlow.
"""

import math

from keras_transformer.checks import is_integer, is_real


def check_positive_int(name, value):
    """Returns `value` as an int; raises a ValueError unless it is an integer
    >= 1. numpy integers pass and come back as Python ints, so that the
    layer's `get_config` stays JSON-serializable; bools and floats fail."""
    if not is_integer(value) or value < 1:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )
    return int(value)


def check_pad_id(pad_id):
    """Returns `pad_id` as an int; raises a ValueError unless it is an
    integer id (a string or a float would fail inside TensorFlow at the
    first batch, or never equal a label)."""
    if not is_integer(pad_id):
        raise ValueError(
            "`pad_id` must be an integer id (the padding id, 0 here). "
            f"Received: pad_id={pad_id!r}"
        )
    return int(pad_id)


def check_bool(name, value):
    """Returns `value`; raises a ValueError unless it is True or False (not
    0, 1 or a string, which a switch would read silently)."""
    if not isinstance(value, bool):
        raise ValueError(f"`{name}` must be True or False. Received: {name}={value!r}")
    return value


def check_positive_number(name, value):
    """Returns `value` as a float; raises a ValueError unless it is a finite
    real number > 0 (not a bool, a string, NaN or infinity)."""
    if not is_real(value) or not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"`{name}` must be a positive finite number. Received: {name}={value!r}"
        )
    return float(value)


def check_rate(name, value):
    """Returns `value` as a float; raises a ValueError unless it is a dropout
    rate in [0, 1): the layers that own a `Dropout` check their own argument,
    as Keras's message would name the dropout layer's `rate` instead."""
    if not is_real(value) or not 0 <= value < 1:
        raise ValueError(
            f"`{name}` must be a number in [0, 1) (the fraction of units "
            f"dropped; 0 disables dropout). Received: {name}={value!r}"
        )
    return float(value)


def check_sequence_shape(layer, argument, shape):
    """Raises a ValueError naming `layer`'s `argument` unless `shape` is that
    of a batch of vector sequences, [B, T, D] with D known (the width that
    the layer's weights are built for)."""
    if shape is None or len(shape) != 3 or shape[-1] is None:
        raise ValueError(
            f"{layer} takes `{argument}` of shape [batch, length, width] with "
            "a known width (e.g. the output of an Embedding, or "
            "keras.Input((None, d_model))). "
            f"Received: {argument} of shape {None if shape is None else tuple(shape)}"
        )


def check_built(layer, method):
    """Raises a ValueError naming `method` when `layer` has not created its
    weights yet (its sublayers and kernels come from `build`), instead of an
    AttributeError on a missing one."""
    if not layer.built:
        name = type(layer).__name__
        raise ValueError(
            f"{name}.{method} needs the layer's sublayers and weights, which "
            f"{name} creates when it is built: call the layer on inputs once "
            "(or `build` it) first."
        )


def check_static_dim(name, tensor, axis, reference_name, reference, reference_axis):
    """Raises a ValueError naming `name` when `tensor`'s `axis` and
    `reference`'s `reference_axis` are both known and differ (always in
    eager calls), instead of an error from inside a TensorFlow kernel. A
    mask's axis of 1 broadcasts and passes."""
    size, expected = tensor.shape[axis], reference.shape[reference_axis]
    broadcasts = name.endswith("mask") and size == 1
    if size is None or expected is None or size == expected or broadcasts:
        return
    raise ValueError(
        f"Axis {axis} of `{name}` must match axis {reference_axis} of "
        f"`{reference_name}` ({expected}). Received: {name} of shape "
        f"{tuple(tensor.shape)}, {reference_name} of shape "
        f"{tuple(reference.shape)}"
    )


def check_sentence_mask(name, mask, keys_name, keys):
    """`check_static_dim` for a mask of the keys' sentences, [B, S] or
    [B, 1, S], against keys [B, S, D]: a layer names its own argument (e.g.
    `padding_mask`) rather than the attention's `attention_mask`. A mask
    without a shape (a list) is left to the attention's own check."""
    if not hasattr(mask, "shape"):
        return
    check_static_dim(name, mask, -1, keys_name, keys, 1)
    check_static_dim(name, mask, 0, keys_name, keys, 0)
