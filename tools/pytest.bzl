"""`pytest_test`: a py_test that runs its test files through pytest."""

_RUNNER = "//tools:pytest_runner.py"

def pytest_test(name, srcs, size, deps = [], data = [], tags = [], **kwargs):
    """A py_test that runs `srcs` with pytest (tools/pytest_runner.py).

    Every test also gets pytest.ini (markers, --strict-markers) and
    tests/conftest.py, as `pytest` run from the workspace root would.

    Args:
      name: the target name, the test file's name without `.py`.
      srcs: the test files (usually one, `<name>.py`).
      size: Bazel's test size ("small", "medium", "large", "enormous"); no
        default, so that every test says how heavy it is.
      deps: py_library targets the test files import.
      data: extra runtime files.
      tags: test tags; "slow" for files with `@pytest.mark.slow` tests, which
        CI runs with pytest only (`--test_tag_filters=-slow`).
      **kwargs: passed on to py_test (timeout, flaky, shard_count, ...).
    """
    native.py_test(
        name = name,
        srcs = [_RUNNER] + srcs,
        main = _RUNNER,
        args = ["$(rootpath %s)" % src for src in srcs],
        size = size,
        deps = deps + ["//tests:conftest"],
        data = data + ["//:pytest.ini"],
        tags = tags,
        python_version = "PY3",
        srcs_version = "PY3",
        **kwargs
    )
