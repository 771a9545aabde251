"""Runs the test files given as arguments through pytest, under Bazel.

The `main` of every `pytest_test` target (tools/pytest.bzl).
"""

import os
import sys

try:
    import pytest
except ImportError as error:  # The wrong interpreter: say which one to use.
    raise SystemExit(
        f"pytest is not installed for {sys.executable}: run the tests with "
        "the Python of the project's environment (`bazel test "
        "--config=offline` after `python3 tools/configure_bazel.py`, or "
        f"--python_path=/path/to/python). Received: error={error}"
    ) from error


def _pytest_args(test_files: list[str]) -> list[str]:
    """Builds pytest's command line from Bazel's test environment.

    Args:
        test_files: the test files, relative to the runfiles workspace (the
            working directory of a Bazel test).

    Returns:
        The arguments for `pytest.main`.
    """
    args = [
        # The runfiles tree is Bazel's, not a place for a pytest cache.
        "-p",
        "no:cacheprovider",
        # pytest.ini (markers, --strict-markers) sits at the workspace root.
        "--rootdir",
        os.getcwd(),
        "-c",
        "pytest.ini",
    ]
    tmp_dir = os.environ.get("TEST_TMPDIR")
    if tmp_dir:
        args += ["--basetemp", os.path.join(tmp_dir, "pytest")]
    xml_output = os.environ.get("XML_OUTPUT_FILE")
    if xml_output:
        # Lets Bazel (and CI dashboards) show each test case.
        args += ["--junitxml", xml_output]
    test_filter = os.environ.get("TESTBRIDGE_TEST_ONLY")
    if test_filter:
        # `bazel test --test_filter=EXPR` selects tests like `pytest -k EXPR`.
        args += ["-k", test_filter]
    return args + test_files


def main(argv: list[str]) -> int:
    """Runs pytest and returns its exit code (non-zero fails the target).

    Args:
        argv: `sys.argv`; the test files follow the program name.

    Returns:
        pytest's exit code.

    Raises:
        SystemExit: when no test file is given.
    """
    test_files = argv[1:]
    if not test_files:
        raise SystemExit(
            "pytest_runner needs the test files to run as arguments; "
            "declare the target with `pytest_test` from //tools:pytest.bzl. "
            f"Received: argv={argv}"
        )
    return int(pytest.main(_pytest_args(test_files)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
