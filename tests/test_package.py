"""What importing the package does to TensorFlow's environment."""

import os
import subprocess
import sys

import pytest

_REPORT_ONEDNN = (
    "import keras_transformer, os\n"
    "from tensorflow.python.util import _pywrap_util_port\n"
    "print(os.environ['TF_ENABLE_ONEDNN_OPTS'], "
    "_pywrap_util_port.IsMklEnabled())\n"
)


@pytest.mark.parametrize(
    "user_setting, expected", [(None, "1 True"), ("0", "0 False")]
)
def test_imported_before_tensorflow_turns_onednn_on_unless_the_user_chose(
    user_setting, expected
):
    # TensorFlow reads the variable once, when it is first imported, so only
    # a fresh process shows what importing the package first does.
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    if user_setting is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = user_setting
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [sys.executable, "-c", _REPORT_ONEDNN],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split("\n")[-2] == expected


def test_another_keras_backend_is_refused_on_import():
    # Only the TensorFlow backend is installed, so the check is shown by a
    # Keras that reports another one.
    script = (
        "import keras\n"
        "keras.backend.backend = lambda: 'jax'\n"
        "import keras_transformer\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "ImportError: keras_transformer runs on Keras's TensorFlow backend, "
        "but Keras uses 'jax' (KERAS_BACKEND or ~/.keras/keras.json). Set "
        "KERAS_BACKEND=tensorflow before Keras is first imported."
    )
