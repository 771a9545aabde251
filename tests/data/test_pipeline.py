"""Tests of the spec-to-batches glue and its drop counts."""

import functools
import json
import os

import tensorflow as tf

from keras_transformer.data import batching, pipeline, sources
from keras_transformer.data import tokenizer as tokenizer_lib
from tests import test_case
from tests.data import fixtures


class PipelineTest(test_case.TestCase):
    def setUp(self):
        super().setUp()
        self.folder = fixtures.tempdir(self)
        english = [pair[0] for pair in fixtures.PAIRS]
        german = [pair[1] for pair in fixtures.PAIRS]
        # One pair with an empty side, one far longer than max_length.
        english += ["", " ".join(["Music makes people happy."] * 12)]
        german += ["Leer.", " ".join(["Musik macht Menschen glücklich."] * 12)]
        for split in ("train", "dev"):
            fixtures.write(self.path(f"{split}.en"), "\n".join(english) + "\n")
            fixtures.write(self.path(f"{split}.de"), "\n".join(german) + "\n")
        self.spec = f"text:{self.path('train')}"

    def training_dataset(self, **options):
        """The fixture corpus's training split, batched by 200 tokens
        unless `options` say otherwise."""
        return pipeline.make_training_dataset(
            self.spec,
            fixtures.tokenizer(),
            src_lang="en",
            tgt_lang="de",
            **{"batch_tokens": 200, "max_length": 40, **options},
        )

    def path(self, name):
        return os.path.join(self.folder, name)

    def test_tokenize_pairs_keeps_order_and_lengths(self):
        tokenizer = fixtures.tokenizer()
        pairs = tf.data.Dataset.from_tensor_slices(
            (["I have two sisters.", ""], ["Ich habe zwei Schwestern.", "Ja"])
        )
        source_ids, target_ids = pipeline.tokenize_pairs(
            pairs, tokenizer, batch_size=1
        )
        self.assertEqual(source_ids.dtype, tf.int32)
        self.assertAllEqual(
            source_ids[0], tokenizer.tokenize(["I have two sisters."])[0]
        )
        self.assertEqual(int(source_ids.row_lengths()[1]), 0)
        self.assertAllEqual(
            tokenizer.detokenize(target_ids),
            [b"Ich habe zwei Schwestern.", b"Ja"],
        )

    def test_filter_by_length_counts_every_drop(self):
        source_ids = tf.ragged.constant([[5, 6], [], [5] * 9, [7], [8] * 3])
        target_ids = tf.ragged.constant([[5], [6], [6], [], [9] * 4])
        kept_source, kept_target, stats = pipeline.filter_by_length(
            source_ids, target_ids, max_length=5
        )
        self.assertEqual(
            stats,
            pipeline.DataStats(
                num_pairs=5,
                dropped_empty=2,
                dropped_overlong=1,
                num_examples=2,
                source_tokens=5,
                target_tokens=5,
                empty_pairs=(2, 4),
                overlong_pairs=(3,),
            ),
        )
        # The dropped pairs are located: pair N is line N of a text corpus.
        self.assertIn(
            "(2 dropped with an empty side (pairs 2, 4), 1 longer than "
            "max_length (pair 3))",
            stats.describe(),
        )
        self.assertAllEqual(kept_source, tf.ragged.constant([[5, 6], [8] * 3]))
        # The first SHOWN_DROPS of each kind.
        _, _, many = pipeline.filter_by_length(
            tf.ragged.constant([[5]] * 3 + [[]] * 7, tf.int32),
            tf.ragged.constant([[5]] * 10, tf.int32),
            max_length=5,
        )
        self.assertEqual(many.empty_pairs, (4, 5, 6, 7, 8))
        self.assertIn(
            "7 dropped with an empty side (pairs 4, 5, 6, 7, 8, ...), 0 longer "
            "than max_length);",
            many.describe(),
        )
        self.assertAllEqual(kept_target, tf.ragged.constant([[5], [9] * 4]))

    def test_make_training_dataset_reports_drops_and_padding(self):
        dataset, stats = self.training_dataset(deterministic=True)
        self.assertEqual(stats.num_pairs, len(fixtures.PAIRS) + 2)
        self.assertEqual(stats.dropped_empty, 1)
        self.assertEqual(stats.dropped_overlong, 1)
        self.assertEqual(stats.num_examples, len(fixtures.PAIRS))
        batches = list(dataset.as_numpy_iterator())
        self.assertLen(batches, stats.num_batches)
        self.assertBetween(stats.padding_efficiency, 0.5, 1.0)
        self.assertIn(
            f"{len(fixtures.PAIRS) + 2} pairs read, {len(fixtures.PAIRS)} kept "
            f"(1 dropped with an empty side (pair {len(fixtures.PAIRS) + 1}), "
            f"1 longer than max_length (pair {len(fixtures.PAIRS) + 2}))",
            stats.describe(),
        )
        self.assertIn(
            f"padding efficiency {stats.padding_efficiency:.1%}",
            stats.describe(),
        )
        # Repeated, as training reads it: each bucket's last batch is filled
        # up with rows of padding, which the efficiency counts.
        repeated, repeated_stats = self.training_dataset(
            deterministic=True, repeat=True
        )
        self.assertEqual(repeated_stats.num_batches, stats.num_batches)
        self.assertAllClose(
            repeated_stats.padding_efficiency,
            batching.padding_efficiency(repeated.take(stats.num_batches)),
        )
        self.assertLess(
            repeated_stats.padding_efficiency, stats.padding_efficiency
        )
        tokenizer = fixtures.tokenizer()
        sources = [
            row
            for features, _ in batches
            for row in tokenizer.detokenize(features["source_ids"]).numpy()
        ]
        self.assertCountEqual(
            [s.decode() for s in sources], [p[0] for p in fixtures.PAIRS]
        )

    def test_make_eval_dataset_is_fixed_and_reads_the_direction(self):
        tokenizer = fixtures.tokenizer()

        def source_batches():
            dataset, stats = pipeline.make_eval_dataset(
                self.spec,
                tokenizer,
                src_lang="de",
                tgt_lang="en",
                batch_tokens=300,
                max_length=40,
            )
            self.assertEqual(stats.num_examples, len(fixtures.PAIRS))
            return [f["source_ids"] for f, _ in dataset.as_numpy_iterator()]

        first, second = source_batches(), source_batches()
        self.assertEqual(len(first), len(second))
        for batch, same in zip(first, second):
            self.assertAllEqual(batch, same)
        sources = [
            s.decode()
            for batch in first
            for s in tokenizer.detokenize(batch).numpy()
        ]
        self.assertCountEqual(sources, [p[1] for p in fixtures.PAIRS])

    def test_distributed_dataset_under_a_strategy(self):
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        dataset, stats = self.training_dataset(
            strategy=strategy, measure_padding=False
        )
        self.assertIsNone(stats.padding_efficiency)
        self.assertIsInstance(dataset, tf.distribute.DistributedDataset)
        seen = 0
        for features, labels in dataset:
            self.assertLessEqual(int(tf.size(labels)), 200)
            seen += int(tf.shape(features["source_ids"])[0])
        self.assertEqual(seen, len(fixtures.PAIRS))

    def test_stats_under_a_strategy_are_the_replicas_batches(self):
        # Each of 8 replicas batches 400 / 8 = 50 tokens: the epoch's
        # batches and padding are those of a single device at 50, and a
        # step takes 8 of them (16 when each replica accumulates 2).
        def stats(batch_tokens, **options):
            return self.training_dataset(
                batch_tokens=batch_tokens, repeat=True, **options
            )[1]

        single = stats(50)
        mirrored = stats(400, strategy=test_case.eight_replica_strategy())
        accumulating = stats(
            400, strategy=test_case.eight_replica_strategy(), batches_per_step=2
        )
        self.assertEqual(single.steps_per_epoch, single.num_batches)
        self.assertNotIn("steps)", single.describe())
        for distributed, batches_per_step in ((mirrored, 1), (accumulating, 2)):
            self.assertEqual(distributed.num_batches, single.num_batches)
            self.assertEqual(
                distributed.padding_efficiency, single.padding_efficiency
            )
            steps = single.num_batches / (8 * batches_per_step)
            self.assertEqual(distributed.steps_per_epoch, steps)
            self.assertIn(
                f"{single.num_batches} batches per epoch ({steps:.1f} steps)",
                distributed.describe(),
            )

    def test_examples_are_the_rows_in_order(self):
        source_ids = tf.ragged.constant([[5, 6], [7], [8, 9, 10]], tf.int32)
        target_ids = tf.ragged.constant([[11], [12, 13], [14]], tf.int32)
        examples = list(
            batching.PairsInMemory(source_ids, target_ids).dataset()
        )
        self.assertLen(examples, 3)
        for row, (source, target) in enumerate(examples):
            self.assertEqual(source.dtype, tf.int32)
            self.assertAllEqual(source, source_ids[row])
            self.assertAllEqual(target, target_ids[row])

    def test_examples_hold_no_memory_per_pair_beyond_the_ids(self):
        # The README's memory figures (4 bytes per token) for WMT-sized
        # splits: no per-pair copy, such as from_tensor_slices' variants.
        if not os.path.exists("/proc/self/statm"):
            self.skipTest("Resident memory is read from Linux's /proc.")
        pairs = 400_000
        source_ids = tf.RaggedTensor.from_row_lengths(
            tf.fill([pairs], 5), tf.ones([pairs], tf.int64)
        )
        target_ids = tf.RaggedTensor.from_row_lengths(
            tf.fill([pairs], 6), tf.ones([pairs], tf.int64)
        )
        before = _resident_bytes()
        examples = batching.PairsInMemory(source_ids, target_ids).dataset()
        self.assertLen(list(examples.take(2)), 2)
        # from_tensor_slices added ~250 MB here; the ids take ~10 MB.
        self.assertLess(_resident_bytes() - before, 50 * 2**20)

    def test_nothing_left_after_filtering(self):
        with self.assertRaisesRegex(
            ValueError,
            r"No pair of the dev split is left after filtering \(1 with an "
            r"empty side, 25 longer than max_length\).*Received: max_length=2",
        ):
            pipeline.make_eval_dataset(
                self.spec,
                fixtures.tokenizer(),
                src_lang="en",
                tgt_lang="de",
                batch_tokens=100,
                max_length=2,
            )

    def test_load_or_train_tokenizer_trains_once_then_loads(self):
        model_path = os.path.join(self.folder, "vocab", "bpe.model")
        trained = pipeline.load_or_train_tokenizer(
            self.spec, model_path, src_lang="en", tgt_lang="de", vocab_size=330
        )
        self.assertEqual(trained.vocab_size, 330)
        self.assertTrue(os.path.exists(model_path))
        # The second call loads the file: no vocab_size is needed any more.
        loaded = pipeline.load_or_train_tokenizer(
            self.spec, model_path, src_lang="en", tgt_lang="de"
        )
        strings = tf.constant(["Wir gehen jetzt nach Hause."])
        self.assertAllEqual(
            loaded.tokenize(strings).to_tensor(),
            trained.tokenize(strings).to_tensor(),
        )
        # It was learned from this corpus and pair only (either direction).
        pipeline.load_or_train_tokenizer(
            self.spec, model_path, src_lang="de", tgt_lang="en"
        )
        for data, src_lang, tgt_lang in (
            ("demo", "en", "de"),
            (self.spec, "en", "fr"),
        ):
            with self.assertRaisesRegex(
                ValueError, "bpe.model was learned from another corpus.*Delete"
            ):
                pipeline.load_or_train_tokenizer(
                    data, model_path, src_lang=src_lang, tgt_lang=tgt_lang
                )
        # A vocabulary made elsewhere (no record) loads for any corpus.
        os.remove(os.path.join(self.folder, "vocab", "bpe.data.json"))
        pipeline.load_or_train_tokenizer(
            "demo", model_path, src_lang="en", tgt_lang="de"
        )

    def vocabulary_loader(self, model_path):
        """`load_or_train_tokenizer` of this corpus's vocabulary at
        `model_path`, the other arguments left to give."""
        return functools.partial(
            pipeline.load_or_train_tokenizer,
            self.spec,
            model_path,
            src_lang="en",
            tgt_lang="de",
        )

    def test_vocabulary_of_a_corpus_edited_in_place(self):
        model_path = os.path.join(self.folder, "vocab", "bpe.model")
        load = self.vocabulary_loader(model_path)
        load(vocab_size=330)
        with open(model_path, "rb") as f:
            learned = f.read()
        # Unchanged files: loaded, even where relearning is allowed.
        self.assertEqual(load(relearn_if_changed=True).vocab_size, 330)
        # The German side edited in place (e.g. after a run failed before
        # training).
        train_de = os.path.join(self.folder, "train.de")
        with open(train_de, encoding="utf-8") as f:
            edited = f.read().replace("Hause", "Donaudampfschifffahrt")
        fixtures.write(train_de, edited)
        # A model was trained with the old vocabulary: kept, with a warning.
        with self.assertLogs(level="WARNING") as logs:
            load()
        self.assertIn("The train files changed since", logs.output[0])
        with open(model_path, "rb") as f:
            self.assertEqual(f.read(), learned)
        # None was: learned again, at its size.
        relearned = load(relearn_if_changed=True)
        self.assertEqual(relearned.vocab_size, 330)
        with open(model_path, "rb") as f:
            self.assertNotEqual(f.read(), learned)
        # As learned from the edited corpus afresh.
        fresh = pipeline.load_or_train_tokenizer(
            self.spec,
            os.path.join(self.folder, "fresh", "bpe.model"),
            src_lang="en",
            tgt_lang="de",
            vocab_size=330,
        )
        ids = list(range(330))
        self.assertEqual(relearned.id_to_piece(ids), fresh.id_to_piece(ids))
        # And recorded: the next load keeps it.
        with open(model_path, "rb") as f:
            relearned_bytes = f.read()
        load(relearn_if_changed=True)
        with open(model_path, "rb") as f:
            self.assertEqual(f.read(), relearned_bytes)

    def test_vocabulary_of_another_size_is_learned_again_only_before_training(
        self,
    ):
        model_path = os.path.join(self.folder, "vocab", "bpe.model")
        load = self.vocabulary_loader(model_path)
        load(vocab_size=330)
        # A model was trained with it: kept (the trainer refuses the size).
        with self.assertNoLogs("absl", level="WARNING"):
            self.assertEqual(load(vocab_size=320).vocab_size, 330)
        # None was (a run that failed before training, rerun with another
        # --vocab_size): learned again at the size asked for.
        self.assertEqual(
            load(vocab_size=320, relearn_if_changed=True).vocab_size, 320
        )
        self.assertEqual(load().vocab_size, 320)

    def test_vocabulary_record_names_its_corpus_wherever_it_is_run(self):
        model_path = os.path.join(self.folder, "vocab", "bpe.model")
        record_path = os.path.join(self.folder, "vocab", "bpe.data.json")
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.folder)
        pipeline.load_or_train_tokenizer(
            "text:train",
            model_path,
            src_lang="en",
            tgt_lang="de",
            vocab_size=330,
        )
        # The corpus, however it is spelt.
        pipeline.load_or_train_tokenizer(
            self.spec, model_path, src_lang="en", tgt_lang="de"
        )
        # An older record's relative path is read from the working directory.
        with open(record_path) as f:
            record = json.load(f)
        record["data"]["location"] = "train"
        fixtures.write(record_path, json.dumps(record))
        pipeline.load_or_train_tokenizer(
            self.spec, model_path, src_lang="en", tgt_lang="de"
        )
        os.chdir(os.path.dirname(model_path))
        with self.assertRaisesRegex(ValueError, "learned from another corpus"):
            pipeline.load_or_train_tokenizer(
                self.spec, model_path, src_lang="en", tgt_lang="de"
            )

    def test_load_or_train_tokenizer_needs_a_model_suffix(self):
        with self.assertRaisesRegex(
            ValueError,
            "`model_path` must end in .model.*Received: model_path=.*bpe.vocab",
        ):
            pipeline.load_or_train_tokenizer(
                self.spec,
                self.path("bpe.vocab"),
                src_lang="en",
                tgt_lang="de",
            )


def write_fixture_corpus(folder, name):
    """The fixture pairs as `<folder>/<name>.en` and `.de`; returns the
    prefix."""
    for lang, side in (("en", 0), ("de", 1)):
        fixtures.write(
            os.path.join(folder, f"{name}.{lang}"),
            "".join(pair[side] + "\n" for pair in fixtures.PAIRS),
        )
    return os.path.join(folder, name)


def _resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class DemoPipelineTest(test_case.TestCase):
    def test_real_demo_corpus_dev_split(self):
        # A vocabulary from the demo dev split (small, so fast) round-trips
        # the demo text and batches every demo sentence.
        model_path = os.path.join(fixtures.tempdir(self), "demo.model")
        english, german = sources.load_pairs("demo", "dev", "en", "de")
        tokenizer = tokenizer_lib.SubwordTokenizer.from_file(
            tokenizer_lib.train_subword_vocab(
                english + german, 500, model_path[: -len(".model")]
            )
        )
        ids = tokenizer.tokenize(tf.constant(german))
        self.assertEqual(
            [s.decode() for s in tokenizer.detokenize(ids).numpy()], german
        )
        _, stats = pipeline.make_eval_dataset(
            "demo",
            tokenizer,
            src_lang="en",
            tgt_lang="de",
            batch_tokens=1024,
            max_length=128,
        )
        self.assertEqual(stats.num_examples, len(english))
        self.assertEqual(stats.dropped_empty + stats.dropped_overlong, 0)
        self.assertGreater(stats.padding_efficiency, 0.75)


class FilterBoundaryTest(test_case.TestCase):
    def test_a_side_of_max_length_tokens_is_overlong_one_less_is_kept(self):
        # max_length counts the EOS (or BOS) that batching adds: a side of
        # max_length tokens would make token_batches fail mid-training.
        max_length = 6
        source_ids = tf.ragged.constant(
            [[5] * (max_length - 1), [5] * max_length, [5]], tf.int32
        )
        target_ids = tf.ragged.constant([[6], [6], [6] * max_length], tf.int32)
        kept_source, kept_target, stats = pipeline.filter_by_length(
            source_ids, target_ids, max_length
        )
        self.assertEqual(stats.dropped_overlong, 2)
        self.assertEqual(stats.overlong_pairs, (2, 3))
        self.assertEqual(stats.num_examples, 1)
        # What is kept batches without an error.
        batches = batching.token_batches(
            batching.PairsInMemory(kept_source, kept_target),
            max_length,
            max_length,
            shuffle=False,
        )
        self.assertLen(list(batches), 1)


class EvalOrderTest(test_case.TestCase):
    def test_eval_batches_keep_the_corpus_order(self):
        # "fixed order": each batch's rows in corpus order, not a seeded
        # shuffle that merely repeats.
        folder = fixtures.tempdir(self)
        write_fixture_corpus(folder, "dev")
        tokenizer = fixtures.tokenizer()
        dataset, _ = pipeline.make_eval_dataset(
            f"text:train={folder}/dev,dev={folder}/dev",
            tokenizer,
            src_lang="en",
            tgt_lang="de",
            batch_tokens=300,
            max_length=40,
        )
        english = [pair[0] for pair in fixtures.PAIRS]
        rows = [
            [
                english.index(sentence.decode())
                for sentence in tokenizer.detokenize(features["source_ids"])
                .numpy()
                .tolist()
            ]
            for features, _ in dataset.as_numpy_iterator()
        ]
        self.assertCountEqual(sum(rows, []), range(len(english)))
        for batch in rows:
            self.assertEqual(batch, sorted(batch))


class DropWarningTest(test_case.TestCase):
    def test_drops_are_a_warning_a_clean_split_is_not(self):
        # An overlong corpus shows at once, before hours of training.
        folder = fixtures.tempdir(self)
        english = [pair[0] for pair in fixtures.PAIRS]
        german = [pair[1] for pair in fixtures.PAIRS]
        for name, extra in (("clean", []), ("dropping", [("", "Leer.")])):
            for lang, side in (("en", english), ("de", german)):
                lines = side + [pair[lang == "de"] for pair in extra]
                fixtures.write(
                    os.path.join(folder, f"{name}.{lang}"),
                    "\n".join(lines) + "\n",
                )

        def load(name):
            return pipeline.load_training_batches(
                f"text:{folder}/{name}",
                fixtures.tokenizer(),
                src_lang="en",
                tgt_lang="de",
                batch_tokens=200,
                max_length=40,
                measure_padding=False,
            )

        with self.assertLogs("absl", "WARNING") as logs:
            load("dropping")
        self.assertIn("1 dropped with an empty side (pair 25)", logs.output[0])
        with self.assertNoLogs("absl", "WARNING"):
            load("clean")


class ResumeWithAccumulationTest(test_case.TestCase):
    def test_a_resumed_run_skips_every_batch_of_its_steps(self):
        # With 2 batches per step (gradient accumulation), step 3 starts at
        # the 4th group: batches 6 and 7 of an uninterrupted run.
        folder = fixtures.tempdir(self)
        write_fixture_corpus(folder, "train")
        batches = pipeline.load_training_batches(
            f"text:{folder}/train",
            fixtures.tokenizer(),
            src_lang="en",
            tgt_lang="de",
            batch_tokens=100,
            max_length=40,
            seed=3,
            deterministic=True,
            repeat=True,
            measure_padding=False,
            batches_per_step=2,
        )

        def groups(start_step, count):
            return [
                (features["source_ids"].to_list(), labels.to_list())
                for features, labels in batches.dataset(start_step).take(count)
            ]

        self.assertEqual(groups(3, 4), groups(0, 7)[3:])


class VocabularyOfAnEditedCorpusTest(test_case.TestCase):
    def setUp(self):
        super().setUp()
        self.folder = fixtures.tempdir(self)
        # The fixture corpus's vocabulary, learned at 330 pieces.
        self.load = functools.partial(
            pipeline.load_or_train_tokenizer,
            f"text:{write_fixture_corpus(self.folder, 'train')}",
            os.path.join(self.folder, "vocab", "bpe.model"),
            src_lang="en",
            tgt_lang="de",
        )
        self.load(vocab_size=330)

    def test_an_edit_that_keeps_the_file_size_is_seen(self):
        # A typo fixed letter for letter leaves the size: the modification
        # time tells that the vocabulary was learned from other text.
        train_de = os.path.join(self.folder, "train.de")
        with open(train_de, encoding="utf-8") as f:
            text = f.read()
        size = os.path.getsize(train_de)
        mtime = os.stat(train_de).st_mtime_ns
        fixtures.write(train_de, text.replace("Hause", "Heime"))
        os.utime(train_de, ns=(mtime + 10**9, mtime + 10**9))
        self.assertEqual(os.path.getsize(train_de), size)
        with self.assertLogs("absl", "WARNING") as logs:
            self.load()
        self.assertIn("The train files changed since", logs.output[0])

    def test_an_older_record_without_file_state_is_not_a_change(self):
        # Records of older versions hold no train_files: the vocabulary is
        # kept without a warning that its files changed.
        record_path = os.path.join(self.folder, "vocab", "bpe.data.json")
        with open(record_path) as f:
            record = json.load(f)
        del record["train_files"]
        fixtures.write(record_path, json.dumps(record))
        with self.assertNoLogs("absl", "WARNING"):
            self.assertEqual(self.load().vocab_size, 330)
