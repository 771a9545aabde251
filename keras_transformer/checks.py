"""Type predicates that every module's argument checks share.

Plain Python (no TensorFlow), so that the data, config and decoding modules
can use them without importing the layers.
"""

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
