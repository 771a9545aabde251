"""Token-count batching (section 5.1): length buckets under a token budget.

Shapes: B batch, S source length, T target length.
"""

import random

import numpy as np
import tensorflow as tf

from keras_transformer import tokens
from keras_transformer.checks import is_integer

# The longest model sequence unless told otherwise (EOS or BOS included).
DEFAULT_MAX_LENGTH = 256
# Epoch e of a run with shuffle seed s shuffles with seed s * stride + e,
# modulo 2**63: an int64 seed for every int64 s (the stride is odd, so no
# two seeds share the seed of epoch 0).
_EPOCH_STRIDE = 1_000_003
_SEED_RANGE = 2**63


class PairsInMemory:
    """Tokenized pairs held in memory, which `token_batches` shuffles
    completely each epoch.

    `token_batches`, `epoch_batch_count` and `distributed_dataset_fn` take
    them in place of a dataset of pairs. Each epoch is then a seeded
    permutation of all the rows (`tf.random.experimental.index_shuffle`,
    which buffers nothing), where a dataset is shuffled through a buffer of
    `shuffle_buffer` pairs: with more pairs than that, a corpus stays near
    its file order (the sources of a concatenated corpus in long runs).

    Args:
        source_ids: int32 ragged [N, (S)] source ids without specials.
        target_ids: int32 ragged [N, (T)] target ids without specials.
        rows: int64 [M], the rows of the ids that are the pairs (a shard's),
            or None for all N.
    """

    def __init__(
        self,
        source_ids: tf.RaggedTensor,
        target_ids: tf.RaggedTensor,
        rows: tf.Tensor | None = None,
    ):
        for arg, ids in (
            ("source_ids", source_ids),
            ("target_ids", target_ids),
        ):
            if not isinstance(ids, tf.RaggedTensor):
                # A dense [N, L] array would be read with its padding.
                raise TypeError(
                    f"`{arg}` must be a tf.RaggedTensor of each pair's ids "
                    "without padding or specials (e.g. tf.ragged.constant, or "
                    "tf.RaggedTensor.from_tensor(ids, padding=0)). Received: "
                    f"{arg} of type {type(ids).__name__}"
                )
        self.source_ids = source_ids
        self.target_ids = target_ids
        self.rows = tf.range(source_ids.nrows()) if rows is None else rows

    @property
    def num_pairs(self) -> int:
        return int(self.rows.shape[0])

    def shard(self, num_shards: int, index: int) -> "PairsInMemory":
        """Pairs `index`, `index + num_shards`, ... (as `Dataset.shard`);
        they share the ids (8 bytes per pair of row numbers)."""
        return PairsInMemory(
            self.source_ids, self.target_ids, self.rows[index::num_shards]
        )

    def lengths(self) -> np.ndarray:
        """int64 [M]: each pair's longer side, in tokens without specials."""
        return np.maximum(
            tf.gather(self.source_ids.row_lengths(), self.rows).numpy(),
            tf.gather(self.target_ids.row_lengths(), self.rows).numpy(),
        )

    def dataset(self, seed=None) -> tf.data.Dataset:
        """The pairs as a dataset of int32 [S] and [T] rows: in order, or
        in the permutation of `seed` (an int64 scalar, may be a tensor).

        Not `from_tensor_slices` of the ragged tensors, which holds each
        row of each side as a variant of ~240 bytes besides its ids: nearly
        3x the memory of WMT14 en-de's ids, ~17 GB more for en-fr's 36 M
        pairs. Rows are gathered 1024 at a time and then unbatched: one
        slice per pair instead ran 1.7-2.7x slower through token batching.
        """
        count = self.num_pairs
        positions = tf.data.Dataset.range(count).batch(1024)
        if seed is not None:
            seed_pair = tf.stack(
                [tf.cast(seed, tf.int64), tf.constant(0, tf.int64)]
            )
            positions = positions.map(
                lambda batch: tf.random.experimental.index_shuffle(
                    batch, seed_pair, count - 1
                )
            )

        def gather(batch):
            rows = tf.gather(self.rows, batch)
            return tf.gather(self.source_ids, rows), tf.gather(
                self.target_ids, rows
            )

        return positions.map(
            gather, num_parallel_calls=tf.data.AUTOTUNE
        ).unbatch()


def bucket_lengths(
    max_length: int, min_length: int = 8, growth: float = 1.1
) -> list[int]:
    """Padded lengths of the buckets: geometric steps up to `max_length`.

    Args:
        max_length: the last (longest) bucket length.
        min_length: the first bucket length.
        growth: ratio between neighbouring lengths (at least +1).

    Returns:
        Increasing lengths ending with `max_length`.
    """
    lengths = []
    length = min(min_length, max_length)
    while length < max_length:
        lengths.append(length)
        length = max(length + 1, int(length * growth))
    return lengths + [max_length]


def token_batches(
    examples: tf.data.Dataset,
    batch_tokens: int,
    max_length: int = DEFAULT_MAX_LENGTH,
    *,
    shuffle: bool = True,
    seed: int | None = None,
    deterministic: bool = False,
    shuffle_buffer: int = 100_000,
    repeat: bool = False,
    skip: int = 0,
) -> tf.data.Dataset:
    """Batches examples by token count, as the paper does (section 5.1).

    Each example gets EOS appended to the source, BOS prepended to the
    target input, EOS appended to the labels. Examples are bucketed by
    their longest sequence; a bucket of padded length P takes
    `batch_tokens // P` examples and pads them to P, so no batch holds more
    than `batch_tokens` source or target positions (padding included).
    Every example comes out exactly once per epoch (the last batch of a
    bucket may be smaller), so an epoch has `epoch_batch_count` batches
    whatever the order. With `repeat`, that last batch of each bucket is
    filled up with rows of padding alone (no loss or metric counts them):
    all batches of a bucket then have one shape, so an XLA-compiled
    training step compiles once per bucket, not again for its last batch.

    Examples longer than `max_length` are not dropped here (that would be
    silent): filter them first and count them, as
    `pipeline.filter_by_length` does; an overlong example raises
    `tf.errors.InvalidArgumentError` while iterating.

    Args:
        examples: `PairsInMemory` (shuffled completely), or a dataset of
            `(source_ids, target_ids)` int32 [S] and [T] token ids without
            specials (shuffled through a buffer of `shuffle_buffer`).
        batch_tokens: token budget per batch and per side.
        max_length: the longest model sequence, counting the added EOS
            (or BOS); also the longest bucket.
        shuffle: shuffle examples before bucketing, each epoch in another
            order.
        seed: shuffle seed, from 0 to 2**63 - 1; `None` draws one unless
            `deterministic`.
        deterministic: same batches in the same order on every run (seed 0
            when `seed` is None, deterministic tf.data ordering).
        shuffle_buffer: examples held by the shuffle buffer of a dataset.
        repeat: repeat forever (each epoch reshuffled) instead of one epoch.
            Without it, each pass over the dataset is shuffled anew, in a
            sequence of orders set by `seed` and TensorFlow's global seed
            (`keras.utils.set_random_seed`).
        skip: batches left out at the start: those a resumed run has
            trained on, so that (with `deterministic`) it goes on with the
            batches an uninterrupted run would see next. Whole epochs are
            skipped without being read.

    Returns:
        A dataset of `({"source_ids": int32 [B, S], "target_ids": int32
        [B, T]}, labels int32 [B, T])`, S = T = the bucket length, 0 padding,
        prefetched.

    Raises:
        TypeError: if `examples` is not pairs of integer id vectors.
        ValueError: if `max_length` < 2, `batch_tokens` < `max_length`,
            `seed` is not an int64 seed >= 0, or `skip` reaches past the one
            epoch of `repeat=False`.
        tf.errors.InvalidArgumentError: while iterating, for an example
            longer than `max_length` or holding padding, BOS or EOS ids.
    """
    if not is_integer(max_length) or max_length < 2:
        raise ValueError(
            "`max_length` must be an integer >= 2 (one token and EOS). "
            f"Received: max_length={max_length}"
        )
    if not is_integer(batch_tokens) or batch_tokens < max_length:
        raise ValueError(
            "`batch_tokens` must be an integer >= `max_length` so that a "
            "longest example fits in a batch; raise batch_tokens or lower "
            f"max_length. Received: batch_tokens={batch_tokens}, "
            f"max_length={max_length}"
        )
    if seed is not None and (
        not is_integer(seed) or not 0 <= seed < _SEED_RANGE
    ):
        raise ValueError(
            "`seed` must be an integer from 0 to 2**63 - 1 (an int64 seed), "
            f"or None. Received: seed={seed!r}"
        )
    max_length, batch_tokens = int(max_length), int(batch_tokens)
    if seed is None:
        seed = 0 if deterministic else random.randrange(2**31)
    # A Python int: numpy's would overflow in `seed * _EPOCH_STRIDE`.
    seed = int(seed)
    lengths = bucket_lengths(max_length)

    def with_specials(dataset):
        return dataset.map(
            lambda source, target: _add_specials(source, target, max_length),
            num_parallel_calls=tf.data.AUTOTUNE,
        )

    in_memory = isinstance(examples, PairsInMemory)
    if not in_memory:
        _check_pairs_of_ids(examples)
        dataset_with_specials = with_specials(examples)

    def epoch_batches(shuffle_seed):
        if in_memory:
            dataset = with_specials(
                examples.dataset(shuffle_seed if shuffle else None)
            )
        else:
            dataset = dataset_with_specials
            if shuffle:
                # This function's graph drops the global seed, with which
                # (when it is 0) TensorFlow cannot combine a tensor seed;
                # the order depends on `shuffle_seed` alone.
                tf.random.set_seed(None)
                dataset = dataset.shuffle(shuffle_buffer, seed=shuffle_seed)
        return dataset.bucket_by_sequence_length(
            element_length_func=_example_length,
            # Bucket i holds lengths in [lengths[i-1] + 1, lengths[i]].
            bucket_boundaries=[length + 1 for length in lengths],
            # The last, open-ended bucket is unused: lengths <= max_length.
            bucket_batch_sizes=[batch_tokens // length for length in lengths]
            + [1],
            pad_to_bucket_boundary=True,
            padding_values=tokens.PAD_ID,
        )

    first_epoch, skip_in_epoch = 0, skip
    if skip:
        per_epoch = epoch_batch_count(examples, batch_tokens, max_length)
        first_epoch, skip_in_epoch = divmod(skip, per_epoch)
        if first_epoch and not repeat:
            raise ValueError(
                f"`skip` is more batches than the {per_epoch} of the one "
                f"epoch of `repeat=False`. Received: skip={skip}"
            )
    if repeat:
        # A seed per epoch, from `seed` and the epoch's number alone (not a
        # reshuffling generator's state): epoch k needs no pass over the
        # epochs before it. Summed in uint64, where two int64s cannot
        # overflow.
        start = tf.constant(seed * _EPOCH_STRIDE % _SEED_RANGE, tf.uint64)
        epoch_seeds = tf.data.Dataset.counter(first_epoch).map(
            lambda epoch: tf.cast(
                (start + tf.cast(epoch, tf.uint64)) % _SEED_RANGE, tf.int64
            )
        )
    else:
        # Another order each time the dataset is iterated (each epoch of
        # `fit`), the same sequence of orders on every run.
        epoch_seeds = tf.data.Dataset.random(
            seed=seed, rerandomize_each_iteration=True
        ).take(1)
    # `epoch_batches` runs traced, never eagerly (it drops the seed).
    dataset = (
        epoch_seeds.flat_map(epoch_batches)
        .skip(skip_in_epoch)
        .map(
            lambda *batch: _to_features_and_labels(
                *(_fill(batch, batch_tokens) if repeat else batch)
            )
        )
    )
    options = tf.data.Options()
    options.deterministic = deterministic
    return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def epoch_batch_count(
    examples: tf.data.Dataset,
    batch_tokens: int,
    max_length: int = DEFAULT_MAX_LENGTH,
) -> int:
    """Batches in one epoch of `token_batches(examples, ...)`, in any order.

    Counted from the examples' lengths alone (their buckets' sizes), so
    without batching anything.

    Args:
        examples: `PairsInMemory` or a dataset of pairs, as `token_batches`.
        batch_tokens: token budget per batch and per side.
        max_length: the longest model sequence, as in `token_batches`.

    Returns:
        The number of batches.
    """
    lengths = np.array(bucket_lengths(max_length))
    # Longest side plus EOS (or BOS), as `_example_length` sees it.
    if isinstance(examples, PairsInMemory):
        example_lengths = examples.lengths() + 1
    else:
        example_lengths = np.concatenate(
            [
                chunk
                for chunk in examples.map(
                    lambda source, target: (
                        tf.maximum(tf.size(source), tf.size(target)) + 1
                    )
                )
                .batch(1 << 20)
                .as_numpy_iterator()
            ]
            or [np.zeros([0], np.int32)]
        )
    counts = np.bincount(
        np.searchsorted(lengths, example_lengths), minlength=len(lengths) + 1
    )[: len(lengths)]
    sizes = batch_tokens // lengths
    return int(np.sum(-(-counts // sizes)))


def _check_pairs_of_ids(examples):
    """Raises a TypeError naming the element structure unless `examples`
    is a dataset of `(source_ids, target_ids)` integer vectors, rather than
    an error from inside the traced batching functions."""
    spec = getattr(examples, "element_spec", None)
    if not (
        isinstance(spec, tuple)
        and len(spec) == 2
        and all(
            getattr(side, "dtype", tf.string).is_integer
            and getattr(side, "shape", tf.TensorShape(None)).rank in (None, 1)
            for side in spec
        )
    ):
        raise TypeError(
            "`examples` must be a PairsInMemory or a tf.data.Dataset of "
            "(source_ids, target_ids) pairs of integer id vectors [S] and [T] "
            "(unpadded, without specials), e.g. from_tensor_slices of two "
            "ragged tensors. Received: a dataset of "
            f"{spec if spec is not None else type(examples).__name__}"
        )


def _add_specials(source, target, max_length):
    source = tf.cast(source, tf.int32)
    target = tf.cast(target, tf.int32)
    eos = tf.constant([tokens.EOS_ID], tf.int32)
    bos = tf.constant([tokens.BOS_ID], tf.int32)
    length = tf.maximum(tf.size(source), tf.size(target)) + 1
    check = tf.debugging.assert_less_equal(
        length,
        max_length,
        message=(
            "An example is longer than max_length (EOS included); filter "
            "overlong examples first with pipeline.filter_by_length, which "
            "counts them, or raise max_length."
        ),
    )
    # Padded rows (a NumPy array's) or ids with BOS/EOS would get EOS after
    # their padding: the model would learn to end sentences there.
    ids = tf.concat([source, target], 0)
    no_specials = tf.debugging.assert_equal(
        tf.reduce_all(
            (ids == tokens.UNK_ID) | (ids >= tokens.NUM_SPECIAL_TOKENS)
        ),
        True,
        message=(
            f"An example holds padding ({tokens.PAD_ID}), BOS "
            f"({tokens.BOS_ID}), EOS ({tokens.EOS_ID}) or a negative id; the "
            "examples are ids without specials, which token_batches pads and "
            "adds BOS and EOS to itself. Pass the ids of each sentence "
            "unpadded (e.g. tf.data.Dataset.from_tensor_slices of ragged "
            "tensors, or a PairsInMemory) and without BOS/EOS."
        ),
    )
    with tf.control_dependencies([check, no_specials]):
        source_ids = tf.concat([source, eos], 0)  # [S]
    target_ids = tf.concat([bos, target], 0)  # [T]
    labels = tf.concat([target, eos], 0)  # [T]
    return source_ids, target_ids, labels


def _example_length(source_ids, target_ids, labels):
    del labels  # Same length as target_ids.
    return tf.maximum(tf.shape(source_ids)[0], tf.shape(target_ids)[0])


def _fill(batch, batch_tokens):
    """`batch` ([B, P] tensors) with padding rows up to its bucket's size."""
    length = tf.shape(batch[0])[1]
    missing = batch_tokens // length - tf.shape(batch[0])[0]
    return [
        tf.pad(ids, [[0, missing], [0, 0]], constant_values=tokens.PAD_ID)
        for ids in batch
    ]


def _to_features_and_labels(source_ids, target_ids, labels):
    features = {"source_ids": source_ids, "target_ids": target_ids}
    return features, labels


def padding_efficiency(batches: tf.data.Dataset) -> float:
    """Real tokens / padded positions over source and target of all batches.

    Args:
        batches: a finite dataset from `token_batches`.

    Returns:
        A float in (0, 1]; 1 means no padding at all.

    Raises:
        ValueError: if the dataset has no tokens.
    """
    real = padded = 0
    for features, _ in batches.as_numpy_iterator():
        for name in ("source_ids", "target_ids"):
            ids = features[name]
            real += int((ids != tokens.PAD_ID).sum())
            padded += ids.size
    if not padded:
        raise ValueError(
            "`batches` holds no tokens, so it has no padding efficiency. "
            "Received: batches=<empty>"
        )
    return real / padded


def group_batches(
    batches: tf.data.Dataset, batches_per_step: int
) -> tf.data.Dataset:
    """Groups each `batches_per_step` consecutive batches into one element:
    the batches of one gradient-accumulating step
    (`training/accumulation.py`).

    Each tensor becomes a RaggedTensor [batches_per_step, (B), (T)] whose
    batches keep their own shapes (none is padded to the group's longest).
    A finite dataset's last group holds the batches that are left, so no
    batch is dropped.

    Args:
        batches: dataset of `token_batches` batches.
        batches_per_step: the accumulation's N (1: `batches` unchanged).

    Returns:
        The dataset of groups.
    """
    if batches_per_step == 1:
        return batches
    return batches.ragged_batch(batches_per_step).prefetch(tf.data.AUTOTUNE)


def distributed_dataset_fn(
    examples: tf.data.Dataset,
    batch_tokens: int,
    max_length: int = DEFAULT_MAX_LENGTH,
    start_step: int = 0,
    num_examples: int | None = None,
    batches_per_step: int = 1,
    **batch_kwargs,
):
    """Builds the `dataset_fn` of `strategy.distribute_datasets_from_function`.

    `batch_tokens` is the global budget of one training step: each replica
    gets batches of `batch_tokens // num_replicas_in_sync` tokens. With
    several input pipelines (workers), each reads its own disjoint shard
    of `examples` (`shard` by input pipeline id), shuffled within it.

    Args:
        examples: `PairsInMemory` or a dataset of pairs, as `token_batches`.
        batch_tokens: global token budget per step and per side.
        max_length: the longest model sequence, as in `token_batches`.
        start_step: steps already trained on (a resumed run's): each input
            pipeline skips the batches its replicas took in them.
        num_examples: the number of examples, if known: fewer than the
            input pipelines is an error (a pipeline would have none, and
            repeat forever over empty epochs).
        batches_per_step: batches of each replica per step, grouped by
            `group_batches` when above 1 (gradient accumulation).
        **batch_kwargs: other `token_batches` arguments (`shuffle`, `seed`,
            `deterministic`, `repeat`, ...).

    Returns:
        A function `tf.distribute.InputContext -> tf.data.Dataset`; it
        raises `ValueError` if the per-replica budget is below `max_length`.

    Example:

    >>> dataset = strategy.distribute_datasets_from_function(
    ...     distributed_dataset_fn(examples, batch_tokens=32768))
    """

    def dataset_fn(input_context: tf.distribute.InputContext):
        replicas = input_context.num_replicas_in_sync
        if batch_tokens // replicas < max_length:
            raise ValueError(
                "`batch_tokens` is the global budget per step; split over "
                f"{replicas} replicas it leaves {batch_tokens // replicas} "
                f"tokens, fewer than max_length={max_length}. Raise "
                f"batch_tokens. Received: batch_tokens={batch_tokens}"
            )
        pipelines = input_context.num_input_pipelines
        if num_examples is not None and num_examples < pipelines:
            raise ValueError(
                f"{num_examples} training pairs cannot be shared by "
                f"{pipelines} input pipelines (workers): each needs at least "
                "one. Use more data or fewer workers. Received: "
                f"num_examples={num_examples}"
            )
        shard = examples.shard(
            input_context.num_input_pipelines,
            input_context.input_pipeline_id,
        )
        # Each step takes `batches_per_step` batches per replica from its
        # pipeline.
        local_replicas = replicas // input_context.num_input_pipelines
        batches = token_batches(
            shard,
            batch_tokens // replicas,
            max_length,
            skip=start_step * local_replicas * batches_per_step,
            **batch_kwargs,
        )
        return group_batches(batches, batches_per_step)

    return dataset_fn
