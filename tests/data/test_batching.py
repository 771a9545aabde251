"""Tests of token-count batching, padding efficiency and input sharding."""

import itertools
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from keras_transformer import tokens
from keras_transformer.data import batching
from tests import test_case

_MAX_LENGTH = 40


def _examples(count=300, seed=0, max_tokens=_MAX_LENGTH - 1):
    """Examples whose first id is their index (ids >= 4, no specials)."""
    rng = np.random.default_rng(seed)
    sources, targets = [], []
    for index in range(count):
        source_length = int(rng.integers(1, max_tokens + 1))
        target_length = int(
            np.clip(source_length + rng.integers(-3, 4), 1, max_tokens)
        )
        sources.append(
            [index + 100] + list(rng.integers(4, 90, source_length - 1))
        )
        targets.append(list(rng.integers(4, 90, target_length)))
    return sources, targets


def _dataset(sources, targets):
    return tf.data.Dataset.from_tensor_slices(
        (
            tf.ragged.constant(sources, dtype=tf.int32),
            tf.ragged.constant(targets, dtype=tf.int32),
        )
    )


def _batches(dataset):
    return [
        (features["source_ids"], features["target_ids"], labels)
        for features, labels in dataset.as_numpy_iterator()
    ]


def _indices(batches):
    """Example indices, read back from the first source id (rows of
    padding alone, which fill up a bucket's last batch, have none)."""
    return [
        int(row[0]) - 100
        for source, _, _ in batches
        for row in source
        if row[0]
    ]


class TokenBatchesTest(test_case.TestCase):
    @parameterized.parameters(40, 100, 333, 1000)
    def test_budget_is_never_exceeded(self, batch_tokens):
        batches = _batches(
            batching.token_batches(
                _dataset(*_examples()), batch_tokens, _MAX_LENGTH, seed=1
            )
        )
        for source, target, labels in batches:
            self.assertLessEqual(source.size, batch_tokens)
            self.assertLessEqual(target.size, batch_tokens)
            self.assertEqual(target.shape, labels.shape)
            self.assertLessEqual(source.shape[1], _MAX_LENGTH)

    def test_repeated_batches_of_a_bucket_have_one_shape(self):
        # Its last batch of an epoch is filled up with padding rows, so an
        # XLA training step compiles once per bucket.
        examples = _dataset(*_examples())
        epoch = batching.epoch_batch_count(examples, 333, _MAX_LENGTH)
        dataset = batching.token_batches(
            examples, 333, _MAX_LENGTH, seed=2, repeat=True
        )
        batches = _batches(dataset.take(2 * epoch))
        self.assertCountEqual(_indices(batches[:epoch]), range(300))
        shapes = {}
        for source, target, labels in batches:
            length = source.shape[1]
            self.assertEqual(source.shape, (333 // length, length))
            self.assertEqual(target.shape, source.shape)
            self.assertEqual(labels.shape, source.shape)
            shapes.setdefault(length, []).append((source[:, 0] > 0).sum())
        # Some bucket's last batch was short: it holds padding rows.
        self.assertTrue(
            any(min(rows) < 333 // length for length, rows in shapes.items())
        )

    @parameterized.parameters(True, False)
    def test_every_example_exactly_once_per_epoch(self, shuffle):
        dataset = batching.token_batches(
            _dataset(*_examples()), 500, _MAX_LENGTH, shuffle=shuffle
        )
        for _ in range(2):  # Two epochs of the same dataset.
            self.assertCountEqual(_indices(_batches(dataset)), range(300))

    def test_specials_and_shift(self):
        sources, targets = _examples(count=50)
        batches = _batches(
            batching.token_batches(
                _dataset(sources, targets), 400, _MAX_LENGTH, shuffle=False
            )
        )
        for source_ids, target_ids, labels in batches:
            for source_row, target_row, label_row in zip(
                source_ids, target_ids, labels
            ):
                if not source_row.any():
                    # Filling up the batch: padding alone, also the labels.
                    self.assertFalse(target_row.any() or label_row.any())
                    continue
                index = int(source_row[0]) - 100
                source, target = sources[index], targets[index]
                # Source: tokens + [EOS] + padding.
                self.assertAllEqual(
                    source_row[: len(source) + 1], source + [tokens.EOS_ID]
                )
                self.assertFalse(source_row[len(source) + 1 :].any())
                # Decoder input: [BOS] + tokens; labels: tokens + [EOS].
                self.assertAllEqual(
                    target_row[: len(target) + 1], [tokens.BOS_ID] + target
                )
                self.assertAllEqual(
                    label_row[: len(target) + 1], target + [tokens.EOS_ID]
                )
                self.assertFalse(label_row[len(target) + 1 :].any())
                self.assertFalse(target_row[len(target) + 1 :].any())

    def test_dtypes_and_names(self):
        dataset = batching.token_batches(
            _dataset(*_examples(count=10)), 200, _MAX_LENGTH
        )
        features, labels = dataset.element_spec
        self.assertEqual(set(features), {"source_ids", "target_ids"})
        self.assertEqual(features["source_ids"].dtype, tf.int32)
        self.assertEqual(features["target_ids"].dtype, tf.int32)
        self.assertEqual(labels.dtype, tf.int32)

    def test_deterministic_mode_repeats_the_same_batches(self):
        def run():
            return _batches(
                batching.token_batches(
                    _dataset(*_examples()), 300, _MAX_LENGTH, deterministic=True
                )
            )

        first, second = run(), run()
        self.assertEqual(len(first), len(second))
        for batch, again in zip(first, second):
            for array, same in zip(batch, again):
                self.assertAllEqual(array, same)

    def test_seeds_change_the_order(self):
        def order(seed):
            return _indices(
                _batches(
                    batching.token_batches(
                        _dataset(*_examples()), 300, _MAX_LENGTH, seed=seed
                    )
                )
            )

        self.assertNotEqual(order(1), order(2))

    def test_bucketing_keeps_padding_low(self):
        dataset = batching.token_batches(
            _dataset(*_examples(count=2000)), 2000, _MAX_LENGTH, seed=0
        )
        self.assertGreater(batching.padding_efficiency(dataset), 0.8)

    def test_repeat_goes_on_with_reshuffled_epochs(self):
        examples = _dataset(*_examples(count=40))
        per_epoch = batching.epoch_batch_count(examples, 300, _MAX_LENGTH)
        dataset = batching.token_batches(
            examples, 300, _MAX_LENGTH, repeat=True
        )
        batches = _batches(dataset.take(2 * per_epoch))
        first, second = (
            _indices(batches[:per_epoch]),
            _indices(batches[per_epoch:]),
        )
        # Each epoch is every example once, in another order.
        self.assertCountEqual(first, range(40))
        self.assertCountEqual(second, range(40))
        self.assertNotEqual(first, second)

    def test_each_pass_over_one_epoch_is_reshuffled(self):
        def two_passes():
            dataset = batching.token_batches(
                _dataset(*_examples(count=40)), 300, _MAX_LENGTH, seed=3
            )
            return [_indices(_batches(dataset)) for _ in range(2)]

        # As `fit(dataset, epochs=2)` reads it: another order each time, the
        # same two orders on every run.
        first, second = two_passes()
        self.assertCountEqual(first, second)
        self.assertNotEqual(first, second)
        self.assertEqual(two_passes(), [first, second])

    def test_pairs_in_memory_are_shuffled_over_the_whole_epoch(self):
        # A shuffle buffer (here of 100 pairs) lets a pair move only ~100
        # places, so a concatenation of corpora stays in runs of each; the
        # pairs in memory are permuted as a whole, each epoch anew.
        sources, targets = _examples(count=3000)
        in_memory = batching.PairsInMemory(
            tf.ragged.constant(sources, dtype=tf.int32),
            tf.ragged.constant(targets, dtype=tf.int32),
        )
        per_epoch = batching.epoch_batch_count(in_memory, 400, _MAX_LENGTH)
        self.assertEqual(
            per_epoch,
            batching.epoch_batch_count(
                _dataset(sources, targets), 400, _MAX_LENGTH
            ),
        )

        def first_epochs(examples):
            dataset = batching.token_batches(
                examples,
                400,
                _MAX_LENGTH,
                seed=2,
                deterministic=True,
                shuffle_buffer=100,
                repeat=True,
            )
            order = _indices(_batches(dataset.take(2 * per_epoch)))
            return order[:3000], order[3000:]

        first, second = first_epochs(in_memory)
        self.assertCountEqual(first, range(3000))
        self.assertCountEqual(second, range(3000))
        self.assertNotEqual(first, second)
        # The first tenth of an epoch draws from the whole corpus.
        self.assertGreater(max(first[:300]), 2700)
        self.assertGreater(max(second[:300]), 2700)
        buffered, _ = first_epochs(_dataset(sources, targets))
        self.assertLess(max(buffered[:300]), 1000)
        # The same seed, the same epochs (as training reads them).
        self.assertEqual(first_epochs(in_memory), (first, second))

    def test_shards_of_pairs_in_memory_split_them(self):
        sources, targets = _examples(count=50)
        in_memory = batching.PairsInMemory(
            tf.ragged.constant(sources, dtype=tf.int32),
            tf.ragged.constant(targets, dtype=tf.int32),
        )
        shards = [in_memory.shard(3, index) for index in range(3)]
        self.assertEqual([shard.num_pairs for shard in shards], [17, 17, 16])
        for index, shard in enumerate(shards):
            rows = [int(source[0]) - 100 for source, _ in shard.dataset()]
            self.assertEqual(rows, list(range(index, 50, 3)))
            self.assertAllEqual(
                shard.lengths(),
                [max(len(sources[row]), len(targets[row])) for row in rows],
            )

    def test_a_global_seed_of_zero_works_and_stays(self):
        # TensorFlow cannot combine a tensor op seed with a global seed of 0
        # (`keras.utils.set_random_seed(0)`); the per-epoch shuffles drop
        # the global seed in their own graph only.
        examples = _dataset(*_examples(count=40))
        tf.random.set_seed(0)
        want = float(tf.random.uniform([], seed=1))
        tf.random.set_seed(0)
        dataset = batching.token_batches(
            examples, 300, _MAX_LENGTH, seed=3, repeat=True
        )
        self.assertEqual(float(tf.random.uniform([], seed=1)), want)
        epoch = batching.epoch_batch_count(examples, 300, _MAX_LENGTH)
        self.assertCountEqual(
            _indices(_batches(dataset.take(epoch))), range(40)
        )

    @parameterized.parameters(40, 100, 333, 1000)
    def test_epoch_batch_count_counts_an_epoch(self, batch_tokens):
        examples = _dataset(*_examples())
        batches = _batches(
            batching.token_batches(examples, batch_tokens, _MAX_LENGTH, seed=4)
        )
        self.assertEqual(
            batching.epoch_batch_count(examples, batch_tokens, _MAX_LENGTH),
            len(batches),
        )

    @parameterized.parameters(
        (1, "within the first epoch"),
        (21, "the first epoch exactly"),
        (24, "into the second"),
        (50, "into the third"),
    )
    def test_skip_goes_on_with_the_batches_that_come_next(self, skip, _):
        examples = _dataset(*_examples(count=60))
        self.assertEqual(
            batching.epoch_batch_count(examples, 300, _MAX_LENGTH), 21
        )

        def batches(**kwargs):
            dataset = batching.token_batches(
                examples,
                300,
                _MAX_LENGTH,
                seed=5,
                deterministic=True,
                repeat=True,
                **kwargs,
            )
            return _batches(dataset.take(60 - kwargs.get("skip", 0)))

        want, got = batches()[skip:], batches(skip=skip)
        self.assertLen(got, len(want))
        for batch, same in zip(got, want):
            for array, same_array in zip(batch, same):
                self.assertAllEqual(array, same_array)

    def test_skip_past_the_only_epoch_is_an_error(self):
        examples = _dataset(*_examples(count=60))
        with self.assertRaisesRegex(
            ValueError,
            "`skip` is more batches than the 21 of the one epoch.*skip=21",
        ):
            batching.token_batches(examples, 300, _MAX_LENGTH, skip=21)

    def test_overlong_example_is_an_error_not_a_silent_drop(self):
        dataset = batching.token_batches(
            _dataset([[5] * _MAX_LENGTH], [[6]]), 100, _MAX_LENGTH
        )
        with self.assertRaisesRegex(
            tf.errors.InvalidArgumentError,
            "longer than max_length.*filter_by_length",
        ):
            _batches(dataset)

    def test_pairs_in_memory_take_ragged_ids(self):
        padded = np.array([[5, 6, 0]], "int32")
        ragged = tf.ragged.constant([[5, 6]], tf.int32)
        for source, target, arg in (
            (padded, ragged, "source_ids"),
            (ragged, tf.constant(padded), "target_ids"),
        ):
            with self.assertRaisesRegex(
                TypeError,
                f"^`{arg}` must be a tf.RaggedTensor of each pair's ids "
                r"without padding.*from_tensor\(ids, padding=0\)\). Received: "
                f"{arg} of type",
            ):
                batching.PairsInMemory(source, target)

    def test_a_dataset_of_something_else_than_pairs_of_ids_is_named(self):
        ids = np.ones((2, 3), "int32")
        for examples in (
            tf.data.Dataset.from_tensor_slices({"source": ids, "target": ids}),
            tf.data.Dataset.from_tensor_slices((ids.astype("float32"), ids)),
            tf.data.Dataset.from_tensor_slices((ids, ids, ids)),
        ):
            with self.assertRaisesRegex(
                TypeError,
                r"`examples` must be a PairsInMemory or a tf.data.Dataset of "
                r"\(source_ids, target_ids\) pairs.*Received: a dataset of ",
            ):
                batching.token_batches(examples, 100, _MAX_LENGTH)

    def test_padded_ids_or_ids_with_specials_are_an_error(self):
        # A padded NumPy row used to get EOS after its padding.
        for source, target in (
            ([5, 6, 7, 0, 0], [5, 8]),
            ([5, 6], [2, 5, 8]),
            ([5, 6, 3], [5]),
            ([5, -4], [5]),
        ):
            dataset = batching.token_batches(
                _dataset([source], [target]), 100, _MAX_LENGTH, shuffle=False
            )
            with self.assertRaisesRegex(
                tf.errors.InvalidArgumentError,
                r"An example holds padding \(0\), BOS \(2\), EOS \(3\) or a "
                "negative id.*Pass the ids of each sentence unpadded",
            ):
                _batches(dataset)
        # <unk> (1) is a token of the text.
        batches = _batches(
            batching.token_batches(
                _dataset([[1, 5]], [[6, 1]]), 100, _MAX_LENGTH, shuffle=False
            )
        )
        self.assertAllEqual(batches[0][0][0][:3], [1, 5, 3])

    def test_budget_below_max_length(self):
        with self.assertRaisesRegex(
            ValueError,
            "`batch_tokens` must be an integer >= `max_length`.*"
            "Received: batch_tokens=30, max_length=40",
        ):
            batching.token_batches(_dataset([[5]], [[6]]), 30, 40)

    def test_bad_max_length(self):
        with self.assertRaisesRegex(
            ValueError, "`max_length` must be an integer >= 2.*max_length=1"
        ):
            batching.token_batches(_dataset([[5]], [[6]]), 30, 1)

    def test_numpy_integers_are_integers(self):
        # `np.int64(4096)` was "not an integer"; bools still are not.
        examples = _dataset(*_examples(count=10, max_tokens=7))
        want = _batches(batching.token_batches(examples, 24, 8, seed=1))
        got = _batches(
            batching.token_batches(
                examples, np.int64(24), np.int32(8), seed=np.int64(1)
            )
        )
        self.assertLen(got, len(want))
        for batch, same in zip(got, want):
            for array, same_array in zip(batch, same):
                self.assertAllEqual(array, same_array)
        with self.assertRaisesRegex(ValueError, "Received: max_length=True"):
            batching.token_batches(examples, 300, True)

    def test_every_int64_seed_shuffles_each_epoch(self):
        # Seeds above ~9.2e12 overflowed int64 in the epochs' seeds. One
        # bucket (of length 8), one batch per epoch.
        examples = _dataset([[100 + index] for index in range(8)], [[6]] * 8)
        dataset = batching.token_batches(
            examples, 64, 8, seed=2**63 - 1, repeat=True
        )
        for batch in _batches(dataset.take(2)):
            self.assertCountEqual(_indices([batch]), range(8))
        for seed in (-1, 2**63, 1.0, True):
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "`seed` must be an integer from 0 to 2**63 - 1 (an int64 "
                    f"seed), or None. Received: seed={seed!r}"
                ),
            ):
                batching.token_batches(examples, 64, 8, seed=seed)

    @parameterized.parameters(2, 8, 40, 256)
    def test_bucket_lengths(self, max_length):
        lengths = batching.bucket_lengths(max_length)
        self.assertEqual(lengths[-1], max_length)
        self.assertEqual(lengths, sorted(set(lengths)))
        # Neighbouring buckets are at most ~10% (or 1) apart: little padding.
        for shorter, longer in itertools.pairwise(lengths):
            self.assertLessEqual(longer, max(shorter + 1, shorter * 1.1))


class PaddingEfficiencyTest(test_case.TestCase):
    def test_counts_real_tokens_over_positions(self):
        features = {
            "source_ids": tf.constant([[5, 3, 0, 0], [5, 6, 7, 3]]),
            "target_ids": tf.constant([[2, 5, 0, 0], [2, 5, 6, 0]]),
        }
        dataset = tf.data.Dataset.from_tensors(
            (features, features["target_ids"])
        )
        self.assertAllClose(batching.padding_efficiency(dataset), 11 / 16)

    def test_empty(self):
        features = {
            "source_ids": tf.zeros([0, 4], tf.int32),
            "target_ids": tf.zeros([0, 4], tf.int32),
        }
        dataset = tf.data.Dataset.from_tensors(
            (features, features["source_ids"])
        )
        with self.assertRaisesRegex(
            ValueError, "holds no tokens.*Received: batches="
        ):
            batching.padding_efficiency(dataset)


class DistributedDatasetFnTest(test_case.TestCase):
    def test_disjoint_shards_per_pipeline_and_per_replica_budget(self):
        dataset_fn = batching.distributed_dataset_fn(
            _dataset(*_examples()), 800, max_length=_MAX_LENGTH, seed=3
        )
        shards = []
        for pipeline_id in range(2):
            context = tf.distribute.InputContext(
                num_input_pipelines=2,
                input_pipeline_id=pipeline_id,
                num_replicas_in_sync=4,
            )
            batches = _batches(dataset_fn(context))
            for source, target, _ in batches:
                self.assertLessEqual(source.size, 800 // 4)
                self.assertLessEqual(target.size, 800 // 4)
            shards.append(_indices(batches))
        self.assertEmpty(set(shards[0]) & set(shards[1]))
        self.assertCountEqual(shards[0] + shards[1], range(300))

    def test_global_budget_too_small_for_the_replicas(self):
        dataset_fn = batching.distributed_dataset_fn(
            _dataset([[5]], [[6]]), 100, max_length=_MAX_LENGTH
        )
        context = tf.distribute.InputContext(num_replicas_in_sync=4)
        with self.assertRaisesRegex(
            ValueError,
            "global budget per step; split over 4 replicas it leaves 25 "
            "tokens, fewer than max_length=40.*Received: batch_tokens=100",
        ):
            dataset_fn(context)

    def test_fewer_examples_than_input_pipelines(self):
        # A pipeline without examples would repeat empty epochs forever.
        dataset_fn = batching.distributed_dataset_fn(
            _dataset([[5], [7]], [[6], [8]]),
            600,
            max_length=_MAX_LENGTH,
            num_examples=2,
            repeat=True,
        )
        context = tf.distribute.InputContext(
            num_input_pipelines=3, input_pipeline_id=0, num_replicas_in_sync=3
        )
        with self.assertRaisesRegex(
            ValueError,
            "2 training pairs cannot be shared by 3 input pipelines "
            r"\(workers\).*Received: num_examples=2",
        ):
            dataset_fn(context)
        # As many examples as pipelines: one each.
        context = tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2
        )
        self.assertLen(_batches(dataset_fn(context).take(3)), 3)

    @pytest.mark.slow
    def test_mirrored_strategy_on_two_cpu_replicas(self):
        # A fresh process: logical devices must be set before TF starts.
        script = textwrap.dedent(
            """
            import tensorflow as tf
            from keras_transformer.data import batching
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
            strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
            ragged = tf.ragged.constant([[5 + i] * (1 + i % 9)
                                         for i in range(64)], tf.int32)
            examples = tf.data.Dataset.from_tensor_slices((ragged, ragged))
            dataset = strategy.distribute_datasets_from_function(
                batching.distributed_dataset_fn(
                    examples, 64, max_length=16, deterministic=True))
            sizes, seen = [], 0
            for features, _ in dataset:
                for ids in strategy.experimental_local_results(
                        features["source_ids"]):
                    sizes.append(int(tf.size(ids)))
                    seen += int(tf.shape(ids)[0])
            print(max(sizes), seen, len(sizes))
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", script],
            check=False,
            capture_output=True,
            text=True,
            timeout=180,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
            cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
        )
        self.assertEqual(result.returncode, 0, msg=result.stderr)
        largest, seen, _ = map(int, result.stdout.split("\n")[-2].split())
        # Each replica's batch fits in its half of the 64-token budget, and
        # every example reaches a replica once.
        self.assertLessEqual(largest, 32)
        self.assertEqual(seen, 64)


def _in_memory(sources, targets):
    return batching.PairsInMemory(
        tf.ragged.constant(sources, dtype=tf.int32),
        tf.ragged.constant(targets, dtype=tf.int32),
    )


class UnshuffledPairsInMemoryTest(test_case.TestCase):
    def test_shuffle_false_keeps_the_corpus_order_whatever_the_seed(self):
        # make_eval_dataset batches PairsInMemory with shuffle=False: each
        # bucket's batches hold its pairs in corpus order, as a dataset's.
        sources, targets = _examples(count=120)
        in_memory = _in_memory(sources, targets)

        def order(examples, seed):
            return _indices(
                _batches(
                    batching.token_batches(
                        examples,
                        300,
                        _MAX_LENGTH,
                        shuffle=False,
                        seed=seed,
                        deterministic=True,
                    )
                )
            )

        want = order(_dataset(sources, targets), 1)
        self.assertEqual(order(in_memory, 1), want)
        self.assertEqual(order(in_memory, 2), want)


class ResumedDistributedDatasetTest(test_case.TestCase):
    def test_a_resumed_pipeline_skips_the_batches_of_its_replicas(self):
        # Each step takes one batch per replica of this pipeline (2 of the
        # 4 replicas read from each of 2 pipelines): a run resumed at step 3
        # goes on from this pipeline's batch 6.
        def batches(start_step, count):
            dataset_fn = batching.distributed_dataset_fn(
                _dataset(*_examples(count=60)),
                1200,
                max_length=_MAX_LENGTH,
                start_step=start_step,
                seed=5,
                deterministic=True,
                repeat=True,
            )
            context = tf.distribute.InputContext(
                num_input_pipelines=2,
                input_pipeline_id=1,
                num_replicas_in_sync=4,
            )
            return _batches(dataset_fn(context).take(count))

        want, got = batches(0, 16)[6:], batches(3, 10)
        self.assertLen(got, len(want))
        for batch, same in zip(got, want):
            for array, same_array in zip(batch, same):
                self.assertAllEqual(array, same_array)


class EpochSeedsTest(test_case.TestCase):
    def test_neighbouring_seeds_do_not_share_their_epochs(self):
        # Runs of seeds 1 and 2 (e.g. a seed study) must not see the same
        # shuffles one epoch apart: epoch e's seed is not seed + e.
        examples = _in_memory(*_examples(count=40))
        per_epoch = batching.epoch_batch_count(examples, 300, _MAX_LENGTH)

        def epochs(seed):
            order = _indices(
                _batches(
                    batching.token_batches(
                        examples,
                        300,
                        _MAX_LENGTH,
                        seed=seed,
                        deterministic=True,
                        repeat=True,
                    ).take(2 * per_epoch)
                )
            )
            return order[:40], order[40:]

        first = epochs(1)
        second = epochs(2)
        self.assertCountEqual(first[1], range(40))
        self.assertNotEqual(first[1], second[0])
