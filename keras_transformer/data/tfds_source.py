"""WMT translation pairs from tensorflow-datasets (`wmt14_translate`).

Nothing is downloaded at run time. A user with internet prepares the data
once, then points `data_dir` at it (copy the folder to offline machines):

    tfds build wmt14_translate/de-en --data_dir=~/tensorflow_datasets

or, in Python,

    tfds.builder("wmt14_translate/de-en", data_dir=DIR).download_and_prepare()

(`fr-en` likewise). Splits: train; dev = TFDS "validation" (newstest2013,
the paper's development set); test = TFDS "test" (newstest2014).
"""

import contextlib
import os
import re

import tensorflow as tf
import tensorflow_datasets as tfds

# Our split names -> TFDS split names.
TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def data_root(data_dir: str | None = None) -> str:
    """The folder TFDS reads prepared datasets from: `data_dir`, or its
    default (`$TFDS_DATA_DIR`, else `~/tensorflow_datasets`)."""
    return os.path.expanduser(data_dir or tfds.core.constants.DATA_DIR)


class MissingTfdsSplitError(FileNotFoundError, ValueError):
    """A split the prepared dataset does not have (`sources` raises it as
    its `MissingSplitError`)."""


def load_tfds_split(
    name: str,
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_dir: str | None = None,
) -> tf.data.Dataset:
    """Loads one split of a prepared TFDS translation dataset as pairs.

    Args:
        name: TFDS name with its language-pair config, e.g.
            "wmt14_translate/de-en" or "wmt14_translate/fr-en". Either
            direction of the pair can be read.
        split: "train", "dev" or "test".
        src_lang: language of the source side, e.g. "en".
        tgt_lang: language of the target side, e.g. "de".
        data_dir: the TFDS data directory holding the prepared data;
            `None` means TFDS's default (`$TFDS_DATA_DIR` or
            `~/tensorflow_datasets`).

    Returns:
        A `tf.data.Dataset` of `(source, target)` scalar `tf.string` pairs,
        in the stored order.

    Raises:
        ValueError: if `name` is not a TFDS dataset or config, `split` is
            unknown, a language is not in the dataset's pair, or the
            prepared metadata cannot be read.
        MissingTfdsSplitError: (a FileNotFoundError and a ValueError) if
            the prepared dataset lacks the split.
        FileNotFoundError: if the data has not been prepared in `data_dir`
            (the message gives the command that prepares it), or a file of
            the split is missing. A file damaged otherwise fails when read:
            see `read_errors`.
    """
    if split not in TFDS_SPLITS:
        raise ValueError(
            f"`split` must be one of {sorted(TFDS_SPLITS)}. "
            f"Received: split={split}"
        )
    try:
        builder = tfds.builder(name, data_dir=data_dir)
    except tfds.core.DatasetNotFoundError:
        # TFDS's own message lists all of its ~450 datasets.
        raise ValueError(
            f"Unknown TFDS dataset '{name}'; use a translation dataset such "
            "as wmt14_translate/de-en or wmt14_translate/fr-en. "
            f"Received: name={name}"
        ) from None
    except ValueError as error:
        # TFDS's message for an unknown config lists no config.
        dataset, _, config = name.partition("/")
        configs = [c.name for c in tfds.builder_cls(dataset).BUILDER_CONFIGS]
        if not config or config in configs:
            raise  # TFDS's own one-line message (e.g. an unknown version).
        if not configs:
            raise ValueError(
                f"{dataset} has no configs, so it is no translation dataset "
                "of language pairs; use one such as wmt14_translate/de-en. "
                f"Received: name={name}"
            ) from error
        raise ValueError(
            f"{dataset} has no config '{config}'; pick one of {configs} "
            f"(the language pair). Received: name={name}"
        ) from error
    except Exception as error:
        # A damaged dataset_info.json fails in TFDS's own assertions or its
        # JSON parser; an unknown version fails alike.
        raise _damaged(name, data_dir, error) from error
    languages = getattr(builder.info.features, "languages", None)
    if languages is None:
        raise ValueError(
            f"{name} is not a translation dataset (its features are not a "
            "tfds.features.Translation of a language pair); use one such as "
            f"wmt14_translate/de-en. Received: name={name}"
        )
    languages = list(languages)
    for arg, lang in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
        if lang not in languages:
            raise ValueError(
                f"`{arg}` must be one of the languages of {name}, "
                f"{languages}; pick the TFDS config of your language pair. "
                f"Received: {arg}={lang}"
            )
    if src_lang == tgt_lang:
        raise ValueError(
            "`src_lang` and `tgt_lang` must differ. "
            f"Received: src_lang={src_lang}, tgt_lang={tgt_lang}"
        )
    tfds_split = TFDS_SPLITS[split]
    if builder.is_prepared() and tfds_split not in builder.info.splits:
        raise MissingTfdsSplitError(
            f"The TFDS dataset {name} in {builder.data_dir_root} has no "
            f"{tfds_split!r} split (the {split} split); it has "
            f"{sorted(builder.info.splits)}. Prepare the dataset with it. "
            f"Received: name={name}, split={split}, data_dir={data_dir}"
        )
    try:
        examples = builder.as_dataset(split=tfds_split, shuffle_files=False)
    except (AssertionError, KeyError) as error:
        # TFDS signals "not prepared" with an AssertionError, or a KeyError
        # when the version folder exists without its dataset_info.json.
        root = str(builder.data_dir_root)
        partial = ""
        if tf.io.gfile.isdir(builder.data_dir):
            partial = (
                f" (its folder {builder.data_dir} exists without the "
                "dataset_info.json that preparation writes last: an "
                "interrupted preparation or copy)"
            )
        raise FileNotFoundError(
            f"The TFDS dataset {name} is not prepared in {root}{partial}, and "
            "nothing is downloaded at run time. "
            "On a machine with internet run\n"
            f"  tfds build {name} --data_dir={root}\n"
            f'or tfds.builder("{name}", data_dir="{root}")'
            ".download_and_prepare(), then copy that folder here and pass it "
            f"as data_dir. Received: name={name}, data_dir={data_dir}"
        ) from error
    if builder.is_prepared():
        # Checked now: TensorFlow would otherwise fail at the missing file
        # while reading, in the middle of a run.
        paths = [
            str(path) for path in builder.info.splits[tfds_split].filepaths
        ]
        missing = [path for path in paths if not tf.io.gfile.exists(path)]
        if missing:
            raise FileNotFoundError(
                f"The TFDS dataset {name} in {builder.data_dir_root} is "
                f"incomplete: {len(missing)} of the {len(paths)} files of its "
                f"{tfds_split!r} split are missing, e.g. {missing[0]} (an "
                "interrupted copy?). Copy or prepare the dataset again. "
                f"Received: name={name}, split={split}, data_dir={data_dir}"
            )
    return examples.map(
        lambda example: (example[src_lang], example[tgt_lang]),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


@contextlib.contextmanager
def read_errors(name: str, split: str, data_dir: str | None = None):
    """Raises TensorFlow's error for a damaged file of a prepared split,
    met while the block reads the split, as a one-line ValueError that
    names the damaged files and says to copy or prepare the data again.

    A file cut in the middle of a record fails as a `DataLossError`, a
    vanished one as a `NotFoundError`, and one cut at a record boundary as
    the `FailedPreconditionError` of TFDS's check of the split's length.

    Raises:
        ValueError: for a `tf.errors.DataLossError`, `NotFoundError` or
            `FailedPreconditionError`.
    """
    try:
        yield
    except (
        tf.errors.DataLossError,
        tf.errors.NotFoundError,
        tf.errors.FailedPreconditionError,
    ) as error:
        # The reason, without the function and op names around it.
        reason = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", error.message)
        reason = re.sub(r"\s*\[Op:\w+\].*$", "", reason, flags=re.DOTALL)
        damaged = _damaged_files(name, split, data_dir)
        found = f" Damaged: {'; '.join(damaged)}." if damaged else ""
        raise ValueError(
            f"Reading the {split} split of the TFDS dataset {name} in "
            f"{data_root(data_dir)} failed: {reason.strip().rstrip('.')}."
            f"{found} Its prepared files are damaged or incomplete (an "
            "interrupted preparation or copy?): copy or prepare the dataset "
            f"again. Received: name={name}, split={split}, data_dir={data_dir}"
        ) from None


def _damaged_files(
    name: str, split: str, data_dir: str | None = None
) -> list[str]:
    """The files of a prepared split that cannot be read whole or hold
    another number of examples than its metadata records, each with what
    is wrong ("PATH (3 of its 5 examples)"); [] if none is, or if the
    metadata cannot say (then the caller's error stands alone).

    Every file is read (records only, not parsed): called after reading
    failed, to name the file.
    """
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        info = builder.info.splits[TFDS_SPLITS[split]]
        paths = [str(path) for path in info.filepaths]
        lengths = list(info.shard_lengths)
    except Exception:  # The metadata's own errors are raised elsewhere.
        return []
    damaged = []
    for path, expected in zip(paths, lengths):
        records = tf.data.TFRecordDataset(path)
        try:
            count = int(
                records.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
            )
        except tf.errors.NotFoundError:
            damaged.append(f"{path} (missing)")
            continue
        except tf.errors.DataLossError:
            damaged.append(f"{path} (a record cut short or damaged)")
            continue
        if count != expected:
            damaged.append(f"{path} ({count} of its {expected} examples)")
    return damaged


def _damaged(name, data_dir, error):
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return ValueError(
        f"The TFDS dataset {name} in {data_root(data_dir)} cannot be loaded: "
        f"{reason} If that is not the name's fault (e.g. its version), its "
        "metadata (dataset_info.json, features.json) is damaged, as an "
        "interrupted preparation or copy leaves it: copy or prepare the "
        f"dataset again. Received: name={name}, data_dir={data_dir}"
    )
