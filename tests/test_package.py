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
