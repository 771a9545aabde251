"""`tf.distribute` strategies and mixed-precision policies by name."""

import json
import os

import keras
import numpy as np
import tensorflow as tf
from absl import logging

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


def create_strategy(
    name: str = "default", num_gpus: int = 0, tpu_address: str | None = None
) -> tf.distribute.Strategy:
    """Builds the strategy that `model.fit` runs under.

    Args:
        name: "default" (no distribution), "one_device" (the first GPU, or
            the CPU), "mirrored" (all-reduce across the local GPUs: the
            paper's 8 GPUs), "multi_worker" (MirroredStrategy across the
            machines listed in the `TF_CONFIG` environment variable) or
            "tpu".
        num_gpus: GPUs to use with "mirrored" (0: all visible; when the
            machine has none, the CPU's logical devices).
        tpu_address: the TPU of "tpu", which needs it: its name, a
            "grpc://IP:8470" address, or "local" for a TPU VM's own.

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        ValueError: for an unknown name, more GPUs than visible, `num_gpus`
            with a strategy other than "mirrored", `tpu_address` missing
            with "tpu" or given with another strategy, or "multi_worker"
            without a valid `TF_CONFIG`.
    """
    if name not in STRATEGIES:
        raise ValueError(
            f"Unknown strategy; choose one of {', '.join(STRATEGIES)}. "
            f"Received: strategy={name!r}"
        )
    if num_gpus and name != "mirrored":
        # The other strategies would ignore it: a forgotten
        # --strategy=mirrored would train on one device.
        raise ValueError(
            "`num_gpus` chooses the GPUs of strategy='mirrored' only; pass "
            "strategy='mirrored' (--strategy=mirrored) to use several, or "
            f"leave num_gpus at 0. Received: strategy={name!r}, "
            f"num_gpus={num_gpus}"
        )
    if name == "tpu" and not tpu_address:
        # TensorFlow's own error names no argument to pass.
        raise ValueError(
            "strategy='tpu' needs the TPU to connect to: pass tpu_address "
            "(--tpu), its name or grpc://IP:8470 address, or 'local' on a "
            f"TPU VM. Received: strategy='tpu', tpu_address={tpu_address!r}"
        )
    if tpu_address and name != "tpu":
        # The other strategies would ignore it.
        raise ValueError(
            "`tpu_address` is for strategy='tpu' only: pass strategy='tpu' "
            "(--strategy=tpu) to train on that TPU, or no tpu_address. "
            f"Received: strategy={name!r}, tpu_address={tpu_address!r}"
        )
    if name == "multi_worker":
        # Before anything initialises TensorFlow's runtime (even listing
        # devices): the collective ops are configured at startup.
        _check_tf_config()
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    # Without GPUs, "mirrored" replicates over the CPU's logical devices
    # (how the tests run 8 replicas on one CPU).
    devices = gpus or tf.config.list_logical_devices("CPU")
    if num_gpus < 0 or num_gpus > len(devices):
        visible = (
            f"the {len(gpus)} visible GPUs"
            if gpus
            else f"the {len(devices)} logical CPU devices (TensorFlow sees no GPU)"
        )
        raise ValueError(
            f"`num_gpus` must be between 0 (all) and {visible}; check "
            f"CUDA_VISIBLE_DEVICES. Received: num_gpus={num_gpus}"
        )
    if num_gpus and not gpus:
        logging.warning(
            "--num_gpus=%d: TensorFlow sees no GPU, so strategy='mirrored' "
            "replicates over the CPU's logical devices.",
            num_gpus,
        )
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "one_device":
        device = gpus[0].name if gpus else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if name == "mirrored":
        chosen = devices[: num_gpus or len(devices)]
        return tf.distribute.MirroredStrategy([d.name for d in chosen])
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu_address)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (tf.errors.OpError, ValueError) as error:
        # TensorFlow's traceback would end in e.g. "TPUs not found in the
        # cluster" from deep inside its TPU initialisation.
        message = getattr(error, "message", str(error)).split(". ")[0]
        raise ValueError(
            f"No TPU could be set up at tpu_address (--tpu): {message}. Pass "
            "the TPU's name or grpc://IP:8470 address, or 'local' on a TPU "
            f"VM. Received: tpu_address={tpu_address!r}"
        ) from None
    return tf.distribute.TPUStrategy(resolver)


_TF_CONFIG_EXAMPLE = (
    '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
    '"task": {"type": "worker", "index": 0}} on the first machine'
)


def _check_tf_config():
    """Fails with a message naming the problem unless `TF_CONFIG` names a
    cluster of workers and this process's task among them."""
    raw = os.environ.get("TF_CONFIG", "")
    problem = _tf_config_problem(raw)
    if problem:
        raise ValueError(
            f"--strategy=multi_worker needs TF_CONFIG naming a cluster of "
            f"workers and this process's task: {problem}. E.g. "
            f"{_TF_CONFIG_EXAMPLE}. Received: TF_CONFIG={raw!r}"
        )


def _tf_config_problem(raw: str) -> str | None:
    """What is wrong with the `TF_CONFIG` string `raw`, or None."""
    if not raw.strip():
        return "it is not set"
    try:
        config = json.loads(raw)
    except ValueError as error:
        return f"it is not valid JSON ({error})"
    if not isinstance(config, dict):
        return "it is not a JSON object"
    cluster, task = config.get("cluster"), config.get("task")
    if not isinstance(cluster, dict) or not cluster:
        return 'it has no "cluster"'
    # Worker 0 does the chief's work (checkpoints, logs): a "chief" (or
    # "ps", "evaluator") task would wait for a peer that never comes.
    others = sorted(set(cluster) - {"worker"})
    if others:
        return (
            f"its cluster has {', '.join(map(repr, others))} tasks; only "
            '"worker" ones are supported (worker 0 is the chief)'
        )
    workers = cluster["worker"]
    if not isinstance(workers, list) or not workers:
        return 'its "worker" list is empty or not a list'
    if not isinstance(task, dict):
        return 'it has no "task"'
    if task.get("type") != "worker":
        return f'its task type is {task.get("type")!r}, not "worker"'
    index = task.get("index")
    if type(index) is not int or not 0 <= index < len(workers):
        return (
            f"its task index is {index!r}, not an integer from 0 to "
            f"{len(workers) - 1} (the cluster has {len(workers)} workers)"
        )
    return None


def set_precision(policy: str) -> None:
    """Sets Keras's global dtype policy (before the model is built).

    "mixed_bfloat16" and "mixed_float16" compute in 16 bits and keep the
    variables in float32; the model's logits stay float32. With
    "mixed_float16", `compile` wraps the optimizer in a
    `keras.optimizers.LossScaleOptimizer` (dynamic loss scaling).

    Raises:
        ValueError: for an unknown policy.
    """
    check_precision(policy)
    keras.config.set_dtype_policy(policy)


def check_precision(policy: str) -> None:
    """Fails unless `policy` is one of `PRECISIONS` (see `set_precision`).

    Raises:
        ValueError: naming the choices.
    """
    if policy not in PRECISIONS:
        raise ValueError(
            f"Unknown precision; choose one of {', '.join(PRECISIONS)}. "
            f"Received: mixed_precision={policy!r}"
        )


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process writes checkpoints, logs and the final model
    (worker 0 of a multi-worker cluster; always true otherwise)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    return resolver.task_type in ("chief", None) or (
        resolver.task_type == "worker" and resolver.task_id == 0
    )


def worker_count(strategy: tf.distribute.Strategy) -> int:
    """The machines (processes) that `strategy` trains on: the workers of a
    multi-worker cluster, else 1."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_type != "worker":
        return 1
    return len(resolver.cluster_spec().as_dict().get("worker", ()))


def values_of_workers(
    strategy: tf.distribute.Strategy, values: "list[int]"
) -> np.ndarray:
    """Every worker's `values` (integers), gathered on every worker.

    A collective operation: under a multi-worker strategy, every worker
    must call it at the same point of its run, and each then sees the same
    rows, so a check of them fails on all workers alike (one that failed
    alone would leave the others waiting in the next collective).

    Returns:
        An int64 array [workers, len(values)]: row i holds worker i's
        `values` (one row when there is one worker).
    """
    local = tf.constant(values, tf.int64)
    workers = worker_count(strategy)
    if workers == 1:
        return local.numpy()[np.newaxis]
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda context: local[tf.newaxis]
    )
    rows = strategy.gather(per_replica, axis=0).numpy()
    # Replicas are numbered worker by worker; a worker's rows are alike.
    return rows.reshape(workers, -1, len(values))[:, 0]
