"""Paths on any filesystem that `tf.io.gfile` knows (local paths and URLs:
`gs://`, `file://`; `s3://` or `hdfs://` with tensorflow-io), for the code
and libraries that take local paths only (`os.path`, h5py)."""

import contextlib
import os
import tempfile

import tensorflow as tf


def is_remote(path: str) -> bool:
    """Whether `path` is a URL (`gs://bucket/run`, `file:///tmp/run`), which
    only `tf.io.gfile` opens, rather than a local path."""
    return "://" in str(path)


def absolute(path: str) -> str:
    """`path` made absolute and normalized ("c/../c" -> "c"), unless it is
    a URL."""
    return path if is_remote(path) else os.path.abspath(path)


@contextlib.contextmanager
def local_copy(path: str, mode: str = "r"):
    """A local path for the block to open `path` through.

    A local `path` is itself. A remote one is a temporary local file: for
    mode "r" a copy of `path`; for "w" a new file, copied to `path` when
    the block ends without an error (a failed block writes nothing there).

    Args:
        path: the file's path, local or remote.
        mode: "r" (the block reads the file) or "w" (it writes it).

    Yields:
        The local path.
    """
    if mode not in ("r", "w"):
        raise ValueError(f'`mode` must be "r" or "w". Received: mode={mode!r}')
    if not is_remote(path):
        yield path
        return
    with tempfile.TemporaryDirectory() as folder:
        local = os.path.join(folder, os.path.basename(path))
        if mode == "r":
            tf.io.gfile.copy(path, local)
        yield local
        if mode == "w":
            tf.io.gfile.copy(local, path, overwrite=True)
