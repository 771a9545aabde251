"""Argument checks that every module shares: type predicates and the
checks of sizes, ids, switches and rates.

Plain Python (no TensorFlow), so that the data, config and decoding modules
can use them without importing the layers. Each check raises a one-line
ValueError that names the caller's own argument, at construction, rather
than a later error from a sublayer or from TensorFlow.
"""

import math
import numbers


def is_integer(value) -> bool:
    """Whether `value` is an integer: a Python int or a numpy integer (any
    `numbers.Integral`), but not a bool, which is an int subclass yet never
    a size, a count or a seed."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    """Whether `value` is a real number: an int, a float or a numpy number
    (any `numbers.Real`), but not a bool. NaN and infinity pass: check
    `math.isfinite` where they are not valid."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


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
        raise ValueError(
            f"`{name}` must be True or False. Received: {name}={value!r}"
        )
    return value


def check_positive_number(name, value):
    """Returns `value` as a float; raises a ValueError unless it is a finite
    real number > 0 (not a bool, a string, NaN or infinity)."""
    if not is_real(value) or not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"`{name}` must be a positive finite number. "
            f"Received: {name}={value!r}"
        )
    return float(value)


def check_non_negative_number(name, value):
    """Returns `value` as a float; raises a ValueError unless it is a finite
    real number >= 0 (not a bool, a string, NaN or infinity)."""
    if not is_real(value) or not (math.isfinite(value) and value >= 0):
        raise ValueError(
            f"`{name}` must be a finite number >= 0. Received: {name}={value!r}"
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
