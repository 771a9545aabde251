"""Tests of `--data` spec parsing and split loading."""

import os

from absl.testing import parameterized

from keras_transformer.data import sources
from tests import test_case
from tests.data import fixtures


class ParseDataSpecTest(test_case.TestCase):
    @parameterized.named_parameters(
        ("demo", "demo", sources.DataSpec("demo")),
        ("text", "text:data/train", sources.DataSpec("text", "data/train")),
        ("relative", "text:train", sources.DataSpec("text", "train")),
        ("tsv", "tsv:d/train.tsv", sources.DataSpec("tsv", "d/train.tsv")),
        (
            "tfds",
            "tfds:wmt14_translate/de-en",
            sources.DataSpec("tfds", "wmt14_translate/de-en"),
        ),
        (
            "tfds_other_dataset",
            "tfds:ted_hrlr_translate/pt_to_en",
            sources.DataSpec("tfds", "ted_hrlr_translate/pt_to_en"),
        ),
        (
            # "=" in a path: named splits start with a split's name.
            "equals",
            "text:d/lang=en-de/train",
            sources.DataSpec("text", "d/lang=en-de/train"),
        ),
        (
            "explicit",
            "text:train=d/corpus,test=d/newstest2014",
            sources.DataSpec(
                "text",
                splits=(("train", "d/corpus"), ("test", "d/newstest2014")),
            ),
        ),
    )
    def test_forms(self, spec, expected):
        self.assertEqual(sources.parse_data_spec(spec), expected)
        # And back: the spec string of a spec.
        self.assertEqual(
            str(sources.parse_data_spec(str(expected))), str(expected)
        )

    @parameterized.parameters(
        "wmt14", "text:", "csv:data/train", "tfds:wmt14_translate", "demo:x"
    )
    def test_unknown_spec_lists_the_forms(self, spec):
        with self.assertRaisesRegex(
            ValueError,
            "Unknown data spec.*Use one of: demo, text:PATH/PREFIX, .*"
            f"tfds:wmt14_translate/de-en.*Received: spec='{spec}'",
        ):
            sources.parse_data_spec(spec)

    def test_normalized_spec_has_absolute_local_paths(self):
        here = os.getcwd()
        for spec, expected in (
            # One corpus, many spellings: one form.
            ("text:c/../c/train", f"text:{here}/c/train"),
            (f"text:{here}//c/train", f"text:{here}/c/train"),
            (
                "tsv:train=a.tsv,dev=gs://bucket/dev.tsv",
                f"tsv:train={here}/a.tsv,dev=gs://bucket/dev.tsv",
            ),
            ("tfds:wmt14_translate/de-en", "tfds:wmt14_translate/de-en"),
            ("demo", "demo"),
        ):
            with self.subTest(spec=spec):
                self.assertEqual(sources.normalize_data_spec(spec), expected)

    def test_bad_explicit_split(self):
        with self.assertRaisesRegex(
            ValueError, "bad item 'valid=x'.*Received: spec="
        ):
            sources.parse_data_spec("text:train=a,valid=x")
        with self.assertRaisesRegex(ValueError, "split train named twice"):
            sources.parse_data_spec("text:train=a,train=b")

    def test_unknown_kind(self):
        with self.assertRaisesRegex(
            ValueError, "`kind` must be one of.*Received: kind=csv"
        ):
            sources.DataSpec("csv")

    @parameterized.parameters(
        ("en", "de", 37000),
        ("de", "en", 37000),
        ("en", "fr", 32000),
        ("fr", "en", 32000),
    )
    def test_default_vocab_size(self, src_lang, tgt_lang, expected):
        self.assertEqual(
            sources.default_vocab_size(src_lang, tgt_lang), expected
        )

    def test_default_vocab_size_of_the_demo_corpus(self):
        for spec in ("demo", sources.parse_data_spec("demo")):
            self.assertEqual(sources.default_vocab_size("en", "de", spec), 2000)
        self.assertEqual(
            sources.default_vocab_size("en", "de", "tsv:c.tsv"), 37000
        )

    def test_default_vocab_size_unknown_pair(self):
        with self.assertRaisesRegex(
            ValueError,
            "no default vocabulary size.*--vocab_size.*Received: "
            "src_lang=en, tgt_lang=ro",
        ):
            sources.default_vocab_size("en", "ro")


class LoadTextTest(test_case.TestCase):
    def setUp(self):
        super().setUp()
        self.folder = fixtures.tempdir(self)
        for name, count in (("train", 3), ("valid", 2), ("newstest2014", 1)):
            for lang in ("en", "de"):
                lines = "".join(f"{name} {lang} {i}\n" for i in range(count))
                fixtures.write(self.path(f"{name}.{lang}"), lines)

    def path(self, name):
        return os.path.join(self.folder, name)

    def test_moses_naming_and_sibling_splits(self):
        spec = f"text:{self.path('train')}"
        self.assertEqual(
            sources.load_pairs(spec, "train", "en", "de"),
            (
                ["train en 0", "train en 1", "train en 2"],
                ["train de 0", "train de 1", "train de 2"],
            ),
        )
        # No dev.* here: dev falls back to valid.*, test to newstest2014.*.
        self.assertEqual(
            sources.load_pairs(spec, "dev", "en", "de")[1],
            ["valid de 0", "valid de 1"],
        )
        self.assertEqual(
            sources.load_pairs(spec, "test", "en", "de"),
            (["newstest2014 en 0"], ["newstest2014 de 0"]),
        )
        # dev.* first when both are there.
        for lang in ("en", "de"):
            fixtures.write(self.path(f"dev.{lang}"), f"dev {lang} 0\n")
        self.assertEqual(
            sources.load_pairs(spec, "dev", "en", "de")[1], ["dev de 0"]
        )

    def test_sibling_splits_keep_the_train_prefixs_marks(self):
        # train.tok.* with dev.* (raw) and dev.tok.* beside it: the dev
        # split of a tokenized corpus is dev.tok, not the raw dev.
        for name in ("train.tok", "dev.tok", "dev"):
            for lang in ("en", "de"):
                fixtures.write(self.path(f"{name}.{lang}"), f"{name} {lang}\n")
        spec = f"text:{self.path('train.tok')}"
        with self.assertNoLogs("absl", "WARNING"):
            self.assertEqual(
                sources.load_pairs(spec, "dev", "en", "de"),
                (["dev.tok en"], ["dev.tok de"]),
            )
        # Without a marked one, the plain names as before, with a warning.
        with self.assertLogs("absl", "WARNING") as logs:
            self.assertEqual(
                sources.load_pairs(spec, "test", "en", "de")[0],
                ["newstest2014 en 0"],
            )
        self.assertRegex(
            logs.output[0],
            f"The test split is read from {self.path('newstest2014.en')}: "
            f"there is none marked '.tok' as {self.path('train.tok')} is "
            rf"\({self.path('test.tok.en')}, "
            rf"{self.path('newstest2014.tok.en')}\)",
        )
        fixtures.write(self.path("train.bpe.tsv"), "a\tb\n")
        fixtures.write(self.path("test.bpe.tsv"), "c\td\n")
        fixtures.write(self.path("test.tsv"), "e\tf\n")
        self.assertEqual(
            sources.load_pairs(
                f"tsv:{self.path('train.bpe.tsv')}", "test", "en", "de"
            ),
            (["c"], ["d"]),
        )
        # The first plain name warns too.
        fixtures.write(self.path("dev.tsv"), "g\th\n")
        with self.assertLogs("absl", "WARNING") as logs:
            self.assertEqual(
                sources.load_pairs(
                    f"tsv:{self.path('train.bpe.tsv')}", "dev", "en", "de"
                ),
                (["g"], ["h"]),
            )
        self.assertIn(
            f"The dev split is read from {self.path('dev.tsv')}", logs.output[0]
        )

    def test_reverse_direction(self):
        sources_, targets = sources.load_pairs(
            f"text:{self.path('train')}", "train", "de", "en"
        )
        self.assertEqual(sources_[0], "train de 0")
        self.assertEqual(targets[0], "train en 0")

    def test_load_split_is_a_string_dataset(self):
        dataset = sources.load_split(
            f"text:{self.path('train')}", "train", "en", "de"
        )
        self.assertEqual(
            list(dataset.as_numpy_iterator())[1],
            (b"train en 1", b"train de 1"),
        )

    def test_a_tfds_data_dir_with_another_corpus_is_refused(self):
        # evaluate --data=text:... --data_dir=... ignored it without a word.
        spec = f"text:{self.path('train')}"
        for load in (sources.load_pairs, sources.load_split):
            with self.assertRaisesRegex(
                ValueError,
                f"a text corpus does not read; .*data_dir=/tfds, data={spec}$",
            ):
                load(spec, "train", "en", "de", data_dir="/tfds")

    def test_explicit_prefixes(self):
        spec = f"text:train={self.path('valid')},test={self.path('train')}"
        self.assertLen(sources.load_pairs(spec, "train", "en", "de")[0], 2)
        self.assertLen(sources.load_pairs(spec, "test", "en", "de")[0], 3)
        with self.assertRaisesRegex(
            ValueError,
            "The data spec names no dev split; add `dev=...`.*"
            r"Received: splits=\['test', 'train'\]",
        ):
            sources.load_pairs(spec, "dev", "en", "de")

    def test_missing_sibling_split(self):
        os.remove(self.path("newstest2014.en"))
        with self.assertRaisesRegex(
            FileNotFoundError,
            "No test split beside .*train: none of .*test.en.*"
            "newstest2014.en.*text:train=...,test=...",
        ):
            sources.load_pairs(f"text:{self.path('train')}", "test", "en", "de")

    def test_missing_language_file(self):
        with self.assertRaisesRegex(
            FileNotFoundError, "train.fr does not exist"
        ):
            sources.load_pairs(
                f"text:{self.path('train')}", "train", "en", "fr"
            )

    def test_tsv_with_sibling_test_file(self):
        fixtures.write(self.path("train.tsv"), "Hello .\tHallo .\n")
        fixtures.write(self.path("test.tsv"), "Yes .\tJa .\nNo .\tNein .\n")
        spec = f"tsv:{self.path('train.tsv')}"
        self.assertEqual(
            sources.load_pairs(spec, "train", "en", "de"),
            (["Hello ."], ["Hallo ."]),
        )
        self.assertEqual(
            sources.load_pairs(spec, "test", "en", "de")[1], ["Ja .", "Nein ."]
        )

    def test_bad_split_and_languages(self):
        spec = f"text:{self.path('train')}"
        with self.assertRaisesRegex(
            ValueError, "`split` must be one of.*Received: split=validation"
        ):
            sources.load_split(spec, "validation", "en", "de")
        with self.assertRaisesRegex(
            ValueError,
            "must be two different language codes.*"
            "Received: src_lang=en, tgt_lang=en",
        ):
            sources.load_pairs(spec, "train", "en", "en")


class DemoSourceTest(test_case.TestCase):
    def test_real_demo_corpus_either_direction(self):
        english, german = sources.load_pairs("demo", "dev", "en", "de")
        self.assertLen(english, 500)
        self.assertEqual(
            sources.load_pairs("demo", "dev", "de", "en"), (german, english)
        )
        train = sources.load_pairs("demo", "train", "en", "de")
        self.assertLen(train[0], 40000)
        self.assertLen(train[1], 40000)

    def test_demo_rejects_other_languages(self):
        with self.assertRaisesRegex(
            ValueError,
            "The demo corpus is en-de; `tgt_lang` must be one of.*"
            "Received: tgt_lang=fr",
        ):
            sources.load_pairs("demo", "test", "en", "fr")
