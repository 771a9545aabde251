"""`tf.distribute` strategies and mixed-precision policies by name."""

import json
import math
import os
import re
import signal
import socket
import threading
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
from tensorflow.python.eager import context as eager_context

from keras_transformer.checks import is_real

STRATEGIES = ("default", "one_device", "mirrored", "multi_worker", "tpu")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


# How long the workers of a multi-worker cluster wait for each other at
# start-up; pods of a cluster job can take minutes to be scheduled.
DEFAULT_WORKER_STARTUP_TIMEOUT = 600


def create_strategy(
    name: str = "default",
    num_gpus: int = 0,
    tpu_address: str | None = None,
    worker_startup_timeout: float = DEFAULT_WORKER_STARTUP_TIMEOUT,
) -> tf.distribute.Strategy:
    """Builds the strategy that `model.fit` runs under.

    Args:
        name: "default" (no distribution), "one_device" (the first GPU, or
            the CPU), "mirrored" (all-reduce across the local GPUs: the
            paper's 8 GPUs), "multi_worker" (MirroredStrategy across the
            machines listed in the `TF_CONFIG` environment variable; SIGTERM
            then terminates the process, as under the other strategies,
            instead of going to TensorFlow's preemption notifier, so
            `tf.distribute.experimental.PreemptionCheckpointHandler` does
            not see it) or "tpu".
        num_gpus: GPUs to use with "mirrored" (0: all visible; when the
            machine has none, the CPU's logical devices).
        tpu_address: the TPU of "tpu", which needs it: its name, a
            "grpc://IP:8470" address, or "local" for a TPU VM's own.
        worker_startup_timeout: with "multi_worker", the seconds every
            worker waits for all the others to start before it fails; with
            "tpu" at a "grpc://" address, the seconds it waits for the
            address to accept a connection.

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        ValueError: for an unknown name, more GPUs than visible, `num_gpus`
            with a strategy other than "mirrored", `tpu_address` missing
            with "tpu" or given with another strategy, "multi_worker"
            without a valid `TF_CONFIG`, or a `worker_startup_timeout` that
            is not a positive number.
        TimeoutError: when the workers of "multi_worker" did not all start
            within `worker_startup_timeout` (it names the missing ones), or
            a "grpc://" TPU address accepted no connection within it.
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
    if name in ("multi_worker", "tpu") and not (
        is_real(worker_startup_timeout)
        and 0 < worker_startup_timeout < math.inf
    ):
        raise ValueError(
            "`worker_startup_timeout` must be a positive number of seconds "
            "(--worker_startup_timeout), e.g. 600. "
            f"Received: worker_startup_timeout={worker_startup_timeout!r}"
        )
    if name == "multi_worker":
        # Before anything initialises TensorFlow's runtime (even listing
        # devices): the collective ops are configured at startup.
        _check_tf_config()
        return _multi_worker_strategy(worker_startup_timeout)
    gpus = tf.config.list_logical_devices("GPU")
    # Without GPUs, "mirrored" replicates over the CPU's logical devices
    # (how the tests run 8 replicas on one CPU).
    devices = gpus or tf.config.list_logical_devices("CPU")
    if num_gpus < 0 or num_gpus > len(devices):
        visible = (
            f"the {len(gpus)} visible GPUs"
            if gpus
            else (
                f"the {len(devices)} logical CPU devices "
                "(TensorFlow sees no GPU)"
            )
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
    _wait_for_grpc_address(tpu_address, worker_startup_timeout)
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu_address
        )
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (tf.errors.OpError, ValueError, OSError) as error:
        # TensorFlow's traceback would end in e.g. "TPUs not found in the
        # cluster" from deep inside its TPU initialisation; a TPU name off
        # Google Cloud, in urllib's error from the metadata server.
        message = getattr(error, "message", str(error)).split(". ")[0]
        raise ValueError(
            f"No TPU could be set up at tpu_address (--tpu): {message}. Pass "
            "the TPU's name (resolved through Google Cloud's metadata server, "
            "so only on a Google Cloud VM) or grpc://IP:8470 address, or "
            f"'local' on a TPU VM. Received: tpu_address={tpu_address!r}"
        ) from None
    return tf.distribute.TPUStrategy(resolver)


def _wait_for_grpc_address(tpu_address, timeout):
    """Waits up to `timeout` seconds for a TCP connection to a
    "grpc://HOST:PORT" TPU address, and raises a TimeoutError naming it if
    none is made. TensorFlow would wait for the address forever, deaf to
    Ctrl-C; this wait can be interrupted. Other addresses pass."""
    match = re.fullmatch(r"grpc://(\[[^\]]+\]|[^:/]+):(\d+)/?", tpu_address)
    if not match:
        return
    host, port = match.group(1).strip("[]"), int(match.group(2))
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(left, 0.1)):
                return
        except OSError as error:
            reason = error
        if time.monotonic() + 1 >= deadline:
            break
        time.sleep(1)  # Refused at once: nothing listens yet.
    raise TimeoutError(
        f"Nothing accepted a connection at tpu_address (--tpu) {tpu_address} "
        f"within {timeout:g} s ({reason}). Check that the TPU is up and the "
        "address and port (8470) are right, or raise --worker_startup_timeout. "
        f"Received: tpu_address={tpu_address!r}"
    )


def _multi_worker_strategy(startup_timeout: float):
    """`MultiWorkerMirroredStrategy` whose start-up wait is bounded, and
    after which SIGTERM stops the process again."""
    tf_config = json.loads(os.environ["TF_CONFIG"])
    workers = tf_config["cluster"]["worker"]
    index = tf_config["task"]["index"]
    # The strategy's own coordination service waits forever for a missing
    # worker, holding the GIL (no Python watchdog can run) with SIGTERM
    # caught. As a barrier with a timeout, registration fails on every
    # worker that waits, the leader (worker 0) included.
    eager_context.context().configure_coordination_service(
        service_type="standalone",
        service_leader="/job:worker/replica:0/task:0",
        cluster_register_timeout_in_ms=int(startup_timeout * 1000),
        coordinated_jobs=[
            coordination_config_pb2.CoordinatedJob(
                name="worker", num_tasks=len(workers)
            )
        ],
    )
    # Not an argument of configure_coordination_service: set on its config.
    service = eager_context.context().coordination_service
    service.cluster_register_with_barrier = True
    handler = signal.getsignal(signal.SIGTERM)
    # Python's Ctrl-C handler would run only after the wait, which holds the
    # GIL: the default action ends the process at once (nothing is trained
    # yet). Not if SIGINT is ignored (a background job) or handled otherwise.
    # SIGTERM is TensorFlow's during the wait.
    main_thread = threading.current_thread() is threading.main_thread()
    interrupt = signal.getsignal(signal.SIGINT)
    default_ctrl_c = main_thread and interrupt is signal.default_int_handler
    if default_ctrl_c:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
    except tf.errors.DeadlineExceededError as error:
        raise TimeoutError(
            _startup_timeout_message(
                error.message, workers, index, startup_timeout
            )
        ) from None
    finally:
        if default_ctrl_c:
            signal.signal(signal.SIGINT, interrupt)
    if main_thread:
        # TensorFlow's preemption notifier now swallows SIGTERM (it is for
        # tf.distribute's PreemptionCheckpointHandler, unused here): a
        # stopped worker would train on until SIGKILL. Restore the handler
        # (the default: terminate), as under the other strategies.
        signal.signal(
            signal.SIGTERM, signal.SIG_DFL if handler is None else handler
        )
    return strategy


def lost_worker_error(
    strategy: tf.distribute.Strategy, error: Exception, resume_step: int
) -> ConnectionError | None:
    """The user error for `error`, raised in this worker when another
    worker of its cluster stopped (crashed, killed, preempted), or None for
    any other error.

    This worker learns it either from the coordination service, once the
    other misses its heartbeats, or sooner from a collective whose
    connection to it broke (an `UnavailableError` naming it as the remote
    target); TensorFlow's traceback from deep inside the train step does
    not say what to do.

    Args:
        strategy: the training strategy.
        error: what the training raised.
        resume_step: the step a rerun resumes from (the last backup's).
    """
    if worker_count(strategy) == 1:
        return None
    message = getattr(error, "message", "")
    heartbeats = re.search(
        r"stopped sending "
        r"heartbeats\):\s*((?:/job:worker/replica:0/task:\d+\s*)*)",
        message,
    )
    if heartbeats:
        tasks = re.findall(r"task:(\d+)", heartbeats[1])
    elif isinstance(error, tf.errors.UnavailableError):
        tasks = re.findall(
            r"remote target /job:worker/replica:0/task:(\d+)", message
        )
    else:
        return None
    named = ", ".join(f"worker {task}" for task in sorted(set(map(int, tasks))))
    return ConnectionError(
        f"The cluster lost {named or 'a worker'} during training (it stopped "
        "answering: crashed, killed or preempted), so this worker stops too: "
        "restart every worker with the same command to resume from step "
        f"{resume_step}, the last backup."
    )


def _startup_timeout_message(message, workers, index, startup_timeout):
    """The one-line error of a cluster that did not assemble in time."""
    # The leader (worker 0) lists the workers that never registered; the
    # others only see that the leader did not answer.
    _, listed, stragglers = message.partition("timed out task names:")
    if listed:
        tasks = re.findall(r"/job:worker/replica:0/task:(\d+)", stragglers)
        missing = sorted({int(task) for task in tasks} - {index})
    else:
        missing = [0] if index else []
    named = ", ".join(
        f"worker {task} ({workers[task]})"
        for task in missing
        if task < len(workers)
    )
    return (
        f"Worker {index} of {len(workers)} waited {startup_timeout:g} s for "
        f"the cluster in TF_CONFIG to start, but {named or 'some worker'} "
        "did not connect: start every worker of the cluster (the same "
        "cluster list, each with its own task index) and check that their "
        "addresses are reachable, or raise --worker_startup_timeout."
    )


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


def sum_over_workers(strategy: tf.distribute.Strategy):
    """A function of one integer that returns its sum over the workers.

    A collective, as `values_of_workers`, but compiled once: each call then
    costs one small all-reduce, cheap enough to run at every training step
    (two workers on one machine: 23-26 ms a step of a tiny model with it,
    23-24 ms without, 75-79 ms with `values_of_workers`' eager gather).
    """

    @tf.function
    def total(value):
        def replica_fn(local):
            context = tf.distribute.get_replica_context()
            # Each worker's replicas all hold its value: count it once.
            share = (
                local / context.num_replicas_in_sync * worker_count(strategy)
            )
            return context.all_reduce(tf.distribute.ReduceOp.SUM, share)

        result = strategy.run(replica_fn, args=(value,))
        return strategy.experimental_local_results(result)[0]

    return lambda value: round(float(total(tf.constant(value, tf.float64))))
