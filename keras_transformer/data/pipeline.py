"""From a `--data` spec to token batches in one call, with counted filtering.

Shapes: N examples, S source length, T target length.
"""

import dataclasses
import itertools
import json
import os

import numpy as np
import tensorflow as tf
from absl import logging

from keras_transformer.data import batching, sources
from keras_transformer.data import tokenizer as tokenizer_lib

# Dropped pairs that `DataStats` names (by number) of each kind.
SHOWN_DROPS = 5


@dataclasses.dataclass(frozen=True)
class DataStats:
    """What happened to one split on its way to batches.

    Args:
        num_pairs: sentence pairs read.
        dropped_empty: pairs dropped because a side has no tokens.
        dropped_overlong: pairs dropped because a side is longer than
            `max_length` once EOS (or BOS) is added.
        num_examples: pairs kept.
        source_tokens: subword tokens of the kept sources (no specials).
        target_tokens: subword tokens of the kept targets (no specials).
        num_batches: batches in one epoch, or None when not measured; under
            a strategy, the replicas' batches (of `batch_tokens / replicas`
            tokens) over the whole split.
        padding_efficiency: real tokens / padded positions of those batches
            (with the rows of padding that fill each bucket's last batch in
            a repeated dataset, as training reads it), or None when not
            measured.
        steps_per_epoch: training steps in one epoch (`num_batches` over
            the replicas and the batches each accumulates in a step), or
            None when not measured.
        empty_pairs: the numbers (from 1, in corpus order: the line of a
            text or TSV corpus) of the first `SHOWN_DROPS` pairs dropped
            with an empty side.
        overlong_pairs: those of the first pairs dropped as too long.
    """

    num_pairs: int
    dropped_empty: int
    dropped_overlong: int
    num_examples: int
    source_tokens: int
    target_tokens: int
    num_batches: int | None = None
    padding_efficiency: float | None = None
    steps_per_epoch: float | None = None
    empty_pairs: tuple[int, ...] = ()
    overlong_pairs: tuple[int, ...] = ()

    def describe(self) -> str:
        """One line for people: what was read, dropped (and where: the first
        pair numbers, the lines of a text corpus) and kept."""

        def where(count, numbers):
            if not numbers:
                return ""
            more = ", ..." if count > len(numbers) else ""
            noun = "pair" if count == 1 else "pairs"
            return f" ({noun} {', '.join(map(str, numbers))}{more})"

        line = (
            f"{self.num_pairs} pairs read, {self.num_examples} kept "
            f"({self.dropped_empty} dropped with an empty side"
            f"{where(self.dropped_empty, self.empty_pairs)}, "
            f"{self.dropped_overlong} longer than max_length"
            f"{where(self.dropped_overlong, self.overlong_pairs)}); "
            f"{self.source_tokens} source + {self.target_tokens} target tokens"
        )
        if self.padding_efficiency is not None:
            line += f"; {self.num_batches} batches per epoch"
            if self.steps_per_epoch not in (None, self.num_batches):
                line += f" ({self.steps_per_epoch:.1f} steps)"
            line += f", padding efficiency {self.padding_efficiency:.1%}"
        return line


def tokenize_pairs(
    pairs: tf.data.Dataset,
    tokenizer: tokenizer_lib.SubwordTokenizer,
    batch_size: int = 1024,
) -> tuple[tf.RaggedTensor, tf.RaggedTensor]:
    """Tokenizes a whole corpus of `(source, target)` strings in the graph.

    Args:
        pairs: dataset of scalar `tf.string` pairs.
        tokenizer: the shared subword tokenizer.
        batch_size: sentences tokenized per call.

    Returns:
        `(source_ids, target_ids)`, int32 ragged [N, (S)] and [N, (T)].
    """
    tokenized = pairs.batch(batch_size).map(
        lambda source, target: (
            tokenizer.tokenize(source),
            tokenizer.tokenize(target),
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    # Collect NumPy pieces: one concatenation at the end is much faster
    # than growing ragged tensors batch by batch.
    values = ([], [])
    lengths = ([], [])
    for batch in tokenized.prefetch(tf.data.AUTOTUNE):
        for side, ids in enumerate(batch):
            values[side].append(ids.flat_values.numpy())
            lengths[side].append(ids.row_lengths().numpy())
    return tuple(
        tf.RaggedTensor.from_row_lengths(
            _concatenate(values[side], np.int32),
            _concatenate(lengths[side], np.int64),
        )
        for side in (0, 1)
    )


def _concatenate(arrays, dtype):
    return (
        np.concatenate(arrays).astype(dtype) if arrays else np.zeros([0], dtype)
    )


def filter_by_length(
    source_ids: tf.RaggedTensor,
    target_ids: tf.RaggedTensor,
    max_length: int,
) -> tuple[tf.RaggedTensor, tf.RaggedTensor, DataStats]:
    """Drops pairs with an empty side or a side too long, and counts them.

    Args:
        source_ids: int32 ragged [N, (S)] source ids without specials.
        target_ids: int32 ragged [N, (T)] target ids without specials.
        max_length: the longest model sequence, EOS (or BOS) included, so
            sides of at most `max_length - 1` tokens are kept.

    Returns:
        The kept `(source_ids, target_ids)` in order, and the counts.
    """
    source_lengths = source_ids.row_lengths().numpy()
    target_lengths = target_ids.row_lengths().numpy()
    empty = (source_lengths == 0) | (target_lengths == 0)
    overlong = ~empty & (
        np.maximum(source_lengths, target_lengths) + 1 > max_length
    )
    keep = np.flatnonzero(~empty & ~overlong)
    stats = DataStats(
        num_pairs=len(source_lengths),
        dropped_empty=int(empty.sum()),
        dropped_overlong=int(overlong.sum()),
        num_examples=len(keep),
        source_tokens=int(source_lengths[keep].sum()),
        target_tokens=int(target_lengths[keep].sum()),
        empty_pairs=_first_numbers(empty),
        overlong_pairs=_first_numbers(overlong),
    )
    return tf.gather(source_ids, keep), tf.gather(target_ids, keep), stats


def _first_numbers(dropped):
    """The 1-based numbers of the first `SHOWN_DROPS` True rows."""
    return tuple(int(row) + 1 for row in np.flatnonzero(dropped)[:SHOWN_DROPS])


@dataclasses.dataclass(frozen=True)
class TrainingBatches:
    """A split held in memory and how training batches it: the dataset of
    the batches from any step on (see `load_training_batches`).

    Attributes:
        examples: the kept pairs, as token ids.
        stats: the `DataStats` of the split.
        batch_tokens: tokens per batch and side (the global budget with a
            `strategy`).
        batch_kwargs: the other arguments of `batching.token_batches`
            (`max_length`, `shuffle`, `seed`, `deterministic`).
        repeat: whether the batches repeat forever.
        strategy: the `tf.distribute` strategy whose replicas take the
            batches, or None.
        batches_per_step: batches per training step (gradient
            accumulation), grouped by `batching.group_batches` when above 1.
    """

    examples: batching.PairsInMemory
    stats: DataStats
    batch_tokens: int
    batch_kwargs: dict
    repeat: bool
    strategy: tf.distribute.Strategy | None
    batches_per_step: int

    def dataset(self, start_step: int = 0):
        """The batches of the steps from `start_step` on (a resumed run
        skips those of the steps before it, see `batching.token_batches`):
        grouped by `batching.group_batches` when `batches_per_step` > 1,
        and distributed (per-replica batches, one disjoint shard per input
        pipeline) with a `strategy`."""
        if self.strategy is not None:
            dataset_fn = batching.distributed_dataset_fn(
                self.examples,
                self.batch_tokens,
                start_step=start_step,
                num_examples=self.stats.num_examples,
                repeat=self.repeat,
                batches_per_step=self.batches_per_step,
                **self.batch_kwargs,
            )
            return self.strategy.distribute_datasets_from_function(dataset_fn)
        dataset = batching.token_batches(
            self.examples,
            self.batch_tokens,
            repeat=self.repeat,
            skip=start_step * self.batches_per_step,
            **self.batch_kwargs,
        )
        return batching.group_batches(dataset, self.batches_per_step)


def load_training_batches(
    spec: sources.DataSpec | str,
    tokenizer: tokenizer_lib.SubwordTokenizer,
    *,
    src_lang: str,
    tgt_lang: str,
    batch_tokens: int,
    max_length: int = batching.DEFAULT_MAX_LENGTH,
    split: str = "train",
    data_dir: str | None = None,
    shuffle: bool = True,
    seed: int | None = None,
    deterministic: bool = False,
    repeat: bool = False,
    strategy: tf.distribute.Strategy | None = None,
    measure_padding: bool = True,
    batches_per_step: int = 1,
) -> TrainingBatches:
    """Loads, tokenizes and filters (counted) one split, to be batched.

    The tokenized split is held in memory (int32 ids), which makes the
    filter counts exact and each epoch cheap; `TrainingBatches.dataset`
    then batches it from any step on.

    Args:
        spec: a `DataSpec` or `--data` string (see `sources.SPEC_FORMS`).
        tokenizer: the shared subword tokenizer.
        src_lang: source language code.
        tgt_lang: target language code.
        batch_tokens: token budget per step and per side; with `strategy`
            the global budget, split evenly over the replicas.
        max_length: the longest model sequence, EOS (or BOS) included.
        split: "train", "dev" or "test".
        data_dir: TFDS data directory (for "tfds" specs).
        shuffle: shuffle examples each epoch.
        seed: shuffle seed.
        deterministic: the same batches on every run.
        repeat: repeat forever (for `fit` with `steps_per_epoch`).
        strategy: if given, the datasets are its distributed datasets:
            per-replica batches, one disjoint shard per input pipeline.
        measure_padding: iterate one epoch to fill `num_batches` and
            `padding_efficiency` of the stats.
        batches_per_step: batches per training step (per replica with
            `strategy`), grouped by `batching.group_batches` when above 1
            (gradient accumulation); start steps count steps.

    Returns:
        The split's `TrainingBatches` (its stats are also logged).

    Raises:
        ValueError: if no pair survives the filters, plus the errors of
            `sources.load_split` and `batching.token_batches`.
    """
    pairs = sources.load_split(spec, split, src_lang, tgt_lang, data_dir)
    with sources.read_errors(spec, split, data_dir):
        tokenized = tokenize_pairs(pairs, tokenizer)
    source_ids, target_ids, stats = filter_by_length(*tokenized, max_length)
    if not stats.num_examples:
        raise ValueError(
            f"No pair of the {split} split is left after filtering "
            f"({stats.dropped_empty} with an empty side, "
            f"{stats.dropped_overlong} longer than max_length). Check the "
            f"data or raise max_length. Received: max_length={max_length}"
        )
    examples = batching.PairsInMemory(source_ids, target_ids)
    batch_kwargs = {
        "max_length": max_length,
        "shuffle": shuffle,
        "seed": seed,
        "deterministic": deterministic,
    }
    if measure_padding:
        # At each replica's budget (`batching.distributed_dataset_fn`).
        replicas = strategy.num_replicas_in_sync if strategy else 1
        replica_tokens = batch_tokens // replicas
        num_batches = batching.epoch_batch_count(
            examples, replica_tokens, max_length
        )
        # One epoch as training reads it: with `repeat`, each bucket's last
        # batch is filled up with rows of padding.
        epoch = batching.token_batches(
            examples, replica_tokens, repeat=repeat, **batch_kwargs
        ).take(num_batches)
        stats = dataclasses.replace(
            stats,
            num_batches=num_batches,
            padding_efficiency=batching.padding_efficiency(epoch),
            steps_per_epoch=num_batches / (replicas * batches_per_step),
        )
    # At once, not only in the run's summary at its end: a run stopped
    # early says too what it dropped, and an overlong corpus shows before
    # hours of training.
    dropped = stats.dropped_empty + stats.dropped_overlong
    log = logging.warning if dropped else logging.info
    log("Data %s, %s split: %s", spec, split, stats.describe())
    return TrainingBatches(
        examples=examples,
        stats=stats,
        batch_tokens=batch_tokens,
        batch_kwargs=batch_kwargs,
        repeat=repeat,
        strategy=strategy,
        batches_per_step=batches_per_step,
    )


def make_training_dataset(
    spec: sources.DataSpec | str,
    tokenizer: tokenizer_lib.SubwordTokenizer,
    *,
    start_step: int = 0,
    **kwargs,
) -> tuple[tf.data.Dataset, DataStats]:
    """Loads, tokenizes, filters (counted) and batches one split.

    Args:
        spec, tokenizer, kwargs: as for `load_training_batches`.
        start_step: the step a resumed run starts at: the batches of the
            steps before it are skipped (see `batching.token_batches`).

    Returns:
        `(dataset, stats)`: `TrainingBatches.dataset(start_step)` and the
        `DataStats` of the split.
    """
    batches = load_training_batches(spec, tokenizer, **kwargs)
    return batches.dataset(start_step), batches.stats


def make_eval_dataset(
    spec: sources.DataSpec | str,
    tokenizer: tokenizer_lib.SubwordTokenizer,
    *,
    src_lang: str,
    tgt_lang: str,
    batch_tokens: int,
    max_length: int = batching.DEFAULT_MAX_LENGTH,
    split: str = "dev",
    data_dir: str | None = None,
) -> tuple[tf.data.Dataset, DataStats]:
    """`make_training_dataset` for loss evaluation: fixed order, one epoch.

    BLEU needs every sentence, unfiltered: use `sources.load_pairs` for it.
    """
    return make_training_dataset(
        spec,
        tokenizer,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        batch_tokens=batch_tokens,
        max_length=max_length,
        split=split,
        data_dir=data_dir,
        shuffle=False,
        deterministic=True,
    )


def _corpus_record(spec: sources.DataSpec, languages: list[str]) -> dict:
    """What a vocabulary records of its corpus, in JSON's form (lists for
    tuples), to compare with a record read back."""
    # Both sides make one shared vocabulary: the pair's direction does not
    # matter.
    record = {"data": dataclasses.asdict(spec), "languages": sorted(languages)}
    return json.loads(json.dumps(record))


def _absolute_record(record: dict) -> dict:
    """`record` with the paths of its corpus absolute (an older record may
    hold relative ones: resolved from the working directory, as
    `absolute_data_spec` does), or as it is if it is not a record."""
    try:
        data = record["data"]
        spec = sources.DataSpec(
            data["kind"], data["location"], tuple(map(tuple, data["splits"]))
        )
        return _corpus_record(
            sources.absolute_data_spec(spec), record["languages"]
        )
    except (KeyError, TypeError, ValueError):
        return record  # Unequal to any corpus: reported as another one.


def _train_files_state(spec, src_lang, tgt_lang) -> dict:
    """{path: [size, mtime_ns]} of the train split's files (none for the
    demo and TFDS corpora, which are not edited in place)."""
    state = {}
    for path in sources.split_files(spec, "train", src_lang, tgt_lang):
        # A missing file is left to the reader, whose error names the fix.
        if tf.io.gfile.exists(path):
            stat = tf.io.gfile.stat(path)
            state[path] = [stat.length, stat.mtime_nsec]
    return state


def load_or_train_tokenizer(
    spec: sources.DataSpec | str,
    model_path: str,
    *,
    src_lang: str,
    tgt_lang: str,
    vocab_size: int | None = None,
    data_dir: str | None = None,
    relearn_if_changed: bool = False,
) -> tokenizer_lib.SubwordTokenizer:
    """Loads `model_path`, or learns it from both sides of the train split.

    A learned vocabulary records its corpus (its paths absolute, see
    `sources.absolute_data_spec`) in `PREFIX.data.json`; loading
    it for another corpus or language pair (in either direction) fails; a
    vocabulary without that record, e.g. one made elsewhere, loads for any.
    The record also holds the size and modification time of the train
    split's files: when they changed since (the corpus was edited in
    place), the vocabulary is learned again if `relearn_if_changed`, else
    kept with a warning; so is one of another size than `vocab_size`
    (kept without a warning: the caller refuses the size).

    Args:
        spec: a `DataSpec` or `--data` string.
        model_path: the sentencepiece model file, ending in ".model",
            usually beside the model checkpoints.
        src_lang: source language code.
        tgt_lang: target language code.
        vocab_size: pieces to learn; defaults to the paper's size for the
            pair, or the demo corpus's (`sources.default_vocab_size`).
        data_dir: TFDS data directory (for "tfds" specs).
        relearn_if_changed: whether a vocabulary whose train files changed,
            or whose size is not a given `vocab_size`, is learned again
            (with its size, unless `vocab_size` is given): true when no
            model was trained with it yet.

    Returns:
        The `SubwordTokenizer`.

    Raises:
        ValueError: if `model_path` does not end in ".model" or was learned
            from another corpus, plus the errors of `sources.load_pairs`
            and `train_subword_vocab`.
    """
    prefix, extension = os.path.splitext(model_path)
    # Absolute paths: the corpus, wherever the run is started from.
    spec = sources.absolute_data_spec(spec)
    corpus = _corpus_record(spec, [src_lang, tgt_lang])
    record_path = prefix + ".data.json"
    files = _train_files_state(spec, src_lang, tgt_lang)
    if tf.io.gfile.exists(model_path):
        learned_files = files  # A record of an older version has none.
        if tf.io.gfile.exists(record_path):
            with tf.io.gfile.GFile(record_path) as f:
                record = json.load(f)
            learned_from = _absolute_record(record)
            learned_files = record.get("train_files", files)
            if learned_from != corpus:
                raise ValueError(
                    f"{model_path} was learned from another corpus "
                    f"({learned_from}) than this one ({corpus}), e.g. by a "
                    "run that failed before training. Delete "
                    f"{prefix}.model, .vocab and .data.json to learn a new "
                    "vocabulary, or use another directory. "
                    f"Received: model_path={model_path}"
                )
        tokenizer = tokenizer_lib.SubwordTokenizer.from_file(model_path)
        changes = []
        if learned_files != files:
            changes.append("the train files changed since it was learned")
        if vocab_size is not None and tokenizer.vocab_size != vocab_size:
            changes.append(
                f"it has {tokenizer.vocab_size} pieces, not {vocab_size}"
            )
        if not changes:
            return tokenizer
        if not relearn_if_changed:
            # A size that differs is the caller's to refuse.
            if learned_files != files:
                logging.warning(
                    "The train files changed since %s was learned from them; "
                    "the run keeps the vocabulary its model was trained with.",
                    model_path,
                )
            return tokenizer
        logging.info(
            "%s: %s, and no model was trained with it yet: learning it again.",
            model_path,
            " and ".join(changes),
        )
        vocab_size = vocab_size or tokenizer.vocab_size
    if extension != ".model":
        raise ValueError(
            "`model_path` must end in .model (sentencepiece writes "
            f"PREFIX.model and PREFIX.vocab). Received: model_path={model_path}"
        )
    if vocab_size is None:
        vocab_size = sources.default_vocab_size(src_lang, tgt_lang, spec)
    pairs = sources.load_split(spec, "train", src_lang, tgt_lang, data_dir)

    def side(index):
        # Streamed: TFDS splits (WMT14 en-fr has 36M pairs) never sit in
        # memory as Python strings; `train_subword_vocab` keeps a sample.
        with sources.read_errors(spec, "train", data_dir):
            for pair in pairs.as_numpy_iterator():
                yield pair[index].decode("utf-8")

    # Before the vocabulary: a process killed in between leaves no
    # vocabulary without its record.
    tf.io.gfile.makedirs(os.path.dirname(model_path) or ".")
    with tf.io.gfile.GFile(record_path, "w") as f:
        json.dump(dict(corpus, train_files=files), f, indent=2, sort_keys=True)
    path = tokenizer_lib.train_subword_vocab(
        itertools.chain(side(0), side(1)), vocab_size, prefix
    )
    return tokenizer_lib.SubwordTokenizer.from_file(path)
