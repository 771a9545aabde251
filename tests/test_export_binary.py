"""Tests of the export command `export/export_model.py`
(`python -m keras_transformer.export_model`)."""

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from unittest import mock

import pytest
import tensorflow as tf
from absl import flags as absl_flags

from keras_transformer import export_model, inference, serving, warmup
from keras_transformer.data.tokenizer import train_subword_vocab
from keras_transformer.decoding.translator import Translator
from keras_transformer.training import run_checks
from tests.data import fixtures
from tests.decoding.test_translator import tiny_model
from tests.test_case import TestCase

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "export", "export_model.py")
SENTENCES = ["The cat sleeps on the sofa.", "I like green tea."]


def export(**overrides):
    """Calls the command's `export` with default flag values."""
    arguments = {
        "model_dir": None,
        "checkpoints": [],
        "vocab": None,
        "export_dir": "/nonexistent/export",
        "model_name": "m",
        "version": 1,
        "beam_size": 4,
        "alpha": 0.6,
        "length_offset": 50,
        "overwrite": False,
    }
    arguments.update(overrides)
    return export_model.export(**arguments)


def run_binary(test, *flags, as_module=False):
    """Runs the command in a subprocess, as the repository's script or
    (`as_module`) as `python -m keras_transformer.export_model`, the form
    an installed package has; returns the finished process."""
    command = (
        ["-m", "keras_transformer.export_model"] if as_module else [BINARY]
    )
    return subprocess.run(
        [sys.executable, *command, *flags],
        check=False,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        timeout=120,
        cwd=fixtures.tempdir(test),
    )


def write_model_dir(test, seed=7):
    """A training output folder: model.keras and the vocabulary."""
    model_dir = fixtures.tempdir(test)
    model = tiny_model(seed)
    model.save(os.path.join(model_dir, "model.keras"))
    shutil.copy(fixtures.model_path(), os.path.join(model_dir, "bpe.model"))
    return model_dir, model


class ExportBinaryTest(TestCase):
    @pytest.mark.slow
    def test_command_writes_a_tf_serving_version_that_translates(self):
        model_dir, model = write_model_dir(self)
        # The run's languages, which the export records for `evaluate`.
        fixtures.write(
            os.path.join(model_dir, run_checks.SETTINGS_FILE),
            json.dumps({"src_lang": "en", "tgt_lang": "fr", "data": "demo"}),
        )
        export_dir = fixtures.tempdir(self)
        warmup_file = fixtures.write(
            os.path.join(model_dir, "warmup.txt"), "\n".join(SENTENCES) + "\n"
        )
        result = run_binary(
            self,
            f"--model_dir={model_dir}",
            f"--export_dir={export_dir}",
            "--model_name=en_de",
            "--version=2",
            "--length_offset=4",
            f"--warmup_file={warmup_file}",
            "--server_batching",
        )
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        path = os.path.join(export_dir, "en_de", "2")
        self.assertIn(f"Exported {path}", result.stdout)
        self.assertEqual(os.listdir(os.path.join(export_dir, "en_de")), ["2"])
        self.assertTrue(os.path.exists(os.path.join(path, "saved_model.pb")))
        # Bound tf.functions hold their module weakly: keep a reference.
        translator = Translator(model, fixtures.tokenizer(), length_offset=4)
        expected = translator.translate(tf.constant(SENTENCES))
        loaded = serving.load_exported(path)
        # --server_batching: what TF Serving's request batching can serve.
        self.assertCountEqual(
            loaded.signatures.keys(), serving.BATCHED_SIGNATURES
        )
        served = loaded.signatures["serving_default"](
            inputs=tf.constant(SENTENCES)
        )
        self.assertAllEqual(served["outputs"], expected["outputs"])
        self.assertAllClose(served["scores"], expected["scores"])
        # TF Serving's warmup requests, of the --warmup_file sentences.
        requests = dict(warmup.read_warmup_requests(path))
        self.assertCountEqual(requests, loaded.signatures.keys())
        self.assertEqual(
            requests["serving_default"]["inputs"].tolist(),
            [sentence.encode() for sentence in SENTENCES],
        )
        self.assertEqual(
            inference.model_languages(os.path.join(export_dir, "en_de")),
            (
                {"src_lang": "en", "tgt_lang": "fr"},
                os.path.join(path, serving.LANGUAGES_FILE),
            ),
        )

    def test_warmup_file_is_checked_before_loading(self):
        export_dir = fixtures.tempdir(self)
        missing = os.path.join(export_dir, "warmup.txt")
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "--warmup_file gives the sentences of the warmup requests, "
                "which --nowarmup turns off; drop one of them. Received: "
                f"warmup_file={missing}, warmup=False"
            ),
        ):
            export(
                checkpoints=["missing.keras"],
                export_dir=export_dir,
                warmup=False,
                warmup_file=missing,
            )
        with self.assertRaisesRegex(
            FileNotFoundError,
            re.escape(
                f"The --warmup_file file {missing} does not exist. Pass a text "
                "file of sentences, one per line. "
                f"Received: warmup_file={missing}"
            ),
        ):
            export(
                checkpoints=["missing.keras"],
                export_dir=export_dir,
                warmup_file=missing,
            )

    def test_export_needs_a_model(self):
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "Pass --model_dir (holding model.keras) or --checkpoint PATH. "
                "Received: model_dir=None, checkpoint=[]"
            ),
        ):
            export()

    def test_export_needs_a_vocabulary(self):
        with self.assertRaisesRegex(
            ValueError, re.escape("Received: vocab=None, model_dir=None")
        ):
            export(checkpoints=["a.keras"])
        empty = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            FileNotFoundError, re.escape(f"Received: model_dir={empty}")
        ):
            export(model_dir=empty)

    def test_vocabulary_of_the_checkpoints_run_is_the_default(self):
        # Checkpoints of one run exported with --model_dir of another took
        # that run's vocabulary without a word.
        default_vocab = export_model.default_vocab
        root = fixtures.tempdir(self)
        runs = {}
        for name in ("a", "b"):
            run_dir = os.path.join(root, name)
            os.makedirs(os.path.join(run_dir, "checkpoints"))
            vocab = os.path.join(run_dir, f"{name}.model")
            shutil.copy(fixtures.model_path(), vocab)
            runs[name] = (run_dir, vocab)
        checkpoint = os.path.join(runs["a"][0], "checkpoints", "ckpt-2.keras")
        other = os.path.join(runs["b"][0], "checkpoints", "ckpt-2.keras")
        self.assertEqual(default_vocab(None, [checkpoint]), runs["a"][1])
        self.assertEqual(
            default_vocab(runs["a"][0], [checkpoint]), runs["a"][1]
        )
        self.assertEqual(default_vocab(runs["b"][0], []), runs["b"][1])
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "another vocabulary than --model_dir; drop --model_dir (the "
                "checkpoint's own is then used), or pass --vocab PATH of its "
                f"vocabulary. Received: checkpoint={checkpoint} (beside "
                f"{runs['a'][1]}), model_dir vocabulary={runs['b'][1]}"
            ),
        ):
            default_vocab(runs["b"][0], [checkpoint])
        with self.assertRaisesRegex(
            ValueError, "different vocabularies, so they are of different runs"
        ):
            default_vocab(None, [checkpoint, other])

    def test_missing_model_file_is_named(self):
        model_dir = fixtures.tempdir(self)
        shutil.copy(fixtures.model_path(), os.path.join(model_dir, "v.model"))
        missing = os.path.join(model_dir, "model.keras")
        with self.assertRaisesRegex(
            FileNotFoundError, re.escape(f"Received: path={missing}")
        ):
            export(model_dir=model_dir)

    def test_existing_version_is_refused_before_loading(self):
        model_dir = fixtures.tempdir(self)
        os.makedirs(os.path.join(model_dir, "m", "1"))
        with self.assertRaisesRegex(
            FileExistsError,
            re.escape(
                "choose a new `version` or pass overwrite=True (--overwrite). "
                f"Received: path={os.path.join(model_dir, 'm', '1')}"
            ),
        ):
            export(
                checkpoints=["missing.keras"],
                vocab="v.model",
                export_dir=model_dir,
            )

    def test_export_base_that_is_a_file_is_refused_before_loading(self):
        folder = fixtures.tempdir(self)
        afile = fixtures.write(os.path.join(folder, "afile"), "x")
        with self.assertRaisesRegex(
            NotADirectoryError,
            re.escape(
                f"{afile} is a file, so the export directory cannot be created "
                "under it; pass a directory as the export base (--export_dir). "
                f"Received: path={os.path.join(afile, 'm', '1')}"
            ),
        ):
            # The checkpoint does not exist: loading it would fail otherwise.
            export(
                checkpoints=["missing.keras"], vocab="v.model", export_dir=afile
            )

    def test_export_base_that_cannot_be_written_is_refused_before_loading(self):
        # The nearest directory that exists is checked: the export creates
        # the rest. `os.access` answers as for a user without write
        # permission there (root, which the tests may run as, writes
        # whatever the file modes).
        folder = fixtures.tempdir(self)
        base = os.path.join(folder, "exports")
        with (
            mock.patch(
                "os.access", side_effect=lambda path, mode: path != folder
            ),
            self.assertRaisesRegex(
                PermissionError,
                re.escape(
                    f"{folder} cannot be written, so the export directory "
                    "cannot be created in it; pass a writable export base "
                    "(--export_dir). Received: "
                    f"path={os.path.join(base, 'm', '1')}"
                ),
            ),
        ):
            export(
                checkpoints=["missing.keras"], vocab="v.model", export_dir=base
            )
        self.assertFalse(os.path.exists(base))

    def test_missing_model_dir_is_said_not_to_exist(self):
        missing = os.path.join(fixtures.tempdir(self), "run")
        with self.assertRaisesRegex(
            FileNotFoundError,
            re.escape(
                "The --model_dir directory does not exist; pass the directory "
                f"that training wrote. Received: model_dir={missing}"
            ),
        ):
            export(model_dir=missing)

    def test_an_unfinished_run_names_its_newest_checkpoint(self):
        # Training, or stopped: checkpoints and a vocabulary, no model.keras.
        run = fixtures.tempdir(self)
        shutil.copy(fixtures.model_path(), os.path.join(run, "vocab.model"))
        os.makedirs(os.path.join(run, "checkpoints"))
        for step in (8, 10):
            fixtures.write(
                os.path.join(run, "checkpoints", f"ckpt-{step}.keras"), ""
            )
        newest = os.path.join(run, "checkpoints", "ckpt-10.keras")
        hint = re.escape(
            f"Its training run has not finished: use its newest checkpoint, "
            f"{newest} (step 10), or average its checkpoints"
        )
        with self.assertRaisesRegex(
            FileNotFoundError,
            f"^--model_dir holds no model.keras. {hint}.*--checkpoint",
        ):
            export(model_dir=run)
        with self.assertRaisesRegex(
            FileNotFoundError, f"holds no model.*{hint}"
        ):
            inference.load_translator(run)

    def test_missing_checkpoint_is_named_before_any_loading(self):
        folder = fixtures.tempdir(self)
        # A zip archive but not a model: loading it first would fail with
        # another error.
        first = os.path.join(folder, "first.keras")
        with zipfile.ZipFile(first, "w") as archive:
            archive.writestr("config.json", "{}")
        missing = os.path.join(folder, "ckpt-9.keras")
        with self.assertRaisesRegex(
            FileNotFoundError,
            re.escape(
                "No model file at this path; pass the `.keras` file written "
                f"by training. Received: path={missing}"
            ),
        ):
            export(checkpoints=[first, missing], vocab=fixtures.model_path())

    def test_checkpoint_that_is_not_a_keras_file_is_named(self):
        # Keras said "File not found" of an existing file that is not a zip,
        # and of a directory that it is a legacy SavedModel.
        folder = fixtures.tempdir(self)
        vocab = fixtures.model_path()
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "The file is not a `.keras` model (a zip archive), e.g. a "
                "vocabulary or a truncated copy; pass the `.keras` file "
                f"written by training. Received: path={vocab}"
            ),
        ):
            export(checkpoints=[vocab], vocab=vocab)
        with self.assertRaisesRegex(
            IsADirectoryError,
            re.escape(
                "The model path is a directory, not a `.keras` file; pass the "
                "`.keras` file written by training (e.g. "
                f"<model_dir>/model.keras). Received: path={folder}"
            ),
        ):
            export(checkpoints=[folder], vocab=vocab)

    def test_overwrite_never_deletes_an_input(self):
        # A training directory named like a version (runs/1) exported onto
        # itself: --overwrite replaced the version directory, the run with it.
        model_dir, _ = write_model_dir(self)
        export_dir = os.path.dirname(model_dir)
        name, version = os.path.basename(model_dir), 1
        run_dir = os.path.join(model_dir, "1")
        os.makedirs(run_dir)
        for file in ("model.keras", "bpe.model"):
            os.rename(
                os.path.join(model_dir, file), os.path.join(run_dir, file)
            )
        path = serving.serving_path(export_dir, name, version)
        onto_it = dict(
            export_dir=export_dir,
            model_name=name,
            version=version,
            overwrite=True,
        )
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "--overwrite would delete an input of the export, which is "
                "inside the version directory it replaces; choose another "
                "--export_dir, --model_name or --version. "
                f"Received: path={path}, input={run_dir}"
            ),
        ):
            export(model_dir=run_dir, **onto_it)
        self.assertCountEqual(os.listdir(run_dir), ["model.keras", "bpe.model"])
        # Checkpoint files inside it too, whatever the model directory.
        checkpoint = os.path.join(run_dir, "model.keras")
        vocab = os.path.join(fixtures.tempdir(self), "bpe.model")
        shutil.copy(os.path.join(run_dir, "bpe.model"), vocab)
        with self.assertRaisesRegex(
            ValueError, re.escape(f"Received: path={path}, input={checkpoint}")
        ):
            export(
                model_dir=fixtures.tempdir(self),
                checkpoints=[checkpoint],
                vocab=vocab,
                **onto_it,
            )
        self.assertCountEqual(os.listdir(run_dir), ["model.keras", "bpe.model"])
        # A file where the version goes fails before loading, not in
        # TensorFlow's rmtree after it.
        afile = fixtures.write(os.path.join(model_dir, "2"), "x")
        with self.assertRaisesRegex(
            FileExistsError,
            re.escape(
                "A file has the name of the export directory, and --overwrite "
                "replaces only a version directory; move the file away or "
                f"choose a new `version`. Received: path={afile}"
            ),
        ):
            export(
                checkpoints=["missing.keras"],
                vocab="v.model",
                export_dir=export_dir,
                model_name=name,
                version=2,
                overwrite=True,
            )

    def test_beam_wider_than_the_vocabulary_is_refused(self):
        model_dir, _ = write_model_dir(self)
        export_dir = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "`beam_size` must be at most the vocabulary size: beam search "
                "takes the top K of the V next tokens. Lower `beam_size`. "
                f"Received: beam_size={fixtures.VOCAB_SIZE + 1}, "
                f"vocab_size={fixtures.VOCAB_SIZE}"
            ),
        ):
            export(
                model_dir=model_dir,
                export_dir=export_dir,
                beam_size=fixtures.VOCAB_SIZE + 1,
            )
        self.assertEqual(os.listdir(export_dir), [])

    def test_bad_vocabulary_file_is_named(self):
        folder = fixtures.tempdir(self)
        missing = os.path.join(folder, "bpe.model")
        with self.assertRaisesRegex(
            FileNotFoundError,
            re.escape(
                "No vocabulary file at this path; pass --vocab PATH of the "
                "sentencepiece `*.model` file of training. "
                f"Received: vocab={missing}"
            ),
        ):
            export(checkpoints=["a.keras"], vocab=missing)
        text = fixtures.write(os.path.join(folder, "bpe.vocab"), "a\t0\n")
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "not a sentencepiece model; pass the `.model` file written by "
                "training (not the `.vocab` text file). "
                f"Received: path={text}"
            ),
        ):
            export(checkpoints=["a.keras"], vocab=text)

    @pytest.mark.slow
    def test_user_errors_are_one_line_without_traceback(self):
        export_dir = fixtures.tempdir(self)
        os.makedirs(os.path.join(export_dir, "m", "1"))
        missing = os.path.join(export_dir, "no_such_run")
        model_dir, _ = write_model_dir(self)
        wide = fixtures.VOCAB_SIZE + 1
        for index, (flags, message) in enumerate(
            (
                (
                    [f"--model_dir={missing}"],
                    (
                        "The --model_dir directory does not exist; pass the "
                        "directory that training wrote. "
                        f"Received: model_dir={missing}"
                    ),
                ),
                (
                    [
                        f"--model_dir={export_dir}",
                        "--model_name=m",
                        "--version=1",
                    ],
                    (
                        "The export directory already exists; choose a new "
                        "`version` or pass overwrite=True (--overwrite). "
                        f"Received: path={os.path.join(export_dir, 'm', '1')}"
                    ),
                ),
                (
                    [f"--model_dir={model_dir}", f"--beam_size={wide}"],
                    (
                        "`beam_size` must be at most the vocabulary size: beam "
                        "search takes the top K of the V next tokens. Lower "
                        f"`beam_size`. Received: beam_size={wide}, "
                        f"vocab_size={fixtures.VOCAB_SIZE}"
                    ),
                ),
            )
        ):
            result = run_binary(
                self, f"--export_dir={export_dir}", *flags, as_module=index == 0
            )
            self.assertEqual(result.returncode, 1, result.stderr[-3000:])
            lines = result.stderr.splitlines()
            self.assertEqual(lines[-1], f"export_model.py: error: {message}")
            self.assertLen(
                [line for line in lines if line.startswith("export_model.py")],
                1,
            )
            self.assertNotIn("Traceback", result.stderr)
            self.assertEqual(result.stdout, "")


def write_run(test, settings=False):
    """A training directory with a vocab.model and a model.keras that is
    a zip archive (never loaded: the tests mock the loading); its path."""
    run_dir = fixtures.tempdir(test)
    shutil.copy(fixtures.model_path(), os.path.join(run_dir, "vocab.model"))
    with zipfile.ZipFile(os.path.join(run_dir, "model.keras"), "w") as archive:
        archive.writestr("config.json", "{}")
    if settings:
        fixtures.write(os.path.join(run_dir, "settings.json"), "{}")
    return run_dir


@contextlib.contextmanager
def no_loading():
    """Mocks the model loading and the writing of `export`; yields the
    mock of `serving.export_translator`."""
    with (
        mock.patch.object(export_model.averaging, "average_models"),
        mock.patch.object(export_model.translator_lib, "Translator"),
        mock.patch.object(
            serving, "export_translator", return_value="written"
        ) as export_translator,
    ):
        yield export_translator


class ExportFunctionTest(TestCase):
    def test_main_passes_every_flag_to_export(self):
        flag_values = absl_flags.FlagValues()
        export_model.define_flags(flag_values)
        flag_values(
            [
                "export_model",
                "--model_dir=/r",
                "--checkpoint=a.keras,b.keras",
                "--vocab=v.model",
                "--export_dir=/e",
                "--model_name=n",
                "--version=7",
                "--beam_size=3",
                "--alpha=0.8",
                "--length_offset=9",
                "--overwrite",
                "--jit_compile",
                "--parallel_searches=3",
                "--nowarmup",
                "--warmup_file=w.txt",
                "--server_batching",
            ]
        )
        with (
            mock.patch.object(export_model, "FLAGS", flag_values),
            mock.patch.object(
                export_model, "export", return_value="/e/n/7"
            ) as export_fn,
            contextlib.redirect_stdout(io.StringIO()) as stdout,
        ):
            self.assertEqual(export_model.main(["export_model"]), 0)
        export_fn.assert_called_once_with(
            model_dir="/r",
            checkpoints=["a.keras", "b.keras"],
            vocab="v.model",
            export_dir="/e",
            model_name="n",
            version=7,
            beam_size=3,
            alpha=0.8,
            length_offset=9,
            overwrite=True,
            jit_compile=True,
            parallel_searches=3,
            warmup=False,
            warmup_file="w.txt",
            server_batching=True,
        )
        self.assertEqual(stdout.getvalue(), "Exported /e/n/7\n")

    def test_nowarmup_writes_no_warmup_requests(self):
        run_dir = write_run(self)
        export_dir = fixtures.tempdir(self)
        for with_warmup, sentences in (
            (True, serving.WARMUP_SENTENCES),
            (False, None),
        ):
            with no_loading() as export_translator:
                export(
                    model_dir=run_dir, export_dir=export_dir, warmup=with_warmup
                )
            self.assertEqual(
                export_translator.call_args.kwargs["warmup_sentences"],
                sentences,
            )

    def test_a_finished_run_that_keeps_its_checkpoints_exports_its_model(self):
        # Training leaves checkpoints/ beside model.keras: the hint of an
        # unfinished run is only for a directory without model.keras.
        run_dir = write_run(self)
        os.makedirs(os.path.join(run_dir, "checkpoints"))
        fixtures.write(os.path.join(run_dir, "checkpoints", "ckpt-8.keras"), "")
        with no_loading() as export_translator:
            export(model_dir=run_dir, export_dir=fixtures.tempdir(self))
        self.assertEqual(export_translator.call_count, 1)

    def test_a_vocab_of_another_run_is_refused_before_loading(self):
        # The run's checkpoint with --vocab of another run of the same size
        # exported a model that translates to garbage, without a word.
        run_dir = write_run(self, settings=True)
        other = train_subword_vocab(
            [sentence[::-1] for sentence in fixtures.sentences()],
            fixtures.VOCAB_SIZE,
            os.path.join(fixtures.tempdir(self), "other"),
        )
        with (
            no_loading() as export_translator,
            self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "`vocab` (--vocab) is not the vocabulary the model was "
                    "trained with"
                ),
            ),
        ):
            export(
                checkpoints=[os.path.join(run_dir, "model.keras")],
                vocab=other,
                export_dir=fixtures.tempdir(self),
            )
        export_translator.assert_not_called()

    def test_overwrite_never_deletes_the_vocabulary(self):
        # --vocab inside the version that --overwrite replaces (e.g. the
        # old export's copy) was deleted with it.
        run_dir = write_run(self)
        export_dir = fixtures.tempdir(self)
        path = serving.serving_path(export_dir, "m", 1)
        os.makedirs(os.path.join(path, "assets"))
        vocab = shutil.copy(
            fixtures.model_path(), os.path.join(path, "assets", "bpe.model")
        )
        with (
            no_loading() as export_translator,
            self.assertRaisesRegex(
                ValueError,
                re.escape("--overwrite would delete an input of the export")
                + ".*"
                + re.escape(f"Received: path={path}, input={vocab}"),
            ),
        ):
            export(
                model_dir=run_dir,
                vocab=vocab,
                export_dir=export_dir,
                overwrite=True,
            )
        export_translator.assert_not_called()
        self.assertTrue(os.path.exists(vocab))

    def test_export_base_that_cannot_be_entered_is_refused_before_loading(
        self,
    ):
        # Writable without search (x) permission: nothing can be created
        # in it either. `os.access` answers as for a user without it.
        folder = fixtures.tempdir(self)
        base = os.path.join(folder, "exports")
        with (
            mock.patch(
                "os.access",
                side_effect=lambda path, mode: (
                    path != folder or not mode & os.X_OK
                ),
            ),
            self.assertRaisesRegex(
                PermissionError, re.escape(f"{folder} cannot be written")
            ),
        ):
            export(
                checkpoints=["missing.keras"], vocab="v.model", export_dir=base
            )
