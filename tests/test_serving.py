"""Tests of the SavedModel export: it serves without keras_transformer."""

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from keras_transformer import inference, serving, tokens, warmup
from keras_transformer.data.tokenizer import train_subword_vocab
from keras_transformer.decoding.translator import Translator
from keras_transformer.training import averaging
from tests.data import fixtures
from tests.decoding.test_translator import tiny_model
from tests.gpu_kernels import cpu_only_ops
from tests.test_case import TestCase

SENTENCES = ["The cat sleeps on the sofa.", "", "I like green tea."]
IDS = [[30, 41, 52, 3], [60, 3, 0, 0]]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAVED_MODEL_CLI = os.path.join(ROOT, "export", "saved_model_cli.py")

# Runs in a fresh interpreter, outside the repository (see `run`). It keeps
# any import of keras_transformer from succeeding (the project may be
# pip-installed, e.g. in editable mode) and records every attempt, then
# reports what it saw after loading and translating.
LOAD_AND_TRANSLATE = """
import importlib.abc, json, os, sys

class BlockProject(importlib.abc.MetaPathFinder):
    attempts = []

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "keras_transformer":
            self.attempts.append(name)
            raise ImportError(f"{name} must not be needed to serve")
        return None

sys.meta_path.insert(0, BlockProject())
import tensorflow as tf
import tensorflow_text  # noqa: F401
path, sentences, ids = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
loaded = tf.saved_model.load(path)
text = loaded.signatures["serving_default"](inputs=tf.constant(sentences))
by_ids = loaded.signatures["translate_ids"](
    source_ids=tf.constant(json.loads(ids), tf.int32))
n_best = loaded.signatures["translate_with_options"](
    inputs=tf.constant(sentences), alpha=tf.constant(0.6),
    length_offset=tf.constant(4), num_hypotheses=tf.constant(2))
print(json.dumps({
    "outputs": [s.decode() for s in text["outputs"].numpy()],
    "scores": text["scores"].numpy().tolist(),
    "output_ids": by_ids["output_ids"].numpy().tolist(),
    "n_best": [[s.decode() for s in r] for r in n_best["outputs"].numpy()],
    "project_modules": sorted(
        name for name in sys.modules
        if name.partition(".")[0] == "keras_transformer"),
    "blocked_imports": BlockProject.attempts,
}))
"""


def run(args):
    """Runs a command outside the repository and without PYTHONPATH.

    So the project is not on the child's `sys.path`; an editable install
    can still import it, which LOAD_AND_TRANSLATE blocks.
    """
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        args,
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tempfile.gettempdir(),
    )
    if result.returncode != 0:
        raise AssertionError(f"{args[:3]} failed:\n{result.stderr[-3000:]}")
    return result.stdout


@pytest.mark.slow
# One worker runs the whole class: its setUpClass exports models (~30 s), once.
@pytest.mark.xdist_group("serving_export")
class ExportTest(TestCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.base_dir = tempfile.mkdtemp()
        model = tiny_model()
        # A trained model carries an optimizer; the export must not.
        model.compile(optimizer="adam", loss="mse")
        model.optimizer.build(model.trainable_variables)
        cls.num_weights = len(model.weights)
        translator = Translator(model, fixtures.tokenizer(), length_offset=4)
        text = translator.translate(tf.constant(SENTENCES))
        cls.expected = {
            "outputs": [s.decode() for s in text["outputs"].numpy()],
            "scores": text["scores"].numpy(),
            "output_ids": translator.translate_ids(tf.constant(IDS))[
                "output_ids"
            ].numpy(),
            "n_best": translator.translate_with_options(
                tf.constant(SENTENCES), 0.6, 4, 2
            )["outputs"].numpy(),
        }
        cls.path = serving.export_translator(
            translator, serving.serving_path(cls.base_dir, "tiny", 1)
        )
        cls.batching_path = serving.export_translator(
            translator,
            serving.serving_path(cls.base_dir, "batching", 1),
            server_batching=True,
        )
        cls.single_search_path = serving.export_translator(
            Translator(model, fixtures.tokenizer(), parallel_searches=1),
            os.path.join(cls.base_dir, "single", "1"),
            warmup_sentences=None,
        )
        cls.xla_path = serving.export_translator(
            Translator(
                model, fixtures.tokenizer(), length_offset=4, jit_compile=True
            ),
            serving.serving_path(cls.base_dir, "tiny", 2),
        )

    @classmethod
    def tearDownClass(cls):
        tf.io.gfile.rmtree(cls.base_dir)
        super().tearDownClass()

    def test_fresh_process_with_only_tf_and_tf_text_translates(self):
        """A process that never imports keras_transformer serves the export.

        What is checked: after loading and translating, no keras_transformer
        module is in the child's `sys.modules`, no import of it was even
        attempted (a finder blocks and records them; an editable install
        puts the project on `sys.path`, so blocking is what makes the check
        hold everywhere). Keras itself may be loaded: on TF
        2.21 `import tensorflow` imports `keras`, so the guarantee is "no
        keras_transformer", not "no Keras".
        """
        output = run(
            [
                sys.executable,
                "-c",
                LOAD_AND_TRANSLATE,
                self.path,
                json.dumps(SENTENCES),
                json.dumps(IDS),
            ]
        )
        self.assert_translates_as_expected(output)

    def test_warmup_requests_run_on_every_signature(self):
        """TF Serving replays each request of the warmup file when it loads
        the version, and refuses the version if one fails: each must name a
        signature and give every input of it, of its dtype and rank."""
        loaded = serving.load_exported(self.path)
        requests = warmup.read_warmup_requests(self.path)
        self.assertCountEqual(
            [name for name, _ in requests], list(loaded.signatures.keys())
        )
        sentences = [s.encode() for s in serving.WARMUP_SENTENCES]
        for name, inputs in requests:
            specs = loaded.signatures[name].structured_input_signature[1]
            self.assertCountEqual(inputs, specs, name)
            for key, value in inputs.items():
                self.assertEqual(
                    value.dtype, specs[key].dtype.as_numpy_dtype, key
                )
                self.assertTrue(
                    specs[key].shape.is_compatible_with(value.shape)
                )
            outputs = loaded.signatures[name](
                **{key: tf.constant(value) for key, value in inputs.items()}
            )
            self.assertEqual(outputs["scores"].shape[0], len(sentences), name)
        requests = dict(requests)
        self.assertEqual(
            requests[serving.DEFAULT_SIGNATURE]["inputs"].tolist(), sentences
        )
        # The ids a client tokenizing with the vocabulary sends, and the
        # export's own decoding options.
        ids = fixtures.tokenizer().tokenize(tf.constant(sentences)).to_tensor()
        self.assertAllEqual(requests[serving.IDS_SIGNATURE]["source_ids"], ids)
        options = requests[serving.OPTIONS_SIGNATURE]
        self.assertEqual(
            (
                options["alpha"],
                options["length_offset"],
                options["num_hypotheses"],
            ),
            (np.float32(0.6), 4, 4),
        )
        self.assertFalse(
            tf.io.gfile.exists(
                os.path.join(self.single_search_path, "assets.extra")
            )
        )

    def test_xla_export_translates_alike_in_a_fresh_process(self):
        # `--jit_compile`: the same translations, XLA run by plain TF.
        output = run(
            [
                sys.executable,
                "-c",
                LOAD_AND_TRANSLATE,
                self.xla_path,
                json.dumps(SENTENCES),
                json.dumps(IDS),
            ]
        )
        self.assert_translates_as_expected(output, atol=1e-4)

    def test_server_batching_export_serves_merged_requests(self):
        """`--server_batching`: only signatures whose every input and output
        has a batch axis (TF Serving's batcher refuses others, and a version
        whose warmup request it refuses), with their warmup requests; and
        requests merged as the batcher merges them (inputs concatenated,
        `source_ids` padded with each request's first element, outputs
        split) translate as they do alone when their rows start with BOS,
        as export/README.md tells clients."""
        loaded = serving.load_exported(self.batching_path)
        self.assertCountEqual(
            loaded.signatures.keys(), serving.BATCHED_SIGNATURES
        )
        requests = warmup.read_warmup_requests(self.batching_path)
        self.assertCountEqual(
            [name for name, _ in requests], serving.BATCHED_SIGNATURES
        )
        for name, signature in loaded.signatures.items():
            specs = [
                *signature.structured_input_signature[1].values(),
                *signature.structured_outputs.values(),
            ]
            for spec in specs:
                self.assertGreaterEqual(spec.shape.rank, 1, name)
                self.assertIsNone(spec.shape[0], name)
        bos = tokens.BOS_ID
        requests = [
            np.array([[bos, 30, 41, 52, 3]], np.int32),
            np.array([[bos, 60, 3, 0], [bos, 41, 30, 3]], np.int32),
            np.array([[bos, 52, 52, 52, 60, 41, 3]], np.int32),
        ]
        width = max(ids.shape[1] for ids in requests)
        merged = np.concatenate(
            [
                np.pad(
                    ids,
                    [(0, 0), (0, width - ids.shape[1])],
                    constant_values=ids.flat[0],
                )
                for ids in requests
            ]
        )
        translate_ids = loaded.signatures[serving.IDS_SIGNATURE]
        together = translate_ids(source_ids=tf.constant(merged))
        start = 0
        for ids in requests:
            alone = translate_ids(source_ids=tf.constant(ids))
            rows = slice(start, start + len(ids))
            start += len(ids)
            for key, value in alone.items():
                part = together[key][rows].numpy()
                if key == "output_ids":
                    # As wide as the merged call's longest output.
                    length = value.shape[1]
                    self.assertAllEqual(part[:, :length], value)
                    self.assertFalse(np.any(part[:, length:]), key)
                elif key == "scores":
                    self.assertAllClose(part, value, atol=1e-5)
                else:
                    self.assertAllEqual(part, value, key)

    def assert_translates_as_expected(self, output, atol=1e-6):
        result = json.loads(output.strip().splitlines()[-1])
        self.assertEqual(result["project_modules"], [])
        self.assertEqual(result["blocked_imports"], [])
        self.assertEqual(result["outputs"], self.expected["outputs"])
        self.assertAllClose(
            result["scores"], self.expected["scores"], atol=atol
        )
        self.assertAllEqual(result["output_ids"], self.expected["output_ids"])
        self.assertEqual(
            result["n_best"],
            [[s.decode() for s in row] for row in self.expected["n_best"]],
        )

    def test_decoding_threads_share_the_cores_among_the_searches(self):
        # Without XLA each parallel search (2 by default, as exported) gets
        # its share of the cores; XLA's one search keeps TensorFlow's
        # default (0).
        self.assertEqual(inference.search_settings(self.path), (2, False))
        self.assertEqual(
            inference.search_settings(self.single_search_path), (1, False)
        )
        self.assertEqual(inference.search_settings(self.xla_path), (1, True))
        for cores, threads in ((1, 1), (2, 1), (3, 1), (8, 4)):
            with mock.patch.object(
                os, "sched_getaffinity", return_value=range(cores)
            ):
                self.assertEqual(inference.decoding_threads(self.path), threads)
                self.assertEqual(
                    inference.decoding_threads("run/model.keras"), threads
                )
                self.assertEqual(
                    inference.decoding_threads(self.single_search_path), cores
                )
        self.assertEqual(inference.decoding_threads(self.xla_path), 0)
        # A TF Serving base directory: its latest version (2) is the XLA one.
        self.assertEqual(inference.decoding_threads(self.base_dir + "/tiny"), 0)
        self.assertEqual(inference.decoding_threads(self.xla_path, 3), 3)
        self.assertEqual(inference.decoding_threads(self.path, 0), 0)

    def test_damaged_saved_model_is_named(self):
        damaged = os.path.join(self.base_dir, "damaged")
        os.makedirs(damaged)
        with open(os.path.join(damaged, "saved_model.pb"), "wb") as file:
            file.write(b"\xff not a protocol buffer")
        with self.assertRaisesRegex(ValueError, "not a SavedModel.*damaged"):
            inference.decoding_threads(damaged)

    def test_saved_model_cli_shows_the_three_signatures(self):
        output = run(["saved_model_cli", "show", "--dir", self.path, "--all"])
        for name, inputs in (
            ("serving_default", ["inputs"]),
            ("translate_ids", ["source_ids"]),
            (
                "translate_with_options",
                ["alpha", "inputs", "length_offset", "num_hypotheses"],
            ),
        ):
            block = output.split(f"signature_def['{name}']")[1]
            block = block.split("signature_def[")[0]
            self.assertEqual(re.findall(r"inputs\['(\w+)'\]", block), inputs)
        default = output.split("signature_def['serving_default']")[1]
        self.assertIn("outputs['outputs']", default)
        self.assertIn("outputs['scores']", default)

    def test_inputs_of_another_shape_are_refused_as_tf_serving_runs_them(self):
        """TF Serving runs a request through the C++ session with its tensors
        as they are: a 2-D batch of strings was translated flattened, with
        flags of another shape, and a vector option failed deep inside the
        search. Python's `Session.run` and `tf.function` check feed shapes
        themselves, so the session is run through the C API, as TF Serving
        runs it."""
        from tensorflow.python.client import pywrap_tf_session

        graph = tf.Graph()
        with tf.compat.v1.Session(graph=graph) as session:
            meta_graph = tf.compat.v1.saved_model.loader.load(
                session, ["serve"], self.path
            )

            def run(signature, feeds):
                tensors = meta_graph.signature_def[signature]

                def endpoint(info):
                    return graph.get_tensor_by_name(info.name)._as_tf_output()

                return pywrap_tf_session.TF_SessionRun_wrapper(
                    session._session,
                    None,
                    {endpoint(tensors.inputs[k]): v for k, v in feeds.items()},
                    [endpoint(info) for info in tensors.outputs.values()],
                    [],
                    None,
                )

            sentence = np.array([SENTENCES[0].encode()], object)
            self.assertLen(run("serving_default", {"inputs": sentence})[0], 1)
            for signature, feeds, name, shape, expected in (
                (
                    "serving_default",
                    {"inputs": sentence[0]},
                    "inputs",
                    "[]",
                    "[?]",
                ),
                (
                    "serving_default",
                    {"inputs": np.stack([sentence, sentence])},
                    "inputs",
                    "[2,1]",
                    "[?]",
                ),
                (
                    "translate_ids",
                    {"source_ids": np.array(IDS[0], np.int32)},
                    "source_ids",
                    "[4]",
                    "[?,?]",
                ),
                (
                    "translate_with_options",
                    {
                        "inputs": sentence,
                        "alpha": np.array([0.6], np.float32),
                        "length_offset": np.int32(4),
                        "num_hypotheses": np.int32(1),
                    },
                    "alpha",
                    "[1]",
                    "[]",
                ),
            ):
                with self.assertRaisesRegex(
                    tf.errors.InvalidArgumentError,
                    f"Shape of tensor _arg_{signature}_{name}_\\S* "
                    + re.escape(
                        f"{shape} is not compatible "
                        f"with expected shape {expected}"
                    ),
                ):
                    run(signature, feeds)

    def test_request_alpha_whose_penalty_overflows_is_refused(self):
        # TF Serving clients send any alpha: the exported graph refuses one
        # whose length penalty overflows float32 at the request's longest
        # output (max_length, 12, here), in the XLA export too (under XLA an
        # assertion would be a no-op).
        message = re.escape(
            "`alpha` must be at most 85.19 here: the length penalty "
            "((5 + 12) / 6) ** alpha of the longest output overflows float32 "
            "beyond it (paper: 0.6). Received: alpha=] [85.2]"
        )
        for path in (self.path, self.xla_path):
            options = tf.saved_model.load(path).signatures[
                "translate_with_options"
            ]

            def request(alpha, options=options):
                return options(
                    inputs=tf.constant(SENTENCES[:1]),
                    alpha=tf.constant(alpha),
                    length_offset=tf.constant(50),
                    num_hypotheses=tf.constant(2),
                )

            with self.subTest(path=path):
                if path == self.path:  # (XLA would compile its search again)
                    self.assertAllLess(request(85.19)["scores"], 0.0)
                with self.assertRaisesRegex(
                    tf.errors.InvalidArgumentError, message
                ):
                    request(85.2)

    def test_saved_model_cli_run_translates(self):
        sentences = json.dumps(SENTENCES)
        # The script, not the stock CLI, which lacks the sentencepiece ops.
        output = run(
            [
                sys.executable,
                SAVED_MODEL_CLI,
                "run",
                "--dir",
                self.path,
                "--tag_set",
                "serve",
                "--signature_def",
                "serving_default",
                "--input_exprs",
                f"inputs={sentences}",
            ]
        )
        printed = output.split("Result for output key outputs:")[1]
        printed = printed.split("Result for output key")[0]
        for sentence in self.expected["outputs"]:
            self.assertIn(repr(sentence.encode()), printed)

    def test_export_holds_the_model_weights_and_no_optimizer(self):
        names = [
            name
            for name, _ in tf.train.list_variables(
                os.path.join(self.path, "variables", "variables")
            )
            if name.endswith("VARIABLE_VALUE")
        ]
        self.assertLen(names, self.num_weights)
        self.assertFalse([name for name in names if "optimizer" in name])
        loaded = serving.load_exported(self.path)
        text = loaded.translate(tf.constant(SENTENCES))
        self.assertAllClose(text["scores"], self.expected["scores"])

    def test_decoding_loops_have_gpu_kernels_for_every_op(self):
        # The search loops run on TensorFlow's single-threaded executor
        # (`decoding/loop.py`), which refuses a partitioned function: on a
        # GPU server, one op of a loop without a GPU kernel for its types
        # would be placed on the CPU and fail every request. Checked
        # against the kernels this TensorFlow build registers for GPUs.
        library = {
            function.signature.name: function
            for graph in serving.read_saved_model(self.path).meta_graphs
            for function in graph.graph_def.library.function
        }
        loops = {
            value.func.name
            for function in library.values()
            for node in function.node_def
            if node.op in ("While", "StatelessWhile")
            for value in node.attr.values()
            if value.func.attr["_executor"].s == b"SINGLE_THREADED_EXECUTOR"
        }
        # The cond and body of each function's two searches.
        self.assertNotEmpty(loops)
        self.assertEqual(len(loops) % 4, 0)
        self.assertEqual(
            sorted(cpu_only_ops(library, loops)), [], "ops without GPU kernel"
        )
        # It finds what it looks for: the tokenization's string ops.
        self.assertContainsSubset(
            {"StringLength", "Substr"},
            cpu_only_ops(library, library),
        )

    def test_tensorflow_text_is_loaded_only_for_exports_that_use_it(self):
        ids_only = tf.Module()
        ids_only.search = tf.function(
            lambda ids: {"ids": ids + 1},
            input_signature=[tf.TensorSpec([None, None], tf.int32)],
        )
        path = os.path.join(fixtures.tempdir(self), "1")
        tf.saved_model.save(ids_only, path)
        self.assertTrue(serving.needs_tensorflow_text(self.path))
        self.assertFalse(serving.needs_tensorflow_text(path))
        # A `None` module makes `import tensorflow_text` fail.
        with mock.patch.dict(sys.modules, {"tensorflow_text": None}):
            loaded = serving.load_exported(path)
            with self.assertRaises(ImportError):
                serving.load_exported(self.path)
        self.assertAllEqual(
            loaded.search(tf.constant([[3, 4]]))["ids"], [[4, 5]]
        )

    def test_existing_version_is_not_overwritten(self):
        with self.assertRaisesRegex(
            FileExistsError,
            re.escape(
                f"choose a new `version` or pass overwrite=True "
                f"(--overwrite). Received: path={self.path}"
            ),
        ):
            serving.export_translator(None, self.path)

    def test_overwrite_replaces_the_version_and_nothing_beside_it(self):
        # Every export of a version deleted `<version>.partial` first, even a
        # directory of the user's; and --overwrite deleted the old version
        # before the new one was in place.
        base = tempfile.mkdtemp(dir=self.base_dir)
        path = os.path.join(base, "1")
        os.makedirs(path + ".partial")
        theirs = fixtures.write(
            os.path.join(path + ".partial", "notes.txt"), "mine"
        )
        os.makedirs(path)
        old = fixtures.write(os.path.join(path, "old.txt"), "old")
        translator = Translator(tiny_model(), fixtures.tokenizer())
        # A failed export leaves the old version and no staging directory.
        with (
            mock.patch.object(
                warmup,
                "write_warmup_requests",
                side_effect=OSError("disk full"),
            ),
            self.assertRaisesRegex(OSError, "disk full"),
        ):
            serving.export_translator(translator, path, overwrite=True)
        self.assertCountEqual(os.listdir(base), ["1", "1.partial"])
        self.assertTrue(os.path.exists(old))
        serving.export_translator(translator, path, overwrite=True)
        self.assertCountEqual(os.listdir(base), ["1", "1.partial"])
        self.assertTrue(os.path.exists(theirs))
        self.assertFalse(os.path.exists(old))
        self.assertTrue(os.path.exists(os.path.join(path, "saved_model.pb")))


class ServingHelpersTest(TestCase):
    def test_a_run_names_its_languages_only_when_it_has_both(self):
        # `evaluate` takes the target language from here; half a record
        # must read as none (the command then asks for the flags).
        run = fixtures.tempdir(self)
        settings = os.path.join(run, "settings.json")
        fixtures.write(
            settings, json.dumps({"src_lang": "en", "tgt_lang": "de"})
        )
        self.assertEqual(
            inference.model_languages(run),
            ({"src_lang": "en", "tgt_lang": "de"}, settings),
        )
        fixtures.write(settings, json.dumps({"src_lang": "en"}))
        self.assertIsNone(inference.model_languages(run))

    def test_saved_model_cli_script_imports_only_tf_and_tf_text(self):
        # So it checks what a server with only these libraries loads.
        with open(SAVED_MODEL_CLI, encoding="utf-8") as file:
            tree = ast.parse(file.read())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                imported.add(node.module)
        self.assertEqual(
            {name.partition(".")[0] for name in imported},
            {"tensorflow", "tensorflow_text"},
        )

    def test_warmup_sentences_are_checked(self):
        translator = Translator(tiny_model(), fixtures.tokenizer())
        for sentences in ([], "Hello.", [b"Hello."]):
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "The warmup sentences must be a non-empty list of strings. "
                    f"Received: sentences={sentences!r}"
                ),
            ):
                serving.warmup_inputs(translator, sentences)

    def test_models_config_parses_as_tf_serving_reads_it(self):
        # The ModelServerConfig text of export/models.config, whose model name
        # is the export's default --model_name.
        from google.protobuf import text_format
        from tensorflow_serving.config import model_server_config_pb2

        with open(os.path.join(ROOT, "export", "models.config")) as file:
            config = text_format.Parse(
                file.read(), model_server_config_pb2.ModelServerConfig()
            )
        (model,) = config.model_config_list.config
        self.assertEqual(model.name, "transformer")
        self.assertEqual(model.model_platform, "tensorflow")

    def test_serving_path_is_the_tf_serving_layout(self):
        self.assertEqual(
            serving.serving_path("/models", "en_de", 3), "/models/en_de/3"
        )

    def test_serving_path_checks(self):
        for args, message in (
            (("/m", "en_de", 0), "Received: version=0"),
            (("/m", "en_de", "1"), "Received: version='1'"),
            # TF Serving reads it as int64, and would never load it.
            (("/m", "en_de", 2**63), f"Received: version={2**63}"),
            # Into the working directory, without a word.
            (("", "en_de", 1), "Received: base_dir=''"),
            (("/m", "a/b", 1), "Received: model_name='a/b'"),
            (("/m", "", 1), "Received: model_name=''"),
        ):
            with self.assertRaisesRegex(ValueError, re.escape(message)):
                serving.serving_path(*args)

    def test_latest_version_is_the_highest_number(self):
        # As TF Serving reads it: "010" is version 10 (it was looked for as
        # "10"); a non-numeric or an empty directory is no version.
        base = fixtures.tempdir(self)
        for name in ("9", "010", "11.partial-x", "12"):
            os.makedirs(os.path.join(base, name))
            if name != "12":
                fixtures.write(os.path.join(base, name, "saved_model.pb"), "")
        self.assertEqual(inference.export_path(base), os.path.join(base, "010"))

    def test_vocab_beside_looks_one_level_up_only_from_checkpoints(self):
        # A run without a vocabulary took an unrelated *.model from the
        # directory above it, and translated wrong without a word.
        root = fixtures.tempdir(self)
        run_dir = os.path.join(root, "run")
        os.makedirs(os.path.join(run_dir, "checkpoints"))
        fixtures.write(os.path.join(root, "other.model"), "x")
        model = os.path.join(run_dir, "model.keras")
        checkpoint = os.path.join(run_dir, "checkpoints", "ckpt-2.keras")
        with self.assertRaisesRegex(
            FileNotFoundError,
            re.escape(
                "No sentencepiece `*.model` vocabulary beside the model; pass "
                f"its path as `vocab` (--vocab). Received: model={model}"
            ),
        ):
            inference.vocab_beside(model, None)
        with self.assertRaisesRegex(
            FileNotFoundError, "or in its training run's directory; pass"
        ):
            inference.vocab_beside(checkpoint, None)
        vocab = os.path.join(run_dir, "vocab.model")
        fixtures.write(vocab, "x")
        self.assertEqual(inference.vocab_beside(model, None), vocab)
        self.assertEqual(inference.vocab_beside(checkpoint, None), vocab)
        self.assertEqual(inference.vocab_beside(model, "v.model"), "v.model")

    def test_a_vocab_of_another_run_is_refused_where_the_run_wrote_its_own(
        self,
    ):
        # Another run's vocabulary of the same size translated to garbage
        # without a word (only the sizes were compared).
        root = fixtures.tempdir(self)
        run_dir = os.path.join(root, "run")
        os.makedirs(os.path.join(run_dir, "checkpoints"))
        own = shutil.copy(
            fixtures.model_path(), os.path.join(run_dir, "vocab.model")
        )
        copy = shutil.copy(
            fixtures.model_path(), os.path.join(root, "copy.model")
        )
        other = train_subword_vocab(
            [sentence[::-1] for sentence in fixtures.sentences()],
            fixtures.VOCAB_SIZE,
            os.path.join(root, "other"),
        )
        fixtures.write(os.path.join(run_dir, "settings.json"), "{}")
        for model in (
            os.path.join(run_dir, "model.keras"),
            os.path.join(run_dir, "checkpoints", "ckpt-2.keras"),
        ):
            fixtures.write(model, "")
            self.assertEqual(inference.vocab_beside(model, copy), copy)
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "`vocab` (--vocab) is not the vocabulary the model was "
                    f"trained with: its training run wrote {own}, whose pieces "
                    "differ. Drop `vocab` to use the run's own (or pass a copy "
                    f"of it). Received: vocab={other}, model={model}"
                ),
            ):
                inference.vocab_beside(model, other)
        # A folder of models that is no run's (no settings file) may hold
        # a vocab.model of another of its models: any --vocab goes.
        os.remove(os.path.join(run_dir, "settings.json"))
        self.assertEqual(inference.vocab_beside(model, other), other)

    def test_saved_model_without_the_signature_is_named(self):
        # Another program's SavedModel: a KeyError traceback before.
        module = tf.Module()
        module.f = tf.function(
            lambda x: {"y": x},
            input_signature=[tf.TensorSpec([None], tf.float32)],
        )
        # And one whose `serving_default` takes no strings: a TypeError
        # traceback from TensorFlow before.
        for name, message in (
            (
                "other",
                "The SavedModel has no `serving_default` signature (it has: "
                "other), so it is not a translation export",
            ),
            (
                "serving_default",
                "The SavedModel's `serving_default` signature takes x "
                "(float32), not `inputs` (a batch of strings), so it is not a "
                "translation export",
            ),
        ):
            path = os.path.join(fixtures.tempdir(self), "1")
            tf.saved_model.save(module, path, signatures={name: module.f})
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    f"{message}; pass one written by "
                    f"keras_transformer.export_model. Received: model={path}"
                ),
            ):
                inference.load_translator(os.path.dirname(path))
        # An export holds its tokenizer and decoding settings: the flags
        # would be ignored.
        with self.assertRaisesRegex(
            ValueError, f"drop `vocab` .*Received: model={path}, vocab=v.model$"
        ):
            inference.load_translator(path, vocab="v.model")
        with self.assertRaisesRegex(
            ValueError,
            "^`vocab`, `beam_size`, `length_offset` apply to `.keras` models.*"
            f"Received: model={path}, vocab=v.model, beam_size=2, "
            "length_offset=0$",
        ):
            inference.load_translator(
                path, vocab="v.model", beam_size=2, length_offset=0
            )

    def test_average_models_averages_every_weight(self):
        folder = fixtures.tempdir(self)
        first, second = tiny_model(seed=1), tiny_model(seed=2)
        paths = [os.path.join(folder, f"{i}.keras") for i in (1, 2)]
        first.save(paths[0])
        second.save(paths[1])
        averaged = averaging.average_models(paths)
        for got, a, b in zip(
            averaged.get_weights(), first.get_weights(), second.get_weights()
        ):
            self.assertAllClose(got, (a + b) / 2)
        self.assertIsNot(averaged, first)
        self.assertAllClose(
            averaging.average_models(paths[:1]).get_weights()[0],
            first.get_weights()[0],
        )
        self.assertTrue(
            np.any(first.get_weights()[0] != averaged.get_weights()[0])
        )


class ServingChecksTest(TestCase):
    def test_a_file_as_a_remote_export_base_is_refused(self):
        # A URL's parents were walked as a normalised local path ("ram:/"),
        # which never exists: nothing was checked before the model loaded.
        base = f"ram://{self.id()}"
        tf.io.gfile.makedirs(base)
        self.addCleanup(tf.io.gfile.rmtree, base)
        with tf.io.gfile.GFile(f"{base}/a_file", "w") as file:
            file.write("x")
        with self.assertRaisesRegex(
            NotADirectoryError, re.escape(f"{base}/a_file is a file")
        ):
            serving.check_export_path(f"{base}/a_file/m/1")
        serving.check_export_path(f"{base}/exports/m/1")  # A new folder.

    def test_serving_path_takes_the_int64_limit_and_no_dot_names(self):
        # TF Serving reads versions as int64: its largest is a version. A
        # name of dots would put the export outside --export_dir.
        limit = 2**63 - 1
        self.assertEqual(
            serving.serving_path("/m", "en_de", limit), f"/m/en_de/{limit}"
        )
        for name in ("..", ".", ".hidden"):
            with self.assertRaisesRegex(
                ValueError, re.escape(f"Received: model_name={name!r}")
            ):
                serving.serving_path("/m", name, 1)

    def test_half_a_languages_record_is_named_damaged(self):
        # Read as `evaluate` reads it: a record without tgt_lang gave a
        # KeyError traceback.
        path = fixtures.tempdir(self)
        serving.write_languages(path, {"src_lang": "en", "tgt_lang": "de"})
        self.assertEqual(
            serving.read_languages(path), {"src_lang": "en", "tgt_lang": "de"}
        )
        fixtures.write(
            os.path.join(path, serving.LANGUAGES_FILE),
            json.dumps({"src_lang": "en"}),
        )
        with self.assertRaisesRegex(ValueError, "languages file is damaged"):
            serving.read_languages(path)

    def test_warmup_requests_are_where_tf_serving_reads_them(self):
        # TF Serving replays only assets.extra/tf_serving_warmup_requests.
        path = fixtures.tempdir(self)
        inputs = {"serving_default": {"inputs": np.array([b"Hi."], object)}}
        written = warmup.write_warmup_requests(path, inputs)
        expected = os.path.join(
            path, "assets.extra", "tf_serving_warmup_requests"
        )
        self.assertEqual(written, expected)
        self.assertTrue(os.path.isfile(expected))
        ((name, read),) = warmup.read_warmup_requests(path)
        self.assertEqual(name, "serving_default")
        self.assertEqual(read["inputs"].tolist(), [b"Hi."])

    def test_decoding_threads_of_a_saved_model_without_searches(self):
        # A SavedModel of another program (no beam-search loop) counts as
        # one search: `translate` then names it as no translation export
        # (a ZeroDivisionError traceback otherwise).
        module = tf.Module()
        module.f = tf.function(
            lambda x: {"y": x + 1},
            input_signature=[tf.TensorSpec([None], tf.float32)],
        )
        path = os.path.join(fixtures.tempdir(self), "1")
        tf.saved_model.save(module, path, signatures={"other": module.f})
        self.assertEqual(inference.search_settings(path), (1, False))
        with mock.patch.object(
            os, "sched_getaffinity", return_value=range(2), create=True
        ):
            self.assertEqual(inference.decoding_threads(path), 2)

    def test_any_vocab_goes_for_a_run_that_wrote_no_vocab_model(self):
        # A run folder (settings file) without vocab.model has no
        # vocabulary of its own to compare with: a missing file was read.
        run_dir = fixtures.tempdir(self)
        fixtures.write(os.path.join(run_dir, "settings.json"), "{}")
        model = fixtures.write(os.path.join(run_dir, "model.keras"), "")
        vocab = shutil.copy(
            fixtures.model_path(), os.path.join(run_dir, "bpe.model")
        )
        self.assertEqual(inference.vocab_beside(model, vocab), vocab)

    def test_latest_version_of_a_listing_with_slashes(self):
        # GCS lists directories with a trailing "/" ("10/"): a gs://
        # TF Serving directory had no version.
        base = fixtures.tempdir(self)
        for name in ("9", "10"):
            os.makedirs(os.path.join(base, name))
            fixtures.write(os.path.join(base, name, "saved_model.pb"), "")
        with mock.patch.object(
            tf.io.gfile, "listdir", return_value=["9/", "10/"]
        ):
            self.assertEqual(
                inference.export_path(base), os.path.join(base, "10")
            )

    def test_load_translator_decodes_a_keras_model_with_its_beam_size(self):
        run_dir = fixtures.tempdir(self)
        shutil.copy(fixtures.model_path(), os.path.join(run_dir, "vocab.model"))
        fixtures.write(os.path.join(run_dir, "model.keras"), "")
        with (
            mock.patch.object(inference.model_files, "load_model") as load,
            mock.patch.object(inference.translator_lib, "Translator") as built,
        ):
            loaded = inference.load_translator(run_dir, beam_size=2)
        load.assert_called_once_with(os.path.join(run_dir, "model.keras"))
        self.assertEqual(built.call_args.kwargs["beam_size"], 2)
        self.assertIs(loaded.translate_fn, built.return_value.translate)

    def test_warmup_options_are_the_exports_own(self):
        # The translate_with_options request decodes as the export's
        # defaults do, whatever --alpha, --length_offset and --beam_size.
        translator = Translator(
            tiny_model(),
            fixtures.tokenizer(),
            beam_size=3,
            alpha=1.0,
            length_offset=7,
        )
        options = serving.warmup_inputs(translator, ["Hi."])[
            serving.OPTIONS_SIGNATURE
        ]
        self.assertEqual(
            (
                options["alpha"],
                options["length_offset"],
                options["num_hypotheses"],
            ),
            (np.float32(1.0), np.int32(7), np.int32(3)),
        )

    def test_searches_count_stateless_loops_too(self):
        # TensorFlow writes a loop without state as StatelessWhile.
        def two_loops(x):
            for _ in range(2):
                x = tf.while_loop(lambda v: v < 10.0, lambda v: v + 1.0, [x])[0]
            return {"y": x}

        module = tf.Module()
        module.f = tf.function(
            two_loops, input_signature=[tf.TensorSpec([], tf.float32)]
        )
        path = os.path.join(fixtures.tempdir(self), "1")
        tf.saved_model.save(module, path, signatures={"other": module.f})
        self.assertEqual(inference.search_settings(path), (2, False))
