"""Tests of the TFDS source, under `tfds.testing.mock_data` (no download)."""

import os

import tensorflow as tf
import tensorflow_datasets as tfds
from absl.testing import parameterized

from keras_transformer.data import sources, tfds_source
from tests import test_case
from tests.data import fixtures

_EXAMPLES = {
    "train": {"en": ["Hello .", "Thank you ."], "de": ["Hallo .", "Danke ."]},
    "validation": {"en": ["Good night ."], "de": ["Gute Nacht ."]},
    "test": {"en": ["Yes ."], "de": ["Ja ."]},
}


def _fake_as_dataset(builder, split, decoders=None, read_config=None, **kw):
    """Stands in for the prepared files: known text per TFDS split."""
    del builder, decoders, read_config, kw  # Unused.
    return tf.data.Dataset.from_tensor_slices(_EXAMPLES[split])


def _prepare(data_dir, splits, examples=_EXAMPLES, shards=1):
    """Writes wmt14_translate/de-en into `data_dir` as TFDS prepares it
    (TFRecord files and their metadata), with `splits` of `examples`, each
    in `shards` files of consecutive examples."""
    builder = tfds.builder("wmt14_translate/de-en", data_dir=data_dir)
    features = builder.info.features
    os.makedirs(builder.data_dir)
    for split in splits:
        pairs = list(zip(examples[split]["en"], examples[split]["de"]))
        size = -(-len(pairs) // shards)
        for shard in range(shards):
            name = (
                f"wmt14_translate-{split}.tfrecord-{shard:05d}-of-{shards:05d}"
            )
            path = os.path.join(builder.data_dir, name)
            with tf.io.TFRecordWriter(path) as writer:
                for en, de in pairs[shard * size : (shard + 1) * size]:
                    writer.write(
                        features.serialize_example({"en": en, "de": de})
                    )
    tfds.folder_dataset.write_metadata(
        data_dir=builder.data_dir,
        features=features,
        split_infos=None,  # Computed from the files.
        filename_template="{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
    )


class TfdsSourceTest(test_case.TestCase):
    @parameterized.named_parameters(
        ("train_en_de", "train", "en", "de", _EXAMPLES["train"]),
        ("dev_is_validation", "dev", "en", "de", _EXAMPLES["validation"]),
        ("test_de_en", "test", "de", "en", _EXAMPLES["test"]),
    )
    def test_split_mapping_and_direction(self, split, src, tgt, expected):
        with tfds.testing.mock_data(as_dataset_fn=_fake_as_dataset):
            dataset = sources.load_split(
                "tfds:wmt14_translate/de-en", split, src, tgt, data_dir="/x"
            )
            pairs = list(dataset.as_numpy_iterator())
        self.assertEqual(
            pairs,
            [
                (source.encode(), target.encode())
                for source, target in zip(expected[src], expected[tgt])
            ],
        )

    @parameterized.parameters(("en", "fr"), ("fr", "en"))
    def test_random_mock_data_both_directions_of_fr_en(self, src, tgt):
        with tfds.testing.mock_data(num_examples=7):
            forward = sources.load_pairs(
                "tfds:wmt14_translate/fr-en", "train", src, tgt
            )
            backward = sources.load_pairs(
                "tfds:wmt14_translate/fr-en", "train", tgt, src
            )
        self.assertLen(forward[0], 7)
        self.assertEqual(forward, (backward[1], backward[0]))

    def test_another_translation_dataset_and_one_that_is_not(self):
        with tfds.testing.mock_data(num_examples=3):
            sources_, targets = sources.load_pairs(
                "tfds:ted_hrlr_translate/pt_to_en", "dev", "en", "pt"
            )
        self.assertEqual((len(sources_), len(targets)), (3, 3))
        with self.assertRaisesRegex(
            ValueError,
            "^glue/cola is not a translation dataset .*name=glue/cola$",
        ):
            tfds_source.load_tfds_split("glue/cola", "train", "en", "de")
        with self.assertRaisesRegex(
            ValueError, "^mnist has no configs, so it is no translation dataset"
        ):
            tfds_source.load_tfds_split("mnist/x", "train", "en", "de")

    def test_language_not_in_the_pair(self):
        with (
            tfds.testing.mock_data(num_examples=1),
            self.assertRaisesRegex(
                ValueError,
                r"`tgt_lang` must be one of the languages of "
                r"wmt14_translate/de-en, \['de', 'en'\].*Received: tgt_lang=fr",
            ),
        ):
            tfds_source.load_tfds_split(
                "wmt14_translate/de-en", "train", "en", "fr"
            )

    def test_unknown_split(self):
        with self.assertRaisesRegex(
            ValueError, "`split` must be one of.*Received: split=valid"
        ):
            tfds_source.load_tfds_split(
                "wmt14_translate/de-en", "valid", "en", "de"
            )

    def test_unknown_dataset_is_one_short_message(self):
        # TFDS's own error lists all ~450 datasets; nothing is downloaded.
        data_dir = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            ValueError,
            "^Unknown TFDS dataset 'wmt14/de-en'; use a translation dataset "
            "such as wmt14_translate/de-en or wmt14_translate/fr-en. "
            "Received: name=wmt14/de-en$",
        ):
            tfds_source.load_tfds_split(
                "wmt14/de-en", "train", "en", "de", data_dir
            )
        self.assertEqual(os.listdir(data_dir), [])

    def test_unknown_config_names_the_configs(self):
        # TFDS's own message promises close matches and lists none.
        data_dir = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            ValueError,
            r"^wmt14_translate has no config 'de-fr'; pick one of \['cs-en', "
            r"'de-en', 'fr-en', 'hi-en', 'ru-en'\] \(the language pair\)\. "
            "Received: name=wmt14_translate/de-fr$",
        ):
            tfds_source.load_tfds_split(
                "wmt14_translate/de-fr", "train", "de", "fr", data_dir
            )
        self.assertEqual(os.listdir(data_dir), [])

    def test_prepared_data_is_read_and_a_split_it_lacks_is_named(self):
        # Real files, not mocked: the dataset prepared without validation.
        data_dir = fixtures.tempdir(self)
        _prepare(data_dir, ["train", "test"])
        spec = "tfds:wmt14_translate/de-en"
        self.assertEqual(
            sources.load_pairs(spec, "train", "de", "en", data_dir),
            (_EXAMPLES["train"]["de"], _EXAMPLES["train"]["en"]),
        )
        with self.assertRaisesRegex(
            sources.MissingSplitError,
            f"^The TFDS dataset wmt14_translate/de-en in {data_dir} has no "
            r"'validation' split \(the dev split\); "
            r"it has \['test', 'train'\]\.",
        ):
            sources.load_pairs(spec, "dev", "en", "de", data_dir)

    def test_the_files_of_a_split_are_read_in_their_order(self):
        # 24 pairs in 8 files: their stored order, file after file, every
        # time (not the files shuffled, as TFDS's `shuffle_files` does).
        english = [f"Sentence {index} ." for index in range(24)]
        german = [f"Satz {index} ." for index in range(24)]
        data_dir = fixtures.tempdir(self)
        _prepare(
            data_dir, ["train"], {"train": {"en": english, "de": german}}, 8
        )
        for _ in range(2):
            self.assertEqual(
                sources.load_pairs(
                    "tfds:wmt14_translate/de-en", "train", "en", "de", data_dir
                ),
                (english, german),
            )

    def test_unprepared_data_tells_how_to_prepare_it(self):
        # The real builder, not mocked, on an empty data_dir: no download.
        data_dir = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            FileNotFoundError,
            f"wmt14_translate/de-en is not prepared in {data_dir}.*\n"
            f"  tfds build wmt14_translate/de-en --data_dir={data_dir}\n"
            r".*download_and_prepare\(\).*Received: name=",
        ):
            tfds_source.load_tfds_split(
                "wmt14_translate/de-en", "test", "en", "de", data_dir
            )

    def test_damaged_prepared_data_fails_in_one_line_that_says_to_copy_it_again(
        self,
    ):
        # An interrupted preparation or copy, each as TFDS would leave it:
        # TFDS's and TensorFlow's own errors were tracebacks (a KeyError, an
        # AssertionError, a DataLossError in the middle of reading).
        spec = "tfds:wmt14_translate/de-en"
        files = "wmt14_translate/de-en/1.0.0"

        def damage(edit):
            data_dir = fixtures.tempdir(self)
            _prepare(data_dir, ["train", "validation"])
            edit(os.path.join(data_dir, files))
            return data_dir

        def rewrite(name, cut=None, text=None):
            def edit(folder):
                (path,) = tf.io.gfile.glob(os.path.join(folder, name))
                with open(path, "rb") as f:
                    data = f.read()
                with open(path, "wb") as f:
                    f.write(text if text is not None else data[:cut])

            return edit

        def remove(pattern):
            return lambda folder: [
                os.remove(path)
                for path in tf.io.gfile.glob(os.path.join(folder, pattern))
            ]

        version_only = fixtures.tempdir(self)
        os.makedirs(os.path.join(version_only, files))
        for label, data_dir, error, message in (
            (
                "empty version folder",
                version_only,
                FileNotFoundError,
                "is not prepared in .* exists without the dataset_info.json",
            ),
            (
                "shard missing",
                damage(remove("*-validation.tfrecord*")),
                FileNotFoundError,
                r"is incomplete: 1 of the 1 files of its 'validation' split "
                "are missing",
            ),
            (
                "metadata emptied",
                damage(rewrite("dataset_info.json", text=b"{}")),
                ValueError,
                "cannot be loaded: .*copy or prepare the dataset again",
            ),
            (
                "metadata cut",
                damage(rewrite("dataset_info.json", cut=10)),
                ValueError,
                "cannot be loaded: .*Failed to load JSON.*copy or prepare",
            ),
            (
                "shard cut",
                damage(rewrite("*-validation.tfrecord*", cut=20)),
                ValueError,
                "^Reading the dev split of the TFDS dataset "
                "wmt14_translate/de-en in .* failed: truncated record at 0' "
                r"failed with Read less bytes than requested\. Damaged: "
                r"\S*/wmt14_translate-validation\.tfrecord-00000-of-00001 "
                r"\(a record cut short or damaged\)\. "
                "Its prepared files are damaged",
            ),
            (
                # TFDS's own length check fails: the file reads cleanly.
                "shard cut at a record boundary",
                damage(rewrite("*-validation.tfrecord*", cut=0)),
                ValueError,
                "^Reading the dev split .* failed: Input dataset was expected "
                r"to contain 1 element but contained only 0 elements\. "
                r"Damaged: \S*/wmt14_translate-validation\."
                r"tfrecord-00000-of-00001 \(0 of its 1 examples\)\. "
                "Its prepared files are damaged",
            ),
        ):
            with (
                self.subTest(label),
                self.assertRaisesRegex(error, message) as caught,
            ):
                sources.load_pairs(spec, "dev", "en", "de", data_dir)
            self.assertNotIn(
                "\n", str(caught.exception).split(" On a machine")[0]
            )
        # The same message gives TFDS's reason for a name it cannot load.
        with self.assertRaisesRegex(
            ValueError,
            "cannot be loaded: .*only: 1.0.0. If that is not the name",
        ):
            sources.load_pairs(f"{spec}:9.9.9", "dev", "en", "de", version_only)


class TfdsLanguagesTest(test_case.TestCase):
    def test_one_language_on_both_sides_is_refused(self):
        # Called directly (not through `sources`), en-en would read the
        # English side as its own translation.
        with (
            tfds.testing.mock_data(num_examples=1),
            self.assertRaisesRegex(
                ValueError,
                "`src_lang` and `tgt_lang` must differ.*"
                "Received: src_lang=en, tgt_lang=en",
            ),
        ):
            tfds_source.load_tfds_split(
                "wmt14_translate/de-en", "train", "en", "en"
            )
