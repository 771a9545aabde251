"""Paths on any filesystem that `tf.io.gfile` knows (local paths and URLs:
`gs://`, `file://`; `s3://` or `hdfs://` with tensorflow-io), for the code
and libraries that take local paths only (`os.path`, h5py's writing)."""

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


def same_file(path: str, other: str) -> bool:
    """Whether two local paths name one file (through symbolic or hard
    links)."""
    if os.path.realpath(path) == os.path.realpath(other):
        return True
    return (
        os.path.exists(path)
        and os.path.exists(other)
        and os.path.samefile(path, other)
    )


@contextlib.contextmanager
def local_staging(path: str):
    """A local path for the block to write `path` through: `path` itself if
    it is local; for a URL, a temporary local file copied to `path` when
    the block ends without an error (a failed block writes nothing there).

    Yields:
        The local path.
    """
    if not is_remote(path):
        yield path
        return
    with tempfile.TemporaryDirectory() as folder:
        local = os.path.join(folder, os.path.basename(path))
        yield local
        tf.io.gfile.copy(local, path, overwrite=True)


@contextlib.contextmanager
def written_aside(path: str, keep_suffix: bool = True):
    """A path beside `path` for the block to write the file to, renamed to
    `path` when the block ends without an error and removed when it fails:
    a process killed or failing mid-write (a full disk) leaves the earlier
    file, or none, never a truncated one where readers look.

    Args:
        path: the file to write, local or a URL.
        keep_suffix: name the partial file `partial-<name>`, for writers
            that check the suffix (Keras's `.keras`, `.weights.h5`); False
            names it `<name>.partial`, for files that readers find by their
            suffix (a run's one `*.model` vocabulary).

    Yields:
        The partial file's path.
    """
    folder, name = os.path.split(path)
    partial = (
        os.path.join(folder, f"partial-{name}")
        if keep_suffix
        else f"{path}.partial"
    )
    try:
        yield partial
        tf.io.gfile.rename(partial, path, overwrite=True)
    except BaseException:
        if tf.io.gfile.exists(partial):
            tf.io.gfile.remove(partial)
        raise


def write_whole(path: str, content: str | bytes, keep_suffix: bool = True):
    """Writes `content` (text, or bytes) to `path` through `written_aside`:
    readers find the whole file or the earlier one, never a part."""
    mode = "wb" if isinstance(content, bytes) else "w"
    with (
        written_aside(path, keep_suffix) as partial,
        tf.io.gfile.GFile(partial, mode) as file,
    ):
        file.write(content)
