"""Checks of how the layers are called: the tensors' shapes and whether
the layer is built.

Each raises a one-line ValueError that names the layer's own argument when
the layer is called, rather than a later error from a sublayer or from
TensorFlow. The checks of constructor arguments are plain Python
(`keras_transformer/checks.py`).
"""


def check_sequence_shape(layer, argument, shape):
    """Raises a ValueError naming `layer`'s `argument` unless `shape` is that
    of a batch of vector sequences, [B, T, D] with D known (the width that
    the layer's weights are built for)."""
    if shape is None or len(shape) != 3 or shape[-1] is None:
        raise ValueError(
            f"{layer} takes `{argument}` of shape [batch, length, width] with "
            "a known width (e.g. the output of an Embedding, or "
            "keras.Input((None, d_model))). "
            f"Received: {argument} of shape "
            f"{None if shape is None else tuple(shape)}"
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


def check_static_dim(
    name, tensor, axis, reference_name, reference, reference_axis
):
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
