"""Input-pipeline throughput and padding efficiency on the demo corpus.

Prints one JSON line. Tokens/s counts model positions with real tokens
(EOS and BOS included) of both sides; compare it with the training
throughput to see that input is never the bottleneck.

    python -m benchmarks.input_pipeline --batch_tokens=4096

(from the repository root, or with the package installed).
"""

import json
import os
import tempfile
import time

from absl import app, flags

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

from keras_transformer.data import (
    batching,
    pipeline,
    sources,
)
from keras_transformer.data import tokenizer as tokenizer_lib

_BATCH_TOKENS = flags.DEFINE_integer(
    "batch_tokens", 4096, "Token budget per batch and per side."
)
_MAX_LENGTH = flags.DEFINE_integer("max_length", 256, "Longest sequence.")
_VOCAB_SIZE = flags.DEFINE_integer("vocab_size", 3000, "BPE pieces.")
_EPOCHS = flags.DEFINE_integer("epochs", 2, "Epochs of batches to time.")


def main(argv):
    del argv  # Unused.
    start = time.perf_counter()
    english, german = sources.load_pairs("demo", "train", "en", "de")
    load_seconds = time.perf_counter() - start

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        tokenizer = tokenizer_lib.SubwordTokenizer.from_file(
            tokenizer_lib.train_subword_vocab(
                english + german,
                _VOCAB_SIZE.value,
                os.path.join(folder, "demo"),
            )
        )
    vocab_seconds = time.perf_counter() - start

    pairs = tf.data.Dataset.from_tensor_slices((english, german))
    start = time.perf_counter()
    source_ids, target_ids = pipeline.tokenize_pairs(pairs, tokenizer)
    tokenize_seconds = time.perf_counter() - start
    source_ids, target_ids, stats = pipeline.filter_by_length(
        source_ids, target_ids, _MAX_LENGTH.value
    )
    # Real model positions: tokens plus EOS (source) and BOS (target).
    real_tokens = stats.source_tokens + stats.target_tokens
    real_tokens += 2 * stats.num_examples

    examples = batching.PairsInMemory(source_ids, target_ids)
    dataset = batching.token_batches(
        examples, _BATCH_TOKENS.value, _MAX_LENGTH.value, seed=0
    )
    batches = 0
    largest = 0
    start = time.perf_counter()
    for _ in range(_EPOCHS.value):
        for features, _ in dataset:
            batches += 1
            largest = max(largest, int(tf.size(features["source_ids"])))
    batch_seconds = time.perf_counter() - start

    result = {
        "benchmark": "input_pipeline",
        "corpus": "demo en-de train",
        "batch_tokens": _BATCH_TOKENS.value,
        "max_length": _MAX_LENGTH.value,
        "vocab_size": tokenizer.vocab_size,
        "pairs": stats.num_pairs,
        "examples_dropped_empty": stats.dropped_empty,
        "examples_dropped_overlong": stats.dropped_overlong,
        "load_seconds": round(load_seconds, 3),
        "vocab_train_seconds": round(vocab_seconds, 3),
        "tokenize_tokens_per_second": round(
            (stats.source_tokens + stats.target_tokens) / tokenize_seconds
        ),
        "batching_tokens_per_second": round(
            _EPOCHS.value * real_tokens / batch_seconds
        ),
        "batches_per_second": round(batches / batch_seconds, 1),
        "batches_per_epoch": batches // _EPOCHS.value,
        "largest_batch_positions": largest,
        "padding_efficiency": round(batching.padding_efficiency(dataset), 4),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    app.run(main)
