"""A copy of an initializer for each weight that a layer draws with it.

A Keras 3 random initializer draws its seed once, when it is made (or takes
the one it is given), so one instance called for several weights gives them
all the same values: a layer's query, key, value and output kernels would
start equal. Keras's own `MultiHeadAttention` clones its initializer for
each sublayer for this reason.
"""


def initializer_copy(initializer, index):
    """A copy of `initializer` for a layer's `index`-th weight drawn with it.

    Args:
        initializer: a `keras.initializers.Initializer`.
        index: the weight's number among the layer's weights that share the
            initializer (0, 1, ...).

    Returns:
        Without a seed, a copy that draws a seed of its own; with an integer
        seed, a copy seeded `seed + index` (reproducible, and still distinct
        from the layer's other weights); a non-random initializer's copy.
    """
    config = initializer.get_config()
    seed = config.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        config["seed"] = seed + index
    return initializer.__class__.from_config(config)
