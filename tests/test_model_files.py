"""Tests of the files of a training run's model directory: the checked
loading of `.keras` models and the vocabulary lookup."""

import os
import re
import zipfile

import keras

from keras_transformer import model_files
from keras_transformer.training import averaging
from tests.data import fixtures
from tests.test_case import TestCase


class ModelFilesTest(TestCase):
    def test_find_vocab_takes_the_training_runs_vocabulary(self):
        folder = fixtures.tempdir(self)
        # The one training writes, though another `*.model` sorts first.
        for name in ("bpe.model", model_files.VOCAB_FILE, "c.vocab"):
            fixtures.write(os.path.join(folder, name), "x")
        self.assertEqual(
            model_files.find_vocab(folder),
            os.path.join(folder, model_files.VOCAB_FILE),
        )
        # Without it: the one `*.model` file, or an error naming them all.
        os.remove(os.path.join(folder, model_files.VOCAB_FILE))
        self.assertEqual(
            model_files.find_vocab(folder), os.path.join(folder, "bpe.model")
        )
        fixtures.write(os.path.join(folder, "a.model"), "x")
        with self.assertRaisesRegex(
            ValueError,
            "several sentencepiece .*no vocab.model.*pass its path as `vocab` "
            r"\(--vocab\).*"
            "files=a.model, bpe.model$",
        ):
            model_files.find_vocab(folder)
        empty = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            FileNotFoundError,
            re.escape(
                "pass its path as `vocab` (--vocab). "
                f"Received: model_dir={empty}"
            ),
        ):
            model_files.find_vocab(empty)

    def test_load_model_checks(self):
        folder = fixtures.tempdir(self)
        missing = os.path.join(folder, "missing.keras")
        with self.assertRaisesRegex(
            FileNotFoundError, re.escape(f"Received: path={missing}")
        ):
            model_files.load_model(missing)
        other = os.path.join(folder, "other.keras")
        keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save(other)
        with self.assertRaisesRegex(TypeError, re.escape("type=Sequential")):
            model_files.load_model(other)
        with self.assertRaisesRegex(ValueError, "Received: paths=\\[\\]"):
            averaging.average_models([])
        # Keras says "File not found" of a file that is not a zip archive.
        vocab = fixtures.model_path()
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "The file is not a `.keras` model (a zip archive), e.g. a "
                "vocabulary or a truncated copy; pass the `.keras` file "
                f"written by training. Received: path={vocab}"
            ),
        ):
            model_files.load_model(vocab)
        with self.assertRaisesRegex(
            IsADirectoryError, re.escape("not a `.keras` file; pass the")
        ):
            model_files.load_model(folder)

    def test_damaged_checkpoint_is_named_not_file_not_found(self):
        # Keras said "File not found" of a truncated archive, and a member
        # with changed bytes gave a BadZipFile traceback.
        folder = fixtures.tempdir(self)
        path = os.path.join(folder, "ckpt-5.keras")
        keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save(path)
        with open(path, "rb") as file:
            data = file.read()
        changed = bytearray(data)
        changed[len(data) // 2] ^= 0xFF
        for damaged in (data[: len(data) // 2], data[:10], bytes(changed)):
            with open(path, "wb") as file:
                file.write(damaged)
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "The `.keras` file is damaged (e.g. truncated or "
                    "corrupted): it is not a whole Keras zip archive. Use "
                    "another checkpoint of the run, or rerun training from "
                    f"the last good one. Received: path={path}"
                ),
            ):
                model_files.load_model(path)
        # Checkpoint averaging loads through it too.
        with self.assertRaisesRegex(ValueError, "is damaged.*ckpt-5.keras"):
            averaging.average_models([path])

    def test_archive_without_a_members_file_is_named(self):
        # A whole zip archive missing config.json gave a KeyError traceback;
        # one missing the weights, a message naming no file.
        folder = fixtures.tempdir(self)
        path = os.path.join(folder, "model.keras")
        keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save(path)
        with zipfile.ZipFile(path) as archive:
            members = {name: archive.read(name) for name in archive.namelist()}
        for drop, message in (
            ("config.json", "The `.keras` file is damaged"),
            (
                "model.weights.h5",
                "Keras cannot load the `.keras` file (Expected",
            ),
        ):
            broken = os.path.join(folder, f"without-{drop}.keras")
            with zipfile.ZipFile(broken, "w") as archive:
                for name, data in members.items():
                    if name != drop:
                        archive.writestr(name, data)
            with self.assertRaisesRegex(
                ValueError, re.escape(message) + f".*Received: path={broken}$"
            ):
                model_files.load_model(broken)
        broken = os.path.join(folder, "bad-json.keras")
        with zipfile.ZipFile(broken, "w") as archive:
            for name, data in members.items():
                archive.writestr(
                    name, b"{not json" if name == "config.json" else data
                )
        with self.assertRaisesRegex(ValueError, "is damaged.*bad-json.keras$"):
            model_files.load_model(broken)
