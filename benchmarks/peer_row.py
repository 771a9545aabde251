"""keras_transformer as a row of the peer harness (`../shared/bench/`).

`benchmarks/run_peers.sh` links this file into the harness as
`peers/keras_transformer_peer.py`, where it imports the harness's `common`
(configs, timing, the JSON line) and times the code of `workloads.py`:

  train  : one Adam step of `compile_for_training` (the paper's model,
           dropout and label smoothing 0.1), `--xla` for `jit_compile`;
           `--gradient_accumulation_steps=N` takes the step's 64 sentences
           as N batches of 64 / N (the same update, less memory).
  decode : encoder + cached beam search, beam 4, exactly 40 steps;
           `--saved_model` exports it in a subprocess (as the CTranslate2
           row converts its model) and times the SavedModel loaded in this
           process, which never builds the Keras model: its peak RSS is
           a server's. `--xla` compiles the search with XLA.

`--intra_op_threads=N` sets TensorFlow's threads per op before its first op,
as TF Serving's `--tensorflow_intra_op_parallelism` does (0: TensorFlow's
default, one per core). With the two parallel searches of a decode row, 1
runs each op whole on its search's thread (export/README.md).
"""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time

# The harness's `common` sits beside the link; the project beside this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
import common


def extra_args(parser):
    parser.add_argument("--xla", action="store_true", help="jit_compile=True")
    parser.add_argument(
        "--saved_model",
        action="store_true",
        help="decode through an exported and reloaded SavedModel",
    )
    parser.add_argument(
        "--gradient_accumulation_steps",
        type=int,
        default=1,
        help="train: the step's sentences as N batches (the same update)",
    )
    parser.add_argument(
        "--intra_op_threads",
        type=int,
        default=0,
        help="threads per TensorFlow op (0: TensorFlow's default)",
    )


def body(args):
    # First: the package sets TensorFlow's environment (backend, oneDNN
    # kernels).
    import keras_transformer  # noqa: I001
    import keras
    import numpy as np
    import tensorflow as tf

    from benchmarks import workloads
    from keras_transformer import serving

    # Fixed once TensorFlow's runtime starts, so before the first op.
    tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    start = time.perf_counter()
    batch = common.DECODE["batch"]
    export_s = None
    if args.workload == "decode" and args.saved_model:
        folder = tempfile.mkdtemp()
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        command = [
            sys.executable,
            os.path.abspath(__file__),
            "--export",
            folder,
        ]
        command += [args.config, str(args.seed)] + (
            ["--xla"] if args.xla else []
        )
        subprocess.run(command, check=True)
        export_s = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
        decoder = serving.load_exported(folder)
        vocab_size = workloads.CONFIGS[args.config]["vocab_size"]
        step = workloads.search_fn(decoder, vocab_size, batch)
        params = sum(int(np.prod(w.shape)) for w in decoder.model_weights)
    else:
        model = workloads.build_model(args.config, seed=args.seed)
        params = model.count_params()
        if args.workload == "train":
            step = workloads.train_step_fn(
                model,
                args.xla,
                seed=args.seed,
                gradient_accumulation_steps=args.gradient_accumulation_steps,
            )
        else:
            step, _ = workloads.decode_fn(model, args.xla, batch)
    setup_s = time.perf_counter() - start
    label = f"keras_transformer-{args.config}-{args.workload}"
    times, first = common.time_steps(step, args.warmup, args.steps, label)
    return dict(
        versions={
            "keras_transformer": keras_transformer.__version__,
            "keras": keras.__version__,
            "tensorflow": tf.__version__,
        },
        times=times,
        first_s=first,
        setup_s=setup_s,
        params=params,
        extra={
            "xla": args.xla,
            "saved_model": args.saved_model,
            "export_s": export_s,
            "intra_op_threads": args.intra_op_threads,
            "gradient_accumulation_steps": args.gradient_accumulation_steps,
        },
    )


def export(folder, config, seed, xla):
    """Subprocess of `--saved_model`: builds the model and exports it."""
    from benchmarks import workloads

    model = workloads.build_model(config, seed=int(seed))
    workloads.export_decoder(model, xla, folder)


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--export":
        export(*sys.argv[2:5], xla="--xla" in sys.argv[5:])
        sys.exit(0)
    common.run_main(
        "keras-transformer", "keras_transformer (Keras 3, TF)", body, extra_args
    )
