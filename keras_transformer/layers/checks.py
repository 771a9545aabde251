"""Checks of the layers' constructor arguments.

Each raises at construction a one-line ValueError that names the layer's
own argument, rather than a later error from a sublayer or from TensorFlow.
"""

import numbers


def check_positive_int(name, value):
    """Raises a ValueError unless `value` is an int >= 1 (not a bool)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            f"`{name}` must be a positive integer. Received: {name}={value!r}"
        )


def check_rate(name, value):
    """Raises a ValueError unless `value` is a dropout rate in [0, 1): the
    layers that own a `Dropout` check their own argument, as Keras's message
    would name the dropout layer's `rate` instead."""
    valid = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not valid or not 0 <= value < 1:
        raise ValueError(
            f"`{name}` must be a number in [0, 1) (the fraction of units "
            f"dropped; 0 disables dropout). Received: {name}={value!r}"
        )
