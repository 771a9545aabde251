"""Validating readers for plain-text parallel corpora (aligned files, TSV).

Every error names the file and, where it applies, the line (1-based).
"""

import codecs
import os

import tensorflow as tf


def read_lines(path: str) -> list[str]:
    """Reads a UTF-8 text file into a list of lines.

    Lines are split on "\\n" only (not on the other Unicode line breaks
    that `str.splitlines` honours, which would break the alignment of
    parallel files); surrounding whitespace is removed. A final newline does
    not make an extra line, and a UTF-8 byte-order mark at the start of the
    file is dropped.

    Carriage returns right before a "\\n" belong to the line end (Windows'
    "\\r\\n"). Any other "\\r" is an error, never text: a file with old Mac
    "\\r" line ends would otherwise read as one line, and a pair of them as
    one silently joined pair.

    Args:
        path: path of the file (any filesystem `tf.io.gfile` reads).

    Returns:
        The lines, in order, without line ends.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if `path` is a directory or cannot be read, or the file
            is empty (a byte-order mark alone is empty), is not valid UTF-8
            (the message names the line of the first invalid byte; UTF-16
            and UTF-32 are named as such), or holds a "\\r" inside a line
            (the message names the line).
    """
    return _lines(_read_text(path), path, "path")


def split_lines(data: bytes, name: str, argument: str = "input") -> list[str]:
    """UTF-8 `data` (e.g. standard input) as `read_lines` gives a file's
    lines, without its emptiness check (no data gives no lines).

    Args:
        data: the bytes.
        name: what they are, for the error message (e.g. "standard input").
        argument: the flag or argument they came from, for the message's
            "Received: ..." part.

    Raises:
        ValueError: if `data` is not valid UTF-8 (the message names the
            line of the first invalid byte) or holds a "\\r" inside a line.
    """
    text = decode_utf8(data, name, argument=argument)
    return _lines(text.removesuffix("\n"), name, argument) if text else []


def read_sentences(path: str, flag: str) -> list[str]:
    """The lines of a command's file of sentences (one per line), split as
    standard input is (a file of only blank lines gives as many empty
    sentences, one per line).

    Args:
        path: the file.
        flag: the command's flag that named it (e.g. "input"), for the
            messages.

    Raises:
        FileNotFoundError: if there is no file at `path`.
        ValueError: if it is a directory, cannot be read, is empty, or is
            not UTF-8 (the message names the line).
    """
    hint = "Pass a text file of sentences, one per line."
    data = read_file(path, f"The --{flag} file", hint, argument=flag)
    sentences = split_lines(data, path, argument=flag)
    if not sentences:  # No bytes, or a byte-order mark alone.
        raise ValueError(
            f"The --{flag} file {path} is empty. {hint} Received: {flag}={path}"
        )
    return sentences


def _lines(text: str, name: str, argument: str) -> list[str]:
    """The stripped lines of `text`, whose final newline is removed: a
    blank last line (e.g. an empty translation) stays a line."""
    return [line.strip() for line in _split(text, name, argument)]


def _split(text: str, name: str, argument: str) -> list[str]:
    """`text` split on "\\n", without the "\\r" of "\\r\\n" line ends.

    Raises:
        ValueError: if a "\\r" is left inside a line (old Mac line ends or
            a stray carriage return); the message names `name` and the line.
    """
    lines = text.split("\n")
    if "\r" not in text:  # The common case, checked in one pass.
        return lines
    lines = [line.rstrip("\r") for line in lines]
    for number, line in enumerate(lines, start=1):
        if "\r" in line:
            raise ValueError(
                f"{name} line {number} holds a carriage return (\\r) that "
                "does not end a \\r\\n line, so where its sentences end is "
                "unclear. If the file uses old Mac line ends, convert them "
                "(e.g. `tr '\\r' '\\n'`); otherwise delete the stray \\r. "
                f"Received: {argument}={name}, line={number}"
            )
    return lines


# Compressed files: (format, file extension, the tool that decompresses it,
# its first bytes, where the rest of its signature starts, that rest). Text
# never starts so; read as text, their bytes would be invalid UTF-8, for
# which the advice is another encoding.
_COMPRESSIONS = (
    ("gzip", ".gz", "gunzip", b"\x1f\x8b", 2, b""),
    ("bzip2", ".bz2", "bunzip2", b"BZh", 4, b"1AY&SY"),
    ("xz", ".xz", "unxz", b"\xfd7zXZ\x00", 6, b""),
    ("zstd", ".zst", "unzstd", b"\x28\xb5\x2f\xfd", 4, b""),
)


def decode_utf8(data: bytes, name: str, argument: str = "path") -> str:
    """`data` decoded as UTF-8, without a leading byte-order mark.

    A UTF-8 byte-order mark (U+FEFF, which some Windows editors write) at
    the start of `data` is dropped ("utf-8-sig"), so that it does not stick
    to the first sentence.

    Args:
        data: the bytes.
        name: where they come from, e.g. a path.
        argument: what `name` is, for the error's `Received: argument=name`.

    Raises:
        ValueError: if it is not valid UTF-8; the message names `name` and
            the line of the first invalid byte, or says that `data` is
            UTF-16 or UTF-32 if it starts with that byte-order mark; also
            for a zero byte (UTF-16 or UTF-32 without a mark, if ASCII).
    """
    for compression, _, tool, magic, offset, rest in _COMPRESSIONS:
        if data.startswith(magic) and data.startswith(rest, offset):
            raise ValueError(
                f"{name} is {compression}-compressed, not text; decompress it "
                f"first (e.g. `{tool} -k {name}`). Received: {argument}={name}"
            )
    # UTF-32 first: its little-endian mark starts with UTF-16's.
    for encoding, marks in (
        ("UTF-32", (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)),
        ("UTF-16", (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)),
    ):
        if data.startswith(marks):
            raise ValueError(
                f"{name} is {encoding} (it starts with a {encoding} byte-order "
                f"mark), not UTF-8. Convert it to UTF-8 (e.g. `iconv -f "
                f"{encoding} -t UTF-8`). Received: {argument}={name}"
            )
    # Not "utf-8-sig", whose error offsets would not index `data`. The mark
    # holds no "\n", so line numbers stay those of the file.
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"invalid UTF-8 in {name} line {line}: byte "
            f"{data[error.start : error.start + 1]!r} cannot be decoded. "
            "Convert the text to UTF-8 (e.g. `iconv -f LATIN1 -t UTF-8`). "
            f"Received: {argument}={name}, line={line}"
        ) from None
    # UTF-16 or UTF-32 text without a byte-order mark is valid UTF-8 when it
    # is ASCII: its characters alternate with zero bytes, which would
    # become sentences of NULs (and an extra line) rather than an error.
    zero = data.find(b"\x00")
    if zero >= 0:
        line = data.count(b"\n", 0, zero) + 1
        raise ValueError(
            f"{name} line {line} holds a zero byte (U+0000), which text does "
            "not. If zero bytes alternate with the characters, the file is "
            "UTF-16 or UTF-32 without a byte-order mark: convert it to UTF-8 "
            "(e.g. `iconv -f UTF-16LE -t UTF-8`); otherwise delete the zero "
            f"bytes (e.g. `tr -d '\\000'`). Received: {argument}={name}, "
            f"line={line}"
        )
    return text


def read_file(path: str, what: str, hint: str, argument: str = "path") -> bytes:
    """The bytes of the file at `path`, with one-line errors for a bad path.

    Args:
        path: path of the file (any filesystem `tf.io.gfile` reads).
        what: what the file is, to start the messages (e.g. "Text corpus
            file").
        hint: how to find the right path, the fix given when `path` does
            not exist or is a directory.
        argument: the name the messages end with (`Received: path=...`),
            e.g. the flag that gave `path`.

    Returns:
        The contents.

    Raises:
        FileNotFoundError: if nothing exists at `path`.
        ValueError: if `path` is a directory, or cannot be read (no
            permission, a filesystem TensorFlow lacks, ...): the message
            gives TensorFlow's reason instead of its traceback.
    """
    check_file(path, what, hint, argument)
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            return f.read()
    except tf.errors.OpError as error:
        raise _unreadable(path, what, argument, error) from None


def check_file(path: str, what: str, hint: str, argument: str = "path") -> None:
    """Fails as `read_file` would for a path that is missing, a directory
    or not readable, without reading the file: a command checks each input
    before its first long step. Arguments and errors: as `read_file`'s."""
    try:
        if not tf.io.gfile.exists(path):
            for _, extension, tool, *_ in _COMPRESSIONS:
                if tf.io.gfile.exists(path + extension):
                    hint = (
                        f"{path + extension} exists: decompress it first (e.g. "
                        f"`{tool} -k {path + extension}`)."
                    )
                    break
            raise FileNotFoundError(
                f"{what} {path} does not exist. "
                f"{hint} Received: {argument}={path}"
            )
        if tf.io.gfile.isdir(path):
            raise ValueError(
                f"{what} {path} is a directory, not a file. {hint} "
                f"Received: {argument}={path}"
            )
    except tf.errors.OpError as error:
        raise _unreadable(path, what, argument, error) from None


def _unreadable(path, what, argument, error):
    return ValueError(
        f"{what} {path} cannot be read ({error.message}). Check that it "
        f"is a readable file. Received: {argument}={path}"
    )


_CORPUS_FILE = (
    "Text corpus file",
    "Check the path, and for `text:PREFIX` corpora that the files are "
    "named PREFIX.SRC_LANG and PREFIX.TGT_LANG; a `tsv:FILE` corpus is "
    "one file (e.g. tsv:PATH/train.tsv).",
)


def check_corpus_file(path: str) -> None:
    """Fails as reading the corpus file `path` would if it is missing or a
    directory (`check_file`), without reading it."""
    check_file(path, *_CORPUS_FILE)


def _read_text(path: str) -> str:
    """Checked UTF-8 contents of `path`, without the final newline."""
    data = read_file(path, *_CORPUS_FILE)
    text = decode_utf8(data, path)
    if not text.strip():
        raise ValueError(
            f"Text corpus file {path} is empty. A corpus file needs one "
            f"sentence per line. Received: path={path}"
        )
    return text.removesuffix("\n")


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
        ValueError: if a file is unreadable or is not a text file
            `read_lines` accepts, or if the files have different line
            counts.
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
            the source sentence first (no header line), or is blank (an
            empty pair).

    Returns:
        `(sources, targets)`, two lists of equal length.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the file is unreadable or is not a text file
            `read_lines` accepts, or a line does not have exactly two fields
            (the message names the line).
    """
    sources, targets = [], []
    lines = _split(_read_text(path), path, "path")
    for number, line in enumerate(lines, start=1):
        # A blank line is an empty pair, as blank lines of a text corpus are
        # (training drops and counts it).
        fields = line.split("\t") if line.strip() else ["", ""]
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
