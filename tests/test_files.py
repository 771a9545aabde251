"""Tests of paths on any filesystem (`keras_transformer.files`)."""

import os
import uuid

import tensorflow as tf

from keras_transformer import files
from tests.data import fixtures
from tests.test_case import TestCase


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class FilesTest(TestCase):
    def test_remote_paths_are_urls(self):
        self.assertTrue(files.is_remote("gs://bucket/run"))
        self.assertTrue(files.is_remote("ram://run/model.keras"))
        # Local, but only tf.io.gfile opens it.
        self.assertTrue(files.is_remote("file:///tmp/run"))
        self.assertFalse(files.is_remote("/tmp/run"))
        self.assertFalse(files.is_remote("runs/a:b"))
        self.assertEqual(files.absolute("gs://b/c/../run"), "gs://b/c/../run")
        self.assertEqual(files.absolute("/tmp/c/../run"), "/tmp/run")

    def test_a_local_path_is_written_as_it_is(self):
        path = os.path.join(fixtures.tempdir(self), "file")
        with files.local_staging(path) as local:
            self.assertEqual(local, path)

    def test_a_remote_file_is_written_through_a_local_one(self):
        path = f"ram://{uuid.uuid4().hex}/file.txt"
        with files.local_staging(path) as local:
            self.assertFalse(files.is_remote(local))
            with open(local, "w") as file:
                file.write("text")
        self.assertFalse(os.path.exists(local))  # The local file is temporary.
        self.assertEqual(tf.io.gfile.GFile(path).read(), "text")

    def test_a_failed_block_writes_nothing(self):
        path = f"ram://{uuid.uuid4().hex}/file.txt"
        with (
            self.assertRaisesRegex(OSError, "disk full"),
            files.local_staging(path) as local,
        ):
            with open(local, "w") as file:
                file.write("half")
            raise OSError("disk full")
        self.assertFalse(tf.io.gfile.exists(path))

    def test_written_aside_replaces_the_file_only_when_the_block_succeeds(self):
        folder = fixtures.tempdir(self)
        path = fixtures.write(os.path.join(folder, "model.keras"), "old")
        with (
            self.assertRaisesRegex(OSError, "disk full"),
            files.written_aside(path) as partial,
        ):
            self.assertEqual(
                partial, os.path.join(folder, "partial-model.keras")
            )
            fixtures.write(partial, "half")
            raise OSError("disk full")
        # The earlier file, and nothing beside it.
        self.assertEqual(os.listdir(folder), ["model.keras"])
        self.assertEqual(read(path), "old")
        with files.written_aside(path) as partial:
            fixtures.write(partial, "new")
            self.assertEqual(read(path), "old")  # Until the block ends.
        self.assertEqual(os.listdir(folder), ["model.keras"])
        self.assertEqual(read(path), "new")
        # Files found by their suffix get a partial name without it.
        vocab = os.path.join(folder, "vocab.model")
        with files.written_aside(vocab, keep_suffix=False) as partial:
            self.assertEqual(partial, vocab + ".partial")
            fixtures.write(partial, "pieces")
        self.assertEqual(read(vocab), "pieces")
