"""The peer harness's workloads (`../shared/bench/peers/common.py`) on our
package: one Adam step on 64 x 32 + 64 x 32 tokens, and beam 4 over 32
sentences of 32 tokens for exactly 40 decoder steps (EOS disabled).

Used by `train_step.py`, `decode.py` and the harness row
`peers/keras_transformer_peer.py`, so all three time the same code.
"""

# First: the package sets TensorFlow's environment (backend, oneDNN kernels).
import keras_transformer as kt  # noqa: I001
import time
import types

import numpy as np
import tensorflow as tf

from keras_transformer import serving, tokens
from keras_transformer.decoding.transformer_search import (
    DEFAULT_PARALLEL_SEARCHES,
    transformer_beam_search,
)
from keras_transformer.training import trainer

# As `CONFIGS`, `TRAIN`, `DECODE` of the harness's peers/common.py.
CONFIGS = {
    "base": dict(
        d_model=512, num_heads=8, d_ff=2048, num_layers=6, vocab_size=32000
    ),
    "small": dict(
        d_model=256, num_heads=4, d_ff=1024, num_layers=3, vocab_size=8000
    ),
}
TRAIN = dict(batch=64, src_len=32, tgt_len=32)
DECODE = dict(batch=32, src_len=32, beam=4, steps=40)
FIRST_TOKEN_ID = 4  # random ids avoid the special ids 0-3


def build_model(config_name: str, seed: int = 0):
    """The paper's model (post-norm, dropout 0.1, label smoothing 0.1,
    shared embeddings) at the harness's size."""
    import keras

    keras.utils.set_random_seed(seed)
    config = kt.TransformerConfig.preset("base", **CONFIGS[config_name])
    return kt.build_transformer(config)


def train_step_fn(
    model,
    jit_compile: bool,
    seed: int = 0,
    gradient_accumulation_steps: int = 1,
):
    """A function that runs one optimizer step and waits for it; with
    `gradient_accumulation_steps` N, the step's 64 sentences go through
    the model as N batches of 64 / N (the same update)."""
    config = model.config
    rng = np.random.default_rng(seed)
    shape = (TRAIN["batch"], TRAIN["src_len"])
    source = rng.integers(FIRST_TOKEN_ID, config.vocab_size, shape, np.int32)
    target = rng.integers(
        FIRST_TOKEN_ID,
        config.vocab_size,
        (TRAIN["batch"], TRAIN["tgt_len"] + 1),
        np.int32,
    )
    features = {"source_ids": source, "target_ids": target[:, :-1]}
    labels = target[:, 1:]
    steps = gradient_accumulation_steps
    if steps > 1:
        # [N, 64 / N, 32]: the N batches of one step, as a group.
        def group(ids):
            return ids.reshape(steps, -1, ids.shape[-1])

        features = {name: group(ids) for name, ids in features.items()}
        labels = group(labels)
    trainer.compile_for_training(
        model,
        warmup_steps=4000,
        jit_compile=jit_compile,
        gradient_accumulation_steps=steps,
    )

    def step():
        model.train_on_batch(features, labels)  # Returns numpy: synced.

    return step


def parallel_searches_for(jit_compile: bool, requested=None) -> int:
    """The side by side searches of a decoding call: `requested` (a positive
    int) or, if None or 0, as many as `Translator` runs; always 1 with XLA,
    which runs one program."""
    if jit_compile:
        return 1
    return requested or DEFAULT_PARALLEL_SEARCHES


class FixedLengthDecoder(tf.Module):
    """Encoder + cached beam search for exactly `DECODE["steps"]` steps
    (EOS disabled), on token ids; exportable as a SavedModel.
    `parallel_searches` as `parallel_searches_for`'s `requested`."""

    def __init__(self, model, jit_compile: bool, parallel_searches=None):
        super().__init__()
        self.model_weights = [w.value for w in model.weights]
        # A plain namespace is not tracked (a list would be, and would save
        # the Keras model's variables a second time): only the weights are.
        self._holder = types.SimpleNamespace(model=model)
        self.jit_compile = jit_compile
        self.parallel_searches = parallel_searches_for(
            jit_compile, parallel_searches
        )
        self.search = tf.function(
            self._search,
            input_signature=[tf.TensorSpec([None, None], tf.int32)],
            jit_compile=jit_compile,
            autograph=False,
        )

    def _search(self, source_ids):
        batch = tf.shape(source_ids)[0]
        result = transformer_beam_search(
            self._holder.model,
            source_ids,
            DECODE["beam"],
            tf.fill([batch], DECODE["steps"]),
            max_decode_steps=DECODE["steps"],
            eos_id=-1,  # Never generated: every hypothesis runs all steps.
            # XLA needs fixed-size caches; without it, in-place ones copy
            # nothing.
            fixed_size=self.jit_compile,
            parallel_searches=self.parallel_searches,
        )
        return result.ids, result.scores


def export_decoder(
    model, jit_compile: bool, folder: str, parallel_searches=None
) -> None:
    """Writes the `FixedLengthDecoder` of `model` as a SavedModel."""
    tf.saved_model.save(
        FixedLengthDecoder(model, jit_compile, parallel_searches), folder
    )


def decode_source(vocab_size: int, batch: int):
    """The decode workload's source ids: int32 [batch, 32], EOS last."""
    rng = np.random.default_rng(0)
    source = rng.integers(
        FIRST_TOKEN_ID, vocab_size, (batch, DECODE["src_len"]), np.int32
    )
    source[:, -1] = tokens.EOS_ID
    return source


def search_fn(decoder, vocab_size: int, batch: int):
    """A function that runs one beam-search call of `decoder` (a
    `FixedLengthDecoder` or its reloaded SavedModel) and waits for it."""
    source = tf.constant(decode_source(vocab_size, batch))

    def step():
        ids, _ = decoder.search(source)
        return ids.numpy()

    return step


def decode_fn(
    model,
    jit_compile: bool,
    batch: int,
    saved_model_dir=None,
    parallel_searches=None,
):
    """A function that runs one beam-search call and waits for it, and the
    module it calls: a reloaded SavedModel when `saved_model_dir` is given
    (exported there first). `parallel_searches` as `FixedLengthDecoder`'s."""
    if saved_model_dir:
        export_decoder(model, jit_compile, saved_model_dir, parallel_searches)
        # The loaded object owns the restored variables: keep it alive.
        decoder = serving.load_exported(saved_model_dir)
    else:
        decoder = FixedLengthDecoder(model, jit_compile, parallel_searches)
    return search_fn(decoder, model.config.vocab_size, batch), decoder


def set_threads(threads: int) -> None:
    """TensorFlow's intra-op and inter-op threads (0: its defaults); fixed
    once its runtime starts, so before the first op."""
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def time_calls(fn, warmup: int, steps: int):
    """(median seconds of `steps` timed calls after `warmup`, first call s,
    the timed calls' seconds in order)."""
    times = []
    first = None
    for index in range(warmup + steps):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        first = elapsed if first is None else first
        if index >= warmup:
            times.append(elapsed)
    return float(np.median(times)), first, times


def peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
