"""Which ops of a graph no GPU kernel of this TensorFlow build takes.

No GPU is lent to these tests; TensorFlow's pip build registers its CUDA
kernels all the same, so what its placer would put on the CPU of a GPU
machine can be read from the kernel registry: an op whose types no GPU
kernel takes.
"""

import functools

from tensorflow.python.framework import kernels


def cpu_only_ops(library, names=(), nodes=()) -> set:
    """The types of the ops without a GPU kernel for their types.

    Args:
        library: a graph's `FunctionDef`s by name.
        names: functions of `library` to look in.
        nodes: `NodeDef`s to look in (a graph's own).

    Returns:
        The op types found among `nodes`, the functions `names` and the
        functions that either calls (also a loop's cond and body).
    """
    found, seen, pending = set(), set(), list(names)
    nodes = list(nodes)
    while nodes or pending:
        if not nodes:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            nodes = list(library[name].node_def)
        node = nodes.pop()
        values = node.attr.values()
        called = [value.func.name for value in values]
        called += [f.name for value in values for f in value.list.func]
        pending += [name for name in [*called, node.op] if name in library]
        if node.op not in library and not _has_gpu_kernel(node):
            found.add(node.op)
    return found


def _has_gpu_kernel(node) -> bool:
    for kernel in _registered_kernels(node.op):
        if kernel.device_type in ("GPU", "DEFAULT") and all(
            _type_allowed(node.attr.get(c.name), c.allowed_values.list.type)
            for c in kernel.constraint
        ):
            return True
    return False


def _type_allowed(value, allowed) -> bool:
    if value is None or not allowed:
        return True
    types = list(value.list.type) if value.HasField("list") else [value.type]
    return all(t in allowed for t in types)


@functools.cache
def _registered_kernels(op):
    # The registry is read whole at each call (~1 ms); a saved model's
    # library has thousands of nodes of a few hundred op types.
    return tuple(kernels.get_registered_kernels_for_op(op).kernel)
