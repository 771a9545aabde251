"""Pytest set-up shared by every test: the TF backend, quiet logs, one seed."""

import gc
import os

import pytest

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Before TensorFlow, so that the tests run with the package's settings of it.
import keras_transformer  # noqa: F401, I001
import tensorflow as tf

# Split the CPU into 8 logical devices before TensorFlow initialises, so the
# distribution tests can run MirroredStrategy with 8 replicas (one per GPU
# of the design target). Ops without a strategy still run on CPU:0.
NUM_LOGICAL_CPUS = 8
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS,
)

# Under `pytest -n 2` each worker process is a TensorFlow runtime whose ops
# would each use a thread per core: four busy threads on two cores, whose
# spinning thread pools slow each other (the decoding, visualization and
# model tests took 100-130 s with one intra-op thread per worker against
# 140 s at the default). Tests that start processes of their own leave
# those at TensorFlow's default.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    tf.config.threading.set_intra_op_parallelism_threads(1)

# The modules imported so far (TensorFlow's and Keras's, millions of
# objects that live as long as the process) leave Python's cyclic garbage
# collector, which otherwise walks them at each full collection: a third
# of the collector's time in the tests (4.4 of 11.9 s over the translator
# and model tests).
gc.freeze()


def pytest_runtest_setup(item):
    """Fails a test marked `xdist_group` that `--dist loadgroup` did not
    group: classes set up twice and multi-process tests running against
    each other would only show as a slower run."""
    if (
        os.environ.get("PYTEST_XDIST_WORKER")
        # A worker's --dist is "no"; xdist keeps whether it was loadgroup.
        and getattr(item.config.option, "loadgroup", False)
        and item.get_closest_marker("xdist_group")
        and "@" not in item.nodeid
    ):
        pytest.fail(
            "pytest-xdist did not apply this test's xdist_group mark (pytest "
            f"{pytest.__version__} with pytest-xdist: see "
            "pytest-dev/pytest-xdist#1386); install the versions that "
            "setup.py's test extra allows: pip install -e '.[test]'",
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable(report):
    """Sends a subtest's arguments to the pytest-xdist controller as text.

    pytest 9.0 sends them as they are, and execnet cannot send most objects
    (a MirroredStrategy failed the test that passed it); pytest 9.1 sends
    their repr (pytest-dev/pytest-xdist#1273), as this does.
    """
    data = yield
    context = (data or {}).get("_subtest.context")
    if context and context.get("kwargs"):
        context["kwargs"] = {
            name: value if isinstance(value, str) else repr(value)
            for name, value in context["kwargs"].items()
        }
    return data
