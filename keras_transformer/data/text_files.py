"""Validating readers for plain-text parallel corpora (aligned files, TSV).

Every error names the file and, where it applies, the line (1-based).
"""

import os

import tensorflow as tf


def read_lines(path: str) -> list[str]:
    """Reads a UTF-8 text file into a list of lines.

    Lines are split on "\\n" only (not on the other Unicode line breaks that
    `str.splitlines` honours, which would break the alignment of parallel
    files); surrounding whitespace, including a Windows "\\r", is removed.
    A final newline does not make an extra line.

    Args:
        path: path of the file (any filesystem `tf.io.gfile` reads).

    Returns:
        The lines, in order, without line ends.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the file is empty or is not valid UTF-8 (the message
            names the line of the first invalid byte).
    """
    return _lines(_read_text(path))


def split_lines(data: bytes, name: str) -> list[str]:
    """UTF-8 `data` (e.g. standard input) as `read_lines` gives a file's
    lines, without its emptiness check (no data gives no lines).

    Args:
        data: the bytes.
        name: what they are, for the error message (e.g. "standard input").

    Raises:
        ValueError: if `data` is not valid UTF-8 (the message names the
            line of the first invalid byte).
    """
    text = decode_utf8(data, name, argument="input")
    return _lines(text) if text else []


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.removesuffix("\n").split("\n")]


def decode_utf8(data: bytes, name: str, argument: str = "path") -> str:
    """`data` decoded as UTF-8.

    Args:
        data: the bytes.
        name: where they come from, e.g. a path.
        argument: what `name` is, for the error's `Received: argument=name`.

    Raises:
        ValueError: if it is not valid UTF-8; the message names `name` and
            the line of the first invalid byte.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"invalid UTF-8 in {name} line {line}: byte "
            f"{data[error.start : error.start + 1]!r} cannot be decoded. "
            "Convert the text to UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8`). "
            f"Received: {argument}={name}, line={line}"
        ) from None


def _read_text(path: str) -> str:
    """Checked UTF-8 contents of `path`, without the final newline."""
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"Text corpus file {path} does not exist. Check the path, and for "
            "`text:PREFIX` corpora that the files are named PREFIX.SRC_LANG "
            f"and PREFIX.TGT_LANG. Received: path={path}"
        )
    with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    if not data.strip():
        raise ValueError(
            f"Text corpus file {path} is empty. A corpus file needs one "
            f"sentence per line. Received: path={path}"
        )
    return decode_utf8(data, path).removesuffix("\n")


def read_parallel_files(
    source_path: str, target_path: str
) -> tuple[list[str], list[str]]:
    """Reads a pair of line-aligned files: line i of each is one pair.

    Args:
        source_path: file of source sentences, one per line.
        target_path: file of target sentences, same number of lines.

    Returns:
        `(sources, targets)`, two lists of equal length.

    Raises:
        FileNotFoundError: if a file does not exist.
        ValueError: if a file is empty or not UTF-8, or if the files have
            different line counts.
    """
    sources = read_lines(source_path)
    targets = read_lines(target_path)
    if len(sources) != len(targets):
        raise ValueError(
            f"{os.path.basename(target_path)} has {len(targets)} lines but "
            f"{os.path.basename(source_path)} has {len(sources)} lines; "
            "parallel files must be line-aligned (line i of one translates "
            "line i of the other). Fix the files so the counts agree. "
            f"Received: source_path={source_path}, target_path={target_path}"
        )
    return sources, targets


def read_tsv(path: str) -> tuple[list[str], list[str]]:
    """Reads a tab-separated parallel file of `source<TAB>target` lines.

    Args:
        path: the TSV file. Each line has exactly two tab-separated fields,
            the source sentence first.

    Returns:
        `(sources, targets)`, two lists of equal length.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the file is empty or not UTF-8, or a line does not
            have exactly two fields (the message names the line).
    """
    sources, targets = [], []
    lines = _read_text(path).split("\n")
    for number, line in enumerate(lines, start=1):
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) != 2:
            raise ValueError(
                f"{path} line {number} has {len(fields)} tab-separated "
                "field(s) but a TSV corpus line needs exactly 2: "
                "source<TAB>target. Remove stray tabs or fix the line. "
                f"Received: path={path}, line={number}"
            )
        sources.append(fields[0].strip())
        targets.append(fields[1].strip())
    return sources, targets
