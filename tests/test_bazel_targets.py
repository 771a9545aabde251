"""Tests of the Bazel tooling: the drift check, the runner, configure."""

import os
import tempfile
import textwrap
from pathlib import Path
from unittest import mock

from tests.test_case import TestCase
from tools import check_bazel_targets, configure_bazel, pytest_runner

# The source tree, also from Bazel's runfiles (their files link to it).
WORKSPACE_ROOT = Path(__file__).resolve().parents[1]

_LIBRARY_BUILD = """\
py_library(
    name = "a",
    srcs = ["a.py"],
)
"""


class CheckBazelTargetsTest(TestCase):
    def setUp(self):
        super().setUp()
        self.root = Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
        self.write("WORKSPACE", "")
        self.write("keras_transformer/a.py", "A = 1\n")
        self.write("keras_transformer/BUILD", _LIBRARY_BUILD)

    def write(self, path, text):
        (self.root / path).parent.mkdir(parents=True, exist_ok=True)
        (self.root / path).write_text(textwrap.dedent(text), encoding="utf-8")

    def check(self):
        return check_bazel_targets.check(self.root)

    def test_the_workspace_has_no_drift(self):
        self.assertTrue(
            (WORKSPACE_ROOT / "WORKSPACE").is_file(),
            f"not the source tree: {WORKSPACE_ROOT}",
        )
        problems = check_bazel_targets.check(WORKSPACE_ROOT)
        self.assertEqual(problems, [], "\n\n".join(problems))

    def test_matching_tree_has_no_problem(self):
        self.assertEqual(self.check(), [])

    def test_module_without_target_gets_the_target_to_add(self):
        self.write(
            "keras_transformer/b.py",
            "from keras_transformer import a\nimport tensorflow as tf\n",
        )
        (problem,) = self.check()
        self.assertEqual(
            problem,
            "keras_transformer/b.py has no Bazel target: add to "
            "keras_transformer/BUILD:\n"
            'py_library(\n    name = "b",\n    srcs = ["b.py"],\n'
            '    deps = [\n        ":a",\n    ],\n)',
        )

    def test_test_file_without_target_gets_a_pytest_test(self):
        self.write("tests/BUILD", "")
        self.write(
            "tests/test_a.py",
            "import pytest\nfrom keras_transformer.a import A\n\n"
            "@pytest.mark.slow\ndef test_a():\n    assert A\n",
        )
        (problem,) = self.check()
        self.assertIn("tests/test_a.py has no Bazel target: add to", problem)
        self.assertIn('pytest_test(\n    name = "test_a",', problem)
        self.assertIn('size = "large",\n    tags = ["slow"],', problem)
        self.assertIn('"//keras_transformer:a",', problem)

    def test_target_of_a_deleted_file_is_reported(self):
        self.write(
            "keras_transformer/BUILD",
            _LIBRARY_BUILD + 'py_library(name = "gone", srcs = ["gone.py"])\n',
        )
        self.assertEqual(
            self.check(),
            [
                (
                    "keras_transformer/BUILD:5: //keras_transformer:gone lists "
                    "keras_transformer/gone.py, which does not exist: remove "
                    "it from `srcs` (or remove the target)."
                )
            ],
        )

    def test_directory_without_build_file_is_reported(self):
        self.write("keras_transformer/sub/c.py", "C = 1\n")
        problems = self.check()
        self.assertIn(
            "keras_transformer/sub/ has Python files but no BUILD file: "
            "create keras_transformer/sub/BUILD (one BUILD per package "
            "directory).",
            problems,
        )

    def test_missing_dep_names_the_import_and_the_label(self):
        self.write("keras_transformer/b.py", "from . import a\n")
        self.write(
            "keras_transformer/BUILD",
            _LIBRARY_BUILD + 'py_library(name = "b", srcs = ["b.py"])\n',
        )
        self.assertEqual(
            self.check(),
            [
                (
                    "keras_transformer/BUILD:5: //keras_transformer:b imports "
                    "keras_transformer.a (keras_transformer/b.py:1) but does "
                    "not depend on //keras_transformer:a: add it to `deps`."
                )
            ],
        )

    def test_dep_on_an_undefined_label_is_reported(self):
        self.write(
            "keras_transformer/BUILD",
            'py_library(name = "a", srcs = ["a.py"], deps = [":typo"])\n',
        )
        self.assertEqual(
            self.check(),
            [
                (
                    "keras_transformer/BUILD:1: //keras_transformer:a depends "
                    "on //keras_transformer:typo, which no BUILD file defines: "
                    "fix or remove the label."
                )
            ],
        )

    def test_slow_tag_must_match_the_slow_marks(self):
        self.write("tests/test_fast.py", "def test_fast():\n    pass\n")
        self.write(
            "tests/test_slow.py",
            "import pytest\n\n@pytest.mark.slow\ndef test_slow():\n    pass\n",
        )
        self.write(
            "tests/BUILD",
            'pytest_test(name = "test_fast", size = "small", '
            'srcs = ["test_fast.py"], tags = ["slow"])\n'
            'pytest_test(name = "test_slow", size = "large", '
            'srcs = ["test_slow.py"])\n',
        )
        self.assertEqual(
            self.check(),
            [
                (
                    'tests/BUILD:1: //tests:test_fast is tagged "slow" but its '
                    "files have no @pytest.mark.slow test: remove the tag."
                ),
                (
                    "tests/BUILD:2: tests/test_slow.py has @pytest.mark.slow "
                    'tests but //tests:test_slow lacks tags = ["slow"]: add it.'
                ),
            ],
        )

    def test_test_target_needs_a_size_and_a_test_rule(self):
        self.write("tests/test_a.py", "def test_a():\n    pass\n")
        self.write(
            "tests/BUILD",
            'pytest_test(name = "test_a", srcs = ["test_a.py"])\n'
            'py_library(name = "lib", srcs = ["test_a.py"])\n',
        )
        self.assertEqual(
            self.check(),
            [
                (
                    "tests/BUILD:1: //tests:test_a has no `size`: add size = "
                    '"medium" (or "small"/"large": its timeout).'
                ),
                (
                    "tests/BUILD:2: tests/test_a.py is a test file but "
                    "//tests:lib is a py_library: declare it with pytest_test."
                ),
            ],
        )

    def test_non_literal_srcs_is_reported_with_the_expression(self):
        self.write(
            "keras_transformer/BUILD",
            'py_library(name = "a", srcs = glob(["*.py"]))\n',
        )
        problems = self.check()
        self.assertIn(
            "keras_transformer/BUILD:1: `srcs` must be a literal (a string or "
            "a list of strings) for tools/check_bazel_targets.py to read it; "
            "write the value out. Received: srcs=glob(['*.py'])",
            problems,
        )

    def test_empty_init_needs_no_target(self):
        self.write(
            "keras_transformer/__init__.py", '"""Summary.\n\nMore.\n"""\n'
        )
        self.assertEqual(self.check(), [])
        self.write("keras_transformer/__init__.py", "from . import a\n")
        (problem,) = self.check()
        self.assertStartsWith(
            problem, "keras_transformer/__init__.py has no Bazel target"
        )

    def test_source_that_does_not_parse_is_reported(self):
        self.write("keras_transformer/a.py", "def broken(:\n")
        self.assertEqual(
            self.check(),
            [
                (
                    "keras_transformer/a.py:1: not valid Python, so its "
                    "imports are unknown: fix the file. Received: "
                    "error=invalid syntax"
                )
            ],
        )

    def test_add_missing_writes_targets_that_pass_the_check(self):
        self.write(
            "keras_transformer/b.py", "from keras_transformer import a\n"
        )
        self.write(
            "tests/sub/test_b.py",
            "from keras_transformer import b\n\ndef test_b():\n    pass\n",
        )
        added = check_bazel_targets.add_missing_targets(self.root)
        self.assertEqual(
            added, ["keras_transformer/b.py", "tests/sub/test_b.py"]
        )
        self.assertEqual(self.check(), [])
        new_build = (self.root / "tests/sub/BUILD").read_text(encoding="utf-8")
        self.assertStartsWith(
            new_build, 'load("//tools:pytest.bzl", "pytest_test")\n'
        )
        self.assertIn('"//keras_transformer:b",', new_build)

    def test_main_exit_code_and_report(self):
        self.assertEqual(
            check_bazel_targets.main(["--root", str(self.root)]), 0
        )
        self.write("keras_transformer/b.py", "B = 1\n")
        with mock.patch("builtins.print") as printed:
            self.assertEqual(
                check_bazel_targets.main(["--root", str(self.root)]), 1
            )
        self.assertIn("1 problems", printed.call_args.args[0])


class PytestRunnerTest(TestCase):
    def test_args_follow_bazel_test_environment(self):
        environment = {
            "TEST_TMPDIR": "/tmp/t",
            "XML_OUTPUT_FILE": "/tmp/t/test.xml",
            "TESTBRIDGE_TEST_ONLY": "test_a",
        }
        with mock.patch.dict(os.environ, environment):
            args = pytest_runner._pytest_args(["tests/test_a.py"])
        self.assertEqual(args[-1], "tests/test_a.py")
        for option, value in [
            ("-c", "pytest.ini"),
            ("--basetemp", "/tmp/t/pytest"),
            ("--junitxml", "/tmp/t/test.xml"),
            ("-k", "test_a"),
        ]:
            self.assertEqual(args[args.index(option) + 1], value)

    def test_no_test_file_is_an_error(self):
        with self.assertRaisesRegex(
            SystemExit, r"needs the test files .* Received: argv=\['runner'\]"
        ):
            pytest_runner.main(["runner"])


class ConfigureBazelTest(TestCase):
    def test_rc_overrides_repositories_and_python(self):
        rc = configure_bazel.render_rc(WORKSPACE_ROOT, Path("/usr/bin/py"))
        config = "configured_by_tools_configure_bazel"
        # Repository overrides for every command that loads packages
        # (`bazel query --config=offline` too), the interpreter for builds.
        self.assertIn(
            f"common:{config} --override_repository=rules_cc="
            f"{WORKSPACE_ROOT}/third_party/bazel/rules_cc\n",
            rc,
        )
        self.assertIn(f"build:{config} --python_path=/usr/bin/py\n", rc)
        # The config name is the one .bazelrc's --config=offline uses.
        bazelrc = (WORKSPACE_ROOT / ".bazelrc").read_text(encoding="utf-8")
        self.assertIn(f"common:offline --config={config}", bazelrc)

    def test_relative_python_is_an_error(self):
        with self.assertRaisesRegex(
            ValueError, "must be an absolute path.*Received: python=py"
        ):
            configure_bazel.render_rc(WORKSPACE_ROOT, Path("py"))

    def test_missing_stand_in_is_an_error(self):
        with self.assertRaisesRegex(
            ValueError, "local stand-in of @rules_cc is missing"
        ):
            configure_bazel.render_rc(Path("/nonexistent"), Path("/usr/bin/py"))
