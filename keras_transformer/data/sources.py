"""Corpus specs (`--data=...`) and loading one split as (source, target) pairs.

The spec forms are:

- `demo`: the built-in synthetic English-German corpus (en-de either way).
- `text:PATH/PREFIX`: Moses/fairseq naming, PREFIX.SRC_LANG and
  PREFIX.TGT_LANG (e.g. `text:data/train` reads `data/train.en` and
  `data/train.de`). Dev and test are sibling prefixes in the same folder:
  dev is the first of `dev`, `valid`, `newstest2013` that exists, test the
  first of `test`, `newstest2014`.
- `text:train=PREFIX,dev=PREFIX,test=PREFIX`: explicit prefixes per split
  (any subset of the splits).
- `tsv:PATH/train.tsv` or `tsv:train=FILE,dev=FILE,test=FILE`: lines of
  `source<TAB>target` (source in SRC_LANG first); siblings `dev.tsv` (or
  `valid.tsv`, `newstest2013.tsv`) and `test.tsv` (or `newstest2014.tsv`).
- `tfds:wmt14_translate/de-en` (or `/fr-en`, or another TFDS translation
  dataset's NAME/CONFIG, e.g. `ted_hrlr_translate/pt_to_en`): TFDS,
  prepared beforehand (see `tfds_source`); the direction comes from
  src_lang and tgt_lang.
"""

import contextlib
import dataclasses
import functools
import os

import tensorflow as tf
from absl import logging

from keras_transformer import files
from keras_transformer.data import text_files, tfds_source

SPLITS = ("train", "dev", "test")
KINDS = ("demo", "text", "tsv", "tfds")
# Sibling prefixes (text) or file stems (tsv) tried, in order, per split.
SIBLING_NAMES = {
    "dev": ("dev", "valid", "newstest2013"),
    "test": ("test", "newstest2014"),
}
SPEC_FORMS = (
    "demo",
    "text:PATH/PREFIX",
    "text:train=PREFIX,dev=PREFIX,test=PREFIX",
    "tsv:PATH/FILE.tsv",
    "tsv:train=FILE,dev=FILE,test=FILE",
    "tfds:wmt14_translate/de-en",
    "tfds:wmt14_translate/fr-en",
    "tfds:NAME/CONFIG",
)
# The paper's shared BPE vocabulary sizes (section 5.1).
_DEFAULT_VOCAB_SIZES = {
    frozenset(("en", "de")): 37000,
    frozenset(("en", "fr")): 32000,
}
# The demo corpus's (it has about 4,300 distinct BPE merges).
DEMO_VOCAB_SIZE = 2000


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """A parsed `--data` value; build it with `parse_data_spec`.

    Args:
        kind: "demo", "text", "tsv" or "tfds".
        location: the training prefix ("text"), the training file ("tsv"),
            the TFDS name with its config ("tfds"), or "" ("demo" and
            explicit per-split specs).
        splits: explicit `(split, prefix or file)` pairs; when given, only
            these splits exist and no siblings are looked up.
    """

    kind: str
    location: str = ""
    splits: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(
                f"`kind` must be one of {KINDS}. Received: kind={self.kind}"
            )

    def __str__(self):
        """The spec string, as `--data` takes it (e.g. "text:c/train")."""
        if self.splits:
            items = ",".join(f"{split}={path}" for split, path in self.splits)
            return f"{self.kind}:{items}"
        return f"{self.kind}:{self.location}" if self.location else self.kind


class MissingSplitError(FileNotFoundError, ValueError):
    """A split the data spec does not have (no sibling files, not among its
    named splits, or not in the prepared TFDS dataset)."""

    def with_fix(self, fix):
        """This error with `fix`, another way out, added to its message
        before the "Received: ..." part that every message ends with."""
        problem, received, values = str(self).partition(" Received: ")
        return MissingSplitError(f"{problem} {fix}{received}{values}")


def parse_data_spec(spec: str) -> DataSpec:
    """Parses a `--data` string such as "text:data/train" into a `DataSpec`.

    Args:
        spec: one of the forms listed in `SPEC_FORMS`.

    Returns:
        The `DataSpec`.

    Raises:
        ValueError: if the string matches none of the forms.
    """
    kind, colon, rest = spec.strip().partition(":")
    if kind == "demo" and not colon:
        return DataSpec("demo")
    if not colon or kind not in ("text", "tsv", "tfds") or not rest:
        raise _spec_error(spec)
    if kind == "tfds":
        _, slash, config = rest.partition("/")
        if not slash or not config:
            raise _spec_error(spec, "tfds needs NAME/CONFIG, the config a pair")
        return DataSpec("tfds", location=rest)
    # Named splits start with one (`train=...`): a path may hold "=".
    first, equals, _ = rest.partition("=")
    if not equals or first not in SPLITS:
        return DataSpec(kind, location=rest)
    splits = []
    for item in rest.split(","):
        split, equals, location = item.partition("=")
        if not equals or split not in SPLITS or not location:
            raise _spec_error(spec, f"bad item {item!r}")
        if split in dict(splits):
            raise _spec_error(spec, f"split {split} named twice")
        splits.append((split, location))
    return DataSpec(kind, splits=tuple(splits))


def absolute_data_spec(spec: DataSpec | str) -> DataSpec:
    """`spec` with its local paths absolute and normalized: the form in
    which a run records its corpus, to recognize it on a rerun.

    A relative path names another corpus when run from another working
    directory, and one corpus has many spellings (`text:c/../c/train`,
    `text:/home/me/c/train`). Remote paths (`gs://...`) are kept as given.

    Args:
        spec: a `DataSpec` or a spec string (see `SPEC_FORMS`).

    Returns:
        The `DataSpec`, e.g. with location "/home/me/c/train" for
        "text:c/train" in /home/me.

    Raises:
        ValueError: as `parse_data_spec`.
    """
    spec = parse_data_spec(spec) if isinstance(spec, str) else spec
    if spec.kind not in ("text", "tsv"):
        return spec
    return dataclasses.replace(
        spec,
        location=spec.location and files.absolute(spec.location),
        splits=tuple(
            (split, files.absolute(path)) for split, path in spec.splits
        ),
    )


def normalize_data_spec(spec: str) -> str:
    """The spec string of `absolute_data_spec(spec)`, e.g.
    "text:/home/me/c/train" for "text:c/../c/train" in /home/me."""
    return str(absolute_data_spec(spec))


def _spec_error(spec, detail=None):
    detail = f" ({detail})" if detail else ""
    return ValueError(
        f"Unknown data spec{detail}. Use one of: {', '.join(SPEC_FORMS)}. "
        f"Received: spec={spec!r}"
    )


def default_vocab_size(
    src_lang: str, tgt_lang: str, spec: DataSpec | str | None = None
) -> int:
    """The shared vocabulary size for a corpus and language pair.

    Args:
        src_lang: source language code, e.g. "en".
        tgt_lang: target language code, e.g. "de".
        spec: the corpus (a `DataSpec` or `--data` string), if known.

    Returns:
        `DEMO_VOCAB_SIZE` for the demo corpus, else the paper's: 37000 for
        English-German and 32000 for English-French (either direction).

    Raises:
        ValueError: for any other pair; pass a vocabulary size explicitly.
    """
    spec = parse_data_spec(spec) if isinstance(spec, str) else spec
    if spec is not None and spec.kind == "demo":
        return DEMO_VOCAB_SIZE
    size = _DEFAULT_VOCAB_SIZES.get(frozenset((src_lang, tgt_lang)))
    if size is None:
        raise ValueError(
            "There is no default vocabulary size for this language pair "
            "(only en-de: 37000 and en-fr: 32000); set it with `vocab_size` "
            "(--vocab_size). Received: "
            f"src_lang={src_lang}, tgt_lang={tgt_lang}"
        )
    return size


def check_data_dir(spec: DataSpec, data_dir: str | None) -> None:
    """Raises a ValueError if `data_dir`, the TFDS data directory, is given
    with a corpus that does not read it (rather than ignoring it)."""
    if data_dir is not None and spec.kind != "tfds":
        raise ValueError(
            "`data_dir` (--data_dir) is the TFDS data directory, which a "
            f"{spec.kind} corpus does not read; drop it, or pass a tfds: "
            f"corpus. Received: data_dir={data_dir}, data={spec}"
        )


def load_pairs(
    spec: DataSpec | str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_dir: str | None = None,
) -> tuple[list[str], list[str]]:
    """Loads one split as two aligned lists of sentences, all of them.

    Nothing is filtered here: evaluation sees every test sentence.

    Args:
        spec: a `DataSpec` or a spec string (see `SPEC_FORMS`).
        split: "train", "dev" or "test".
        src_lang: source language code; for text corpora, the file suffix.
        tgt_lang: target language code; for text corpora, the file suffix.
        data_dir: TFDS data directory (only for "tfds" specs).

    Returns:
        `(sources, targets)`, lists of equal length.

    Raises:
        ValueError: for an unknown spec or split, equal or unsupported
            languages, bad files (the message names file and line), or a
            `data_dir` with a corpus other than TFDS.
        FileNotFoundError: for missing files or unprepared TFDS data.
    """
    spec = parse_data_spec(spec) if isinstance(spec, str) else spec
    check_data_dir(spec, data_dir)
    _check_split_and_langs(split, src_lang, tgt_lang)
    if spec.kind == "demo":
        return _demo_pairs(split, src_lang, tgt_lang)
    if spec.kind == "tfds":
        dataset = load_split(spec, split, src_lang, tgt_lang, data_dir)
        sources, targets = [], []
        with read_errors(spec, split, data_dir):
            for source, target in dataset.as_numpy_iterator():
                sources.append(source.decode("utf-8"))
                targets.append(target.decode("utf-8"))
        return sources, targets
    files = split_files(spec, split, src_lang, tgt_lang)
    if spec.kind == "tsv":
        return text_files.read_tsv(*files)
    return text_files.read_parallel_files(*files)


def split_files(
    spec: DataSpec | str, split: str, src_lang: str, tgt_lang: str
) -> list[str]:
    """The files that hold one split of a "text" or "tsv" corpus.

    Args: as `load_pairs`.

    Returns:
        `[source file, target file]` ("text"), `[tsv file]` ("tsv"), or
        `[]` ("demo" and "tfds", which read no file of the user's).

    Raises:
        MissingSplitError (a FileNotFoundError and a ValueError): for a
            split that an explicit spec does not name, or that no sibling
            file holds.
    """
    spec = parse_data_spec(spec) if isinstance(spec, str) else spec
    if spec.kind in ("demo", "tfds"):
        return []
    location = _split_location(spec, split, src_lang)
    if spec.kind == "tsv":
        return [location]
    return [f"{location}.{src_lang}", f"{location}.{tgt_lang}"]


def check_split_files(
    spec: DataSpec | str, split: str, src_lang: str, tgt_lang: str
) -> None:
    """Fails as reading `split` would if one of its files (`split_files`) is
    missing, without reading them: a run checks its training files before
    it looks for (and reports the lack of) a dev split.

    Raises:
        MissingSplitError: as `split_files`.
        FileNotFoundError, ValueError: for a file that is missing or a
            directory (`text_files.check_corpus_file`).
    """
    for path in split_files(spec, split, src_lang, tgt_lang):
        text_files.check_corpus_file(path)


def corpus_files(
    spec: DataSpec | str, src_lang: str, tgt_lang: str
) -> list[tuple[str, str]]:
    """`(split, file)` for every file of every split that a "text" or "tsv"
    corpus has (`split_files`; splits it lacks are skipped): the files a
    command that writes must not overwrite."""
    files = []
    for split in SPLITS:
        with contextlib.suppress(MissingSplitError):
            files += [
                (split, path)
                for path in split_files(spec, split, src_lang, tgt_lang)
            ]
    return files


def load_split(
    spec: DataSpec | str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_dir: str | None = None,
) -> tf.data.Dataset:
    """Loads one split as a `tf.data.Dataset` of `(source, target)` strings.

    TFDS splits stream from disk; the other kinds are read (and validated)
    into memory first. Arguments, errors: as `load_pairs`.

    Returns:
        A dataset of scalar `tf.string` pairs in corpus order.
    """
    spec = parse_data_spec(spec) if isinstance(spec, str) else spec
    check_data_dir(spec, data_dir)
    if spec.kind == "tfds":
        _check_split_and_langs(split, src_lang, tgt_lang)
        try:
            return tfds_source.load_tfds_split(
                spec.location, split, src_lang, tgt_lang, data_dir
            )
        except tfds_source.MissingTfdsSplitError as error:
            raise MissingSplitError(str(error)) from None
    sources, targets = load_pairs(spec, split, src_lang, tgt_lang)
    return tf.data.Dataset.from_tensor_slices(
        (tf.constant(sources, tf.string), tf.constant(targets, tf.string))
    )


def read_errors(spec: DataSpec | str, split: str, data_dir: str | None = None):
    """A context for reading the dataset of `load_split`: a TFDS split's
    damaged file fails in one line (`tfds_source.read_errors`); the other
    kinds were read and checked by `load_split` itself."""
    spec = parse_data_spec(spec) if isinstance(spec, str) else spec
    if spec.kind != "tfds":
        return contextlib.nullcontext()
    return tfds_source.read_errors(spec.location, split, data_dir)


def _check_split_and_langs(split, src_lang, tgt_lang):
    if split not in SPLITS:
        raise ValueError(
            f"`split` must be one of {SPLITS}. Received: split={split}"
        )
    if not src_lang or not tgt_lang or src_lang == tgt_lang:
        raise ValueError(
            "`src_lang` and `tgt_lang` must be two different language "
            f"codes. Received: src_lang={src_lang}, tgt_lang={tgt_lang}"
        )


def _split_location(spec, split, src_lang):
    """The prefix (text) or file (tsv) holding `split`."""
    if spec.splits:
        explicit = dict(spec.splits)
        if split not in explicit:
            raise MissingSplitError(
                f"The data spec names no {split} split; add "
                f"`{split}=...` to it. Received: splits={sorted(explicit)}"
            )
        return explicit[split]
    if split == "train":
        return spec.location
    folder = os.path.dirname(spec.location)
    extension = os.path.splitext(spec.location)[1] if spec.kind == "tsv" else ""
    probe_suffix = "" if spec.kind == "tsv" else f".{src_lang}"
    # A processed corpus keeps its marks on every split: `train.tok` has
    # `dev.tok` (tried before a plain `dev`, which would be the raw text).
    stem = os.path.basename(spec.location.removesuffix(extension))
    mark = stem[len("train") :] if stem.startswith("train") else ""
    names = [name + mark for name in SIBLING_NAMES[split]] if mark else []
    tried = []
    for index, name in enumerate(names + list(SIBLING_NAMES[split])):
        candidate = os.path.join(folder, name + extension)
        tried.append(candidate + probe_suffix)
        if tf.io.gfile.exists(candidate + probe_suffix):
            if index >= len(names) > 0:
                marked = tuple(tried[: len(names)])
                _warn_unmarked(
                    spec, split, candidate + probe_suffix, mark, marked
                )
            return candidate
    raise MissingSplitError(
        f"No {split} split beside {spec.location}: none of {tried} exists. "
        f"Add the files or name them: {spec.kind}:train=...,{split}=... "
        f"Received: location={spec.location}"
    )


@functools.cache  # Once: a command may look a split up more than once.
def _warn_unmarked(spec, split, found, mark, marked):
    logging.warning(
        "The %s split is read from %s: there is none marked %r as %s is "
        "(%s), and an unmarked file may be processed otherwise. Name the "
        "files if that is not the one: %s:train=...,%s=...",
        split,
        found,
        mark,
        spec.location,
        ", ".join(marked),
        spec.kind,
        split,
    )


@functools.cache
def _demo_splits():
    # Lazy: the demo corpus is generated on first use only.
    from keras_transformer.data import demo_corpus

    return demo_corpus.demo_splits()


def _demo_pairs(split, src_lang, tgt_lang):
    from keras_transformer.data import demo_corpus

    languages = (demo_corpus.SOURCE_LANG, demo_corpus.TARGET_LANG)
    for arg, lang in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
        if lang not in languages:
            raise ValueError(
                f"The demo corpus is {'-'.join(languages)}; `{arg}` must be "
                f"one of {languages}. Received: {arg}={lang}"
            )
    pairs = _demo_splits()[split]
    by_lang = {
        demo_corpus.SOURCE_LANG: [pair[0] for pair in pairs],
        demo_corpus.TARGET_LANG: [pair[1] for pair in pairs],
    }
    return by_lang[src_lang], by_lang[tgt_lang]
