"""The Transformer of "Attention Is All You Need" as Keras 3 layers."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# TensorFlow turns its oneDNN kernels on by itself only on CPUs with
# AVX512-VNNI, AVX512-BF16, AVX-VNNI or AMX; on others (an AMD Zen 3 without
# AVX-512) they still trained 1.1-1.3x faster than its Eigen kernels
# (benchmarks/PERFORMANCE.md). Read when TensorFlow is first imported, so this
# acts only if keras_transformer is imported first; TF_ENABLE_ONEDNN_OPTS=0
# keeps TensorFlow's kernels.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import keras  # after KERAS_BACKEND is set

if keras.backend.backend() != "tensorflow":
    # The layers call TensorFlow ops (tf.nn, tf.raw_ops, tf.custom_gradient)
    # and would fail deep inside another backend.
    raise ImportError(
        "keras_transformer runs on Keras's TensorFlow backend, but Keras uses "
        f"{keras.backend.backend()!r} (KERAS_BACKEND or ~/.keras/keras.json). "
        "Set KERAS_BACKEND=tensorflow before Keras is first imported."
    )

# `training` registers the optimizer, schedule, loss and metrics with Keras,
# so that a compiled `.keras` file (training's) loads with
# `keras.saving.load_model` after `import keras_transformer` alone.
from keras_transformer import training
from keras_transformer.config import TransformerConfig
from keras_transformer.model import (
    Transformer,
    build_transformer,
)

__version__ = "0.1.0"

__all__ = ["Transformer", "TransformerConfig", "build_transformer"]
