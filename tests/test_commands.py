"""End-to-end tests of the evaluate and translate commands."""

import ast
import contextlib
import importlib
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import pytest
import sacrebleu
import tensorflow as tf
from absl import flags

from keras_transformer import (
    commands,
    evaluate,
    evaluation,
    serving,
    translate,
)
from keras_transformer.data import text_files
from keras_transformer.decoding.translator import Translator
from tests.data import fixtures
from tests.decoding.test_translator import tiny_model, tiny_translator
from tests.test_case import TestCase

ROOT = os.path.dirname(os.path.dirname(__file__))
SENTENCES = [source for source, _ in fixtures.PAIRS[:6]]


def run(module, *args, stdin=None, env=None):
    return subprocess.run(
        [sys.executable, "-m", f"keras_transformer.{module}", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=ROOT,
        input=stdin,
        timeout=180,
        env=None if env is None else dict(os.environ, **env),
    )


def parse_flags(command, *args):
    """`command`'s flags (a fresh `flags.FlagValues`) parsed from `args`;
    (the flag values, what follows the flags with the program name)."""
    flag_values = flags.FlagValues()
    command.define_flags(flag_values)
    argv = flag_values([command.__name__.rpartition(".")[2], *args])
    return flag_values, argv


def run_main(command, *args):
    """`command.main` in this process, on its flags parsed from `args` (what
    follows the flags is its arguments), as `run` would run the command; its
    exit status and output, as a `subprocess.CompletedProcess`. Faster than
    `run` by TensorFlow's import, for what needs no process of its own: not
    standard input, the locale or the exit status itself. Where the command
    would print a traceback, the exception fails the test here. The decoding
    threads are not set (this process's TensorFlow has started)."""
    flag_values, argv = parse_flags(command, *args)
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
    stderr = io.StringIO()
    with (
        mock.patch("keras_transformer.inference.set_decoding_threads"),
        contextlib.redirect_stdout(stdout),
        contextlib.redirect_stderr(stderr),
    ):
        status = command.main(argv, flag_values)
    stdout.flush()
    return subprocess.CompletedProcess(
        argv,
        status,
        stdout.buffer.getvalue().decode("utf-8"),
        stderr.getvalue(),
    )


class TranslateFlagsTest(TestCase):
    def test_help_lists_the_threads_flag(self):
        # Defined in keras_transformer.commands: --help lists only the main
        # module's key flags.
        for command in (translate, evaluate):
            flag_values = flags.FlagValues()
            command.define_flags(flag_values)
            key_flags = flag_values.get_key_flags_for_module(command)
            self.assertIn("intra_op_threads", [flag.name for flag in key_flags])


def console_scripts():
    """`{command: "module:function"}` of setup.py's console scripts."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as file:
        tree = ast.parse(file.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "entry_points":
            scripts = ast.literal_eval(node.value)["console_scripts"]
            return dict(
                (part.strip() for part in script.split("="))
                for script in scripts
            )
    raise AssertionError("setup.py has no entry_points")


class ConsoleScriptsTest(TestCase):
    def test_every_command_is_installed_as_a_console_script(self):
        scripts = console_scripts()
        package = os.path.join(ROOT, "keras_transformer")
        commands = [
            name
            for name in os.listdir(package)
            if name.endswith(".py")
            and 'if __name__ == "__main__":'
            in pathlib.Path(package, name).read_text(encoding="utf-8")
        ]
        self.assertCountEqual(
            [target.partition(":")[0] for target in scripts.values()],
            [f"keras_transformer.{name[:-3]}" for name in commands],
        )
        for command, target in scripts.items():
            module, _, function = target.partition(":")
            with self.subTest(command):
                self.assertTrue(command.startswith("keras-transformer-"))
                self.assertTrue(
                    callable(getattr(importlib.import_module(module), function))
                )

    @pytest.mark.slow
    def test_console_scripts_list_their_flags(self):
        # A console script imports the command's module and calls `run`,
        # with its own path as sys.argv[0]: absl's --helpshort lists that
        # main module's key flags, which are the command module's (the
        # translate ones partly adopted from keras_transformer.commands),
        # and starts with the command module's docstring.
        scripts = console_scripts()
        for command, expected in (
            (
                "keras-transformer-train",
                ("--preset", "--data", "--train_steps"),
            ),
            ("keras-transformer-translate", ("--model", "--intra_op_threads")),
        ):
            module, _, function = scripts[command].partition(":")
            code = (
                f"import sys; sys.argv = ['/venv/bin/{command}', "
                f"'--helpshort']; from {module} import {function}; {function}()"
            )
            result = subprocess.run(
                [sys.executable, "-c", code],
                check=False,
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=180,
            )
            with self.subTest(command):
                self.assertNotIn("Traceback", result.stderr)
                summary = importlib.import_module(module).__doc__.splitlines()[
                    0
                ]
                self.assertTrue(
                    result.stdout.startswith(summary), result.stdout[:200]
                )
                for name in expected:
                    self.assertIn(f"\n  {name}:", result.stdout)


@pytest.mark.slow
# One worker runs the whole class: its setUpClass saves and exports a model,
# once.
@pytest.mark.xdist_group("commands")
class CommandsTest(TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tempfile.mkdtemp()
        cls.model_dir = os.path.join(cls.folder, "run")
        os.makedirs(cls.model_dir)
        model = tiny_model()
        model.save(os.path.join(cls.model_dir, "model.keras"))
        vocab = os.path.join(cls.model_dir, "vocab.model")
        with open(fixtures.model_path(), "rb") as src, open(vocab, "wb") as dst:
            dst.write(src.read())
        translator = Translator(model, fixtures.tokenizer(), length_offset=4)
        cls.export = serving.export_translator(
            translator, serving.serving_path(cls.folder, "tiny", 1)
        )
        cls.src = fixtures.write(
            os.path.join(cls.folder, "test.en"),
            "".join(s + "\n" for s in SENTENCES),
        )

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.folder, ignore_errors=True)
        super().tearDownClass()

    def test_evaluate_scores_what_translate_outputs(self):
        translated = run(
            "translate", f"--model={self.model_dir}", f"--input={self.src}"
        )
        self.assertEqual(translated.returncode, 0, translated.stderr[-2000:])
        lines = translated.stdout.splitlines()
        self.assertLen(lines, len(SENTENCES))
        self.assertIn(
            f"{len(SENTENCES)}/{len(SENTENCES)} sentences", translated.stderr
        )
        references = [target for _, target in fixtures.PAIRS[:6]]
        ref = fixtures.write(
            os.path.join(self.folder, "ref.de"),
            "".join(line + "\n" for line in references),
        )
        output = os.path.join(self.folder, "hyp.de")
        evaluated = run(
            "evaluate",
            f"--model={self.model_dir}",
            f"--src={self.src}",
            f"--ref={ref}",
            f"--output={output}",
        )
        self.assertEqual(evaluated.returncode, 0, evaluated.stderr[-2000:])
        scores = json.loads(evaluated.stdout.strip().splitlines()[-1])
        # The command's score is sacrebleu's on the same (detokenized) text.
        self.assertAlmostEqual(
            scores["bleu"], sacrebleu.corpus_bleu(lines, [references]).score
        )
        self.assertEqual(scores["num_sentences"], len(SENTENCES))
        self.assertIn("nrefs:1", scores["signature"])
        self.assertIn("BLEU", evaluated.stderr)
        with open(output, encoding="utf-8") as file:
            self.assertEqual(file.read(), translated.stdout)

    def test_input_forms_and_thread_settings_translate_alike(self):
        # The export was made with length_offset=4; the model_dir default
        # is 50, so compare the export with itself across input forms, and
        # the default threads per op with TensorFlow's (0).
        # Standard input is split on "\n" only, as --input files are: a
        # U+2028 or a form feed inside a line must not add lines (and shift
        # every later translation). An over-long sentence is translated and
        # named in a warning.
        sentences = [
            "Hi.\u2028Hi.",  # Within the tiny model's 11 tokens.
            "Hi.\x0cHi.",
            " ".join(SENTENCES),
        ]
        by_argument = run("translate", f"--model={self.export}", *sentences)
        by_stdin = run(
            "translate",
            f"--model={os.path.dirname(self.export)}",
            "--intra_op_threads=0",
            stdin="\n".join(sentences) + "\n",
        )
        self.assertEqual(by_argument.returncode, 0, by_argument.stderr[-2000:])
        self.assertEqual(by_argument.stdout, by_stdin.stdout)
        self.assertLen(by_argument.stdout.splitlines(), 3)
        for result in (by_argument, by_stdin):
            self.assertIn(
                "1 of 3 sentences are longer than the model's", result.stderr
            )
            self.assertIn("sentences 3 (1-based)", result.stderr)

    def test_bad_stdin_and_arguments_are_one_line_errors(self):
        bad_stdin = subprocess.run(
            [sys.executable, "-m", "keras_transformer.translate"]
            + [f"--model={self.export}"],
            check=False,
            capture_output=True,
            cwd=ROOT,
            input=b"Hi.\nHi \xff there\n",
            timeout=180,
        )
        stderr = bad_stdin.stderr.decode()
        self.assertEqual(bad_stdin.returncode, 1)
        self.assertIn(
            "translate: error: invalid UTF-8 in standard input line 2", stderr
        )
        self.assertNotIn("Traceback", stderr)
        both = run_main(
            translate, f"--model={self.export}", f"--input={self.src}", "Hi."
        )
        self.assertEqual(both.returncode, 1)
        self.assertIn(
            "Pass sentences as arguments or --input, not both.", both.stderr
        )

    def test_output_is_utf8_whatever_the_locale_and_a_closed_pipe_is_quiet(
        self,
    ):
        # An ASCII stdout raised UnicodeEncodeError (a traceback, nothing
        # written) once every sentence was translated; the random model's
        # translations hold non-ASCII text.
        ascii_locale = run(
            "translate",
            f"--model={self.export}",
            "Hi.",
            "Cat.",
            env={"PYTHONIOENCODING": "ascii"},
        )
        self.assertEqual(
            ascii_locale.returncode, 0, ascii_locale.stderr[-2000:]
        )
        # Decoded here as UTF-8; split on "\n" only (a translation may hold
        # other line breaks).
        lines = ascii_locale.stdout.split("\n")
        self.assertLen(lines, 3)
        self.assertEqual(lines[2], "")
        self.assertTrue(any(ord(c) > 127 for c in "".join(lines)), lines)
        # A reader that left (`translate ... | head -1`): no traceback.
        process = subprocess.Popen(
            [sys.executable, "-m", "keras_transformer.translate"]
            + [f"--model={self.export}", *SENTENCES],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        process.stdout.close()
        stderr = process.stderr.read().decode()
        self.assertEqual(process.wait(timeout=180), 0, stderr[-2000:])
        self.assertNotIn("Traceback", stderr)
        self.assertNotIn("BrokenPipeError", stderr)

    def test_input_file_is_read_as_standard_input(self):
        # Errors name --input and its fix (not the training corpora's
        # text:PREFIX), and a file of blank lines gives as many empty lines,
        # as standard input does (it was refused as "empty").
        blank = fixtures.write(os.path.join(self.folder, "blank.en"), "\n \r\n")
        result = run_main(
            translate, f"--model={self.export}", f"--input={blank}"
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertEqual(result.stdout, "\n\n")
        missing = os.path.join(self.folder, "missing.en")
        empty = fixtures.write(os.path.join(self.folder, "nothing.en"), "")
        hint = "Pass a text file of sentences, one per line."
        folder = self.folder
        for path, error, message in (
            (
                missing,
                FileNotFoundError,
                f"The --input file {missing} does not exist",
            ),
            (
                folder,
                ValueError,
                f"The --input file {folder} is a directory, not a file",
            ),
            (empty, ValueError, f"The --input file {empty} is empty"),
        ):
            with self.assertRaisesRegex(
                error, re.escape(f"{message}. {hint} Received: input={path}")
            ):
                text_files.read_sentences(path, "input")
        crlf = fixtures.write(
            os.path.join(self.folder, "crlf.en"), "Hi.\r\nYes.\r\n"
        )
        self.assertEqual(
            text_files.read_sentences(crlf, "input"), ["Hi.", "Yes."]
        )

    def test_arguments_must_be_utf8(self):
        # Python keeps bytes that are not UTF-8 as lone surrogates.
        argument = b"Hi \xff there".decode("utf-8", "surrogateescape")
        with self.assertRaisesRegex(
            ValueError,
            r"Argument 2 is not valid UTF-8.*argument 2=Hi \\udcff there",
        ):
            translate._arguments(["Hi.", argument])
        self.assertEqual(
            translate._arguments(["Hi.", "Ça va"]), ["Hi.", "Ça va"]
        )

    def test_clear_errors(self):
        missing = run_main(translate, "--model=/nonexistent/model", "Hi.")
        self.assertEqual(missing.returncode, 1)
        self.assertIn("model=/nonexistent/model", missing.stderr)
        empty = fixtures.write(os.path.join(self.folder, "empty.en"), "")
        result = run_main(
            evaluate,
            f"--model={self.model_dir}",
            f"--src={empty}",
            f"--ref={empty}",
        )
        self.assertEqual(result.returncode, 1)
        self.assertIn(f"The --src file {empty} is empty", result.stderr)
        short = fixtures.write(os.path.join(self.folder, "one.de"), "Eins.\n")
        result = run_main(
            evaluate,
            f"--model={self.model_dir}",
            f"--src={self.src}",
            f"--ref={short}",
        )
        self.assertEqual(result.returncode, 1)
        self.assertIn("has 6 lines", result.stderr)
        no_model = run_main(
            evaluate,
            f"--model={self.folder}/test.en.d",
            f"--src={self.src}",
            f"--ref={self.src}",
        )
        self.assertEqual(no_model.returncode, 1)
        self.assertIn("does not exist", no_model.stderr)
        # The one error, not a guess at the missing model's languages.
        self.assertNotIn("records no languages", no_model.stderr)
        self.assertIn(
            f"Received: model={self.folder}/test.en.d", no_model.stderr
        )
        missing_vocab = os.path.join(self.folder, "no", "vocab.model")
        no_vocab = run_main(
            translate,
            f"--model={self.model_dir}/model.keras",
            f"--vocab={missing_vocab}",
            "Hi.",
        )
        self.assertEqual(no_vocab.returncode, 1)
        self.assertIn(
            "translate: error: Sentencepiece model "
            f"file {missing_vocab} does not exist",
            no_vocab.stderr,
        )

    def test_decoding_flags_set_a_keras_models_search_not_an_exports(self):
        # The paper tuned the beam and alpha on the dev set (section 6.1).
        # Sentences within the tiny model's length limit, for perplexity.
        short = ["Hi.", "I like tea.", "Yes."]
        src = fixtures.write(
            os.path.join(self.folder, "short.en"),
            "".join(line + "\n" for line in short),
        )
        greedy = tiny_translator(beam_size=1, alpha=0.0, length_offset=3)
        expected = greedy.translate(tf.constant(short))["outputs"]
        result = run_main(
            translate,
            f"--model={self.model_dir}",
            "--beam_size=1",
            "--alpha=0",
            "--length_offset=3",
            f"--input={src}",
        )
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertEqual(
            result.stdout.splitlines(),
            [line.decode("utf-8") for line in expected.numpy()],
        )
        test_set = [f"--src={src}", f"--ref={src}"]
        evaluated = run_main(
            evaluate,
            f"--model={self.model_dir}",
            "--beam_size=1",
            "--alpha=0",
            "--length_offset=3",
            *test_set,
        )
        self.assertEqual(evaluated.returncode, 0, evaluated.stderr[-2000:])
        self.assertIn(
            "(beam 1, alpha 0.0, length offset 3): BLEU", evaluated.stderr
        )
        # Table 3's PPL of the references, which no search setting changes.
        scores = json.loads(evaluated.stdout)
        want = evaluation.perplexity(
            greedy.model, greedy.tokenizer, short, short
        )
        self.assertAllClose(scores["perplexity"], want.perplexity, rtol=1e-4)
        self.assertEqual(scores["perplexity_sentences"], len(short))
        self.assertIn(
            f"perplexity {want.perplexity:.3f} ({want.num_tokens} target "
            "tokens)",
            evaluated.stderr,
        )
        self.assertNotIn("perplexity over", evaluated.stderr)
        # An export's signatures only search: no perplexity.
        exported = run_main(evaluate, f"--model={self.export}", *test_set)
        self.assertEqual(exported.returncode, 0, exported.stderr[-2000:])
        self.assertIsNone(json.loads(exported.stdout)["perplexity"])
        self.assertIn(", perplexity n/a\n", exported.stderr)
        # An export decodes as it was exported: the flag would be ignored.
        for command, args in (
            (translate, ["Hi."]),
            (evaluate, [f"--src={self.src}", f"--ref={self.src}"]),
        ):
            refused = run_main(
                command, f"--model={self.export}", "--alpha=0.2", *args
            )
            self.assertEqual(refused.returncode, 1)
            self.assertEqual(
                refused.stderr.splitlines()[-1],
                f"{command.__name__.rpartition('.')[2]}: error: `alpha` "
                "applies to `.keras` models; a SavedModel holds its own "
                "tokenizer and decoding settings (export_model's "
                "--beam_size, --alpha and --length_offset; its "
                "translate_with_options signature takes alpha and the length "
                "offset per request), so drop `alpha` or pass the training "
                "directory or .keras model. "
                f"Received: model={self.export}, alpha=0.2",
            )
        # Out of the search's range: the Translator's own one-line error.
        overflowing = run_main(
            translate, f"--model={self.model_dir}", "--alpha=1000", "Hi."
        )
        self.assertEqual(overflowing.returncode, 1)
        self.assertIn("alpha=1000", overflowing.stderr.splitlines()[-1])

    def test_bad_output_path_fails_before_translating(self):
        output = os.path.join(self.folder, "missing", "hyp.de")
        result = run_main(
            evaluate,
            f"--model={self.model_dir}",
            f"--src={self.src}",
            f"--ref={self.src}",
            f"--output={output}",
        )
        self.assertEqual(result.returncode, 1)
        self.assertEqual(
            result.stderr.splitlines()[-1],
            "evaluate: error: Cannot write --output (No such file or "
            "directory); its directory must exist (it is not created) and be "
            f"writable. Received: output={output}",
        )
        self.assertNotIn("sentences", result.stderr)  # no progress bar
        self.assertFalse(os.path.exists(os.path.dirname(output)))
        result = run_main(
            evaluate,
            f"--model={self.model_dir}",
            f"--src={self.src}",
            f"--ref={self.src}",
            f"--output={self.folder}",
        )
        self.assertEqual(result.returncode, 1)
        self.assertIn(
            f"Cannot write --output (Is a directory); its directory must "
            f"exist (it is not created) and be writable. "
            f"Received: output={self.folder}",
            result.stderr,
        )


INFERENCE = "keras_transformer.inference"


class TranslateMainTest(TestCase):
    def test_flags_reach_the_threads_the_loader_and_the_batches(self):
        # --batch_size bounds the memory of a call; --intra_op_threads and
        # --vocab were easy to drop on their way.
        flag_values, argv = parse_flags(
            translate,
            "--model=run",
            "--vocab=v.model",
            "--batch_size=3",
            "--intra_op_threads=5",
            "--beam_size=6",
            "--alpha=0.8",
            "--length_offset=20",
            "Hi.",
            "Yes.",
        )
        translator = mock.Mock()
        translator.translate.return_value = ["Hallo.", "Ja."]
        stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")
        with (
            mock.patch(f"{INFERENCE}.set_decoding_threads") as threads,
            mock.patch(
                f"{INFERENCE}.load_translator", return_value=translator
            ) as load,
            contextlib.redirect_stdout(stdout),
        ):
            self.assertEqual(translate.main(argv, flag_values), 0)
        threads.assert_called_once_with("run", 5)
        load.assert_called_once_with(
            "run", "v.model", beam_size=6, alpha=0.8, length_offset=20
        )
        translator.translate.assert_called_once_with(["Hi.", "Yes."], 3, None)
        stdout.flush()
        self.assertEqual(stdout.buffer.getvalue(), b"Hallo.\nJa.\n")

    def test_flag_bounds_and_the_required_model(self):
        for args in (
            ["--model=run", "--batch_size=0"],
            ["--model=run", "--intra_op_threads=-1"],
            ["--model=run", "--beam_size=0"],
            ["--model=run", "--alpha=-0.1"],
            ["--model=run", "--length_offset=-1"],
            [],
        ):
            with self.subTest(args=args), self.assertRaises(flags.Error):
                parse_flags(translate, *args)

    def test_progress_bar_ends_its_line_at_the_last_batch(self):
        # Else the scores printed next start on the bar's line.
        stream = io.StringIO()
        on_batch = commands.progress_printer(stream)
        on_batch(2, 4)
        self.assertEqual(
            stream.getvalue(), f"\r[{'=' * 15}{'.' * 15}] 2/4 sentences"
        )
        on_batch(4, 4)
        self.assertTrue(
            stream.getvalue().endswith(f"[{'=' * 30}] 4/4 sentences\n")
        )
