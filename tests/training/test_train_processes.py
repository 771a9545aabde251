"""train.py as real processes: killed and restarted, and two workers on
127.0.0.1 training together with MultiWorkerMirroredStrategy."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
from unittest import mock

import keras
import pytest
import tensorflow as tf

from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import distribution
from keras_transformer.training.schedule import TransformerSchedule
from tests.data import fixtures
from tests.test_case import TestCase
from tests.training.test_trainer import write_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
TINY = "num_layers=1,d_model=32,d_ff=64,num_heads=4,max_length=32"


def train_command(data, model_dir, *flags, model=TINY):
    """train.py on the fixture corpus with a one-layer model."""
    return [
        sys.executable,
        os.path.join(ROOT, "train.py"),
        "--preset=tiny",
        f"--override={model}",
        f"--data={data}",
        f"--model_dir={model_dir}",
        f"--vocab_size={fixtures.VOCAB_SIZE}",
        "--batch_tokens=128",
        "--warmup_steps=4",
        "--bleu_max_sentences=0",
        *flags,
    ]


def environment(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **extra)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [ROOT, env.get("PYTHONPATH")])
    )
    return env


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_workers(data, model_dir, *flags, model=TINY, workers=2, command=None):
    """train.py (or `command`) as `workers` processes of one cluster on
    127.0.0.1.

    Returns:
        The processes, worker 0 first, with their stdout and stderr piped.
    """
    addresses = [f"127.0.0.1:{free_port()}" for _ in range(workers)]
    processes = []
    for index in range(workers):
        tf_config = {
            "cluster": {"worker": addresses},
            "task": {"type": "worker", "index": index},
        }
        processes.append(
            subprocess.Popen(
                command or train_command(data, model_dir, *flags, model=model),
                env=environment(TF_CONFIG=json.dumps(tf_config)),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return processes


def run_workers(data, model_dir, *flags, model=TINY, workers=2):
    """`start_workers`, to their end.

    Returns:
        Each worker's (returncode, stdout, stderr).
    """
    processes = start_workers(
        data, model_dir, *flags, model=model, workers=workers
    )
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=300))
    finally:
        for process in processes:
            process.kill()
    return [
        (process.returncode, stdout, stderr)
        for process, (stdout, stderr) in zip(processes, outputs)
    ]


def sigint_is_caught(pid):
    """Whether process `pid` has a handler for SIGINT (Linux's
    /proc/PID/status; False once it has ended)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as file:
            status = file.read()
    except FileNotFoundError:
        return False
    caught = int(
        re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.M).group(1), 16
    )
    return bool(caught & (1 << (signal.SIGINT - 1)))


def start_training_script(folder, data, code, *args):
    """Two workers of a cluster on 127.0.0.1, each running the Python `code`,
    where `train(**settings)` is `trainer.run_training` of the tiny model
    under strategy "multi_worker" (on `data`, into `folder/run`) and
    `worker` is the worker's index; `sys.argv[1:]` are `args`.

    Returns:
        The processes, worker 0 first, with their stdout and stderr piped.
    """
    script = fixtures.write(
        os.path.join(folder, "train_two.py"),
        "import json, os, signal, sys\n"
        "import keras\n"
        "import numpy as np\n"
        "from keras_transformer.training "
        "import callbacks, preemption, trainer\n"
        "from tests.data import fixtures\n"
        "from tests.training.test_trainer import tiny_config\n"
        "worker = json.loads(os.environ['TF_CONFIG'])['task']['index']\n"
        "def train(**settings):\n"
        "    return trainer.run_training(\n"
        f"        tiny_config(), data={data!r}, src_lang='en', tgt_lang='de',\n"
        f"        model_dir={os.path.join(folder, 'run')!r},\n"
        "        vocab_size=fixtures.VOCAB_SIZE, batch_tokens=128,\n"
        "        warmup_steps=4, strategy='multi_worker', jit_compile=False,\n"
        "        verbose=0, **settings)\n" + code,
    )
    return start_workers(data, None, command=[sys.executable, script, *args])


def wait_for_file(processes, path, timeout=240):
    """Waits until `path` exists, failing if one of `processes` ends first
    (naming it, with its stderr) or after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        for index, process in enumerate(processes):
            if process.poll() is not None:
                raise AssertionError(
                    f"process {index} ended before {path} was written: "
                    f"{process.communicate()[1][-3000:]}"
                )
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} was not written in {timeout} s")
        time.sleep(0.2)


def signal_training_worker(processes, path, signum):
    """Sends worker 1 of `start_workers`' `processes` `signum` once `path`
    exists (see `wait_for_file`).

    Returns:
        Each worker's stderr, once all ended.
    """
    try:
        wait_for_file(processes, path)
        processes[1].send_signal(signum)
        return [process.communicate(timeout=120)[1] for process in processes]
    finally:
        for process in processes:
            process.kill()


def write_one_word_corpus(folder):
    """The fixture pairs cut to their first words: every example then has at
    most 8 tokens, so with `max_length=8` every batch falls in one length
    bucket and has one shape, which XLA compiles once (each further bucket
    is another compilation of several seconds)."""
    for split in ("train", "dev"):
        for index, lang in enumerate(("en", "de")):
            lines = "".join(
                pair[index].split()[0] + "\n" for pair in fixtures.PAIRS
            )
            fixtures.write(os.path.join(folder, f"{split}.{lang}"), lines)
    return "text:" + os.path.join(folder, "train")


def checkpoint_files(folder):
    """{step: (mtime_ns, size)} of the kept checkpoints."""
    return {
        step: (os.stat(path).st_mtime_ns, os.stat(path).st_size)
        for step, path in callbacks_lib.list_checkpoints(folder)
    }


class TrainProcessesTest(TestCase):
    @pytest.mark.slow
    @pytest.mark.xdist_group("multi_core")
    def test_killed_run_resumes_from_its_last_checkpoint(self):
        folder = fixtures.tempdir(self)
        data = write_corpus(folder)
        model_dir = os.path.join(folder, "run")
        checkpoint_dir = os.path.join(model_dir, "checkpoints")
        command = train_command(
            data,
            model_dir,
            "--train_steps=40",
            "--steps_per_checkpoint=2",
            "--keep_checkpoints=20",
            "--nojit_compile",
        )
        process = subprocess.Popen(
            command,
            env=environment(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # Checkpoints appear complete (renamed after writing).
        try:
            wait_for_file(
                [process], callbacks_lib.checkpoint_path(checkpoint_dir, 4)
            )
        finally:
            process.kill()
        process.wait()
        process.stderr.close()
        self.assertEqual(process.returncode, -signal.SIGKILL)
        self.assertFalse(os.path.exists(os.path.join(model_dir, "model.keras")))
        before = checkpoint_files(checkpoint_dir)
        self.assertLess(max(before), 40)

        result = subprocess.run(
            command,
            env=environment(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Trained to step 40", result.stdout)
        self.assertIn(
            f"Training data: {len(fixtures.PAIRS)} pairs read", result.stdout
        )
        self.assertIn("padding efficiency", result.stdout)
        after = checkpoint_files(checkpoint_dir)
        # The restarted run continued after the last finished interval: it
        # rewrote none of the killed run's checkpoints (but perhaps the
        # newest: a kill before its interval's backup redoes the interval),
        # and wrote the rest.
        for step, stamp in before.items():
            if step < max(before):
                self.assertEqual(
                    after[step], stamp, f"ckpt-{step} was rewritten"
                )
        self.assertEqual(sorted(after), list(range(2, 41, 2)))
        model = keras.saving.load_model(os.path.join(model_dir, "model.keras"))
        self.assertEqual(int(model.optimizer.iterations.numpy()), 40)
        self.assertAllClose(
            model.optimizer.learning_rate,
            TransformerSchedule(32, warmup_steps=4)(40),
        )

    @pytest.mark.slow
    @pytest.mark.xdist_group("multi_core")
    def test_two_workers_train_together_to_identical_weights(self):
        folder = fixtures.tempdir(self)
        data = write_one_word_corpus(folder)
        model_dir = os.path.join(folder, "run")
        results = run_workers(
            data,
            model_dir,
            "--strategy=multi_worker",  # XLA on: the default
            "--train_steps=3",
            "--steps_per_checkpoint=1",
            model=TINY.replace("max_length=32", "max_length=8"),
        )
        for returncode, stdout, stderr in results:
            self.assertEqual(returncode, 0, stderr[-3000:])
            # No pair was longer than the one bucket (one dropped would only
            # shrink the data, silently).
            self.assertIn(f"{len(fixtures.PAIRS)} kept (0 dropped", stdout)

        chief = keras.saving.load_model(os.path.join(model_dir, "model.keras"))
        other = keras.saving.load_model(
            os.path.join(model_dir, "workers", "worker-1", "model.keras")
        )
        self.assertEqual(int(chief.optimizer.iterations.numpy()), 3)
        self.assertEqual(int(other.optimizer.iterations.numpy()), 3)
        # Each worker read its own shard of the data: only the all-reduced
        # gradients can keep the two copies equal.
        for got, want in zip(other.get_weights(), chief.get_weights()):
            self.assertAllEqual(got, want)
        # And they did train: the weights moved since the first step.
        first = keras.saving.load_model(
            os.path.join(model_dir, "checkpoints", "ckpt-1.keras")
        )
        moved = [
            bool((a != b).any())
            for a, b in zip(first.get_weights(), chief.get_weights())
        ]
        self.assertGreater(sum(moved), len(moved) // 2)

        # A worker whose backup is lost would start over while the chief
        # resumes (and the chief would save their averaged gradients'
        # result): every worker stops instead, naming the steps.
        shutil.rmtree(os.path.join(model_dir, "workers", "worker-1", "backup"))
        results = run_workers(
            data,
            model_dir,
            "--strategy=multi_worker",
            "--train_steps=4",
            "--steps_per_checkpoint=1",
            model=TINY.replace("max_length=32", "max_length=8"),
        )
        for returncode, _stdout, stderr in results:
            self.assertEqual(returncode, 1, stderr[-3000:])
            self.assertIn(
                "error: The workers must resume from one step, but worker 0 "
                "from step 3, worker 1 from step 0",
                stderr,
            )
        self.assertEqual(
            sorted(checkpoint_files(os.path.join(model_dir, "checkpoints"))),
            [1, 2, 3],
        )

    @pytest.mark.slow
    @pytest.mark.xdist_group("multi_core")
    def test_a_stopped_worker_stops_every_worker_a_lost_one_the_cluster(self):
        # One cluster's life (each start of two workers costs ~20 s): SIGTERM
        # to one worker, a rerun, then a crash of one worker.
        folder = fixtures.tempdir(self)
        data = write_corpus(folder)
        model_dir = os.path.join(folder, "run")
        flags = [
            "--strategy=multi_worker",
            "--nojit_compile",
            "--steps_per_checkpoint=5",
            "--train_steps=100000",
        ]
        backups = [
            os.path.join(model_dir, "backup"),
            os.path.join(model_dir, "workers", "worker-1", "backup"),
        ]
        processes = start_workers(data, model_dir, *flags)
        # Once worker 1 saved its first backup, it trains.
        stderr = signal_training_worker(processes, backups[1], signal.SIGTERM)
        steps = [
            callbacks_lib.ResumableBackup.resume_step(path) for path in backups
        ]
        self.assertEqual(steps[0], steps[1])
        self.assertGreaterEqual(steps[0], 5)
        for index, process in enumerate(processes):
            self.assertEqual(process.returncode, 143, stderr[index][-3000:])
            self.assertNotIn("Traceback", stderr[index])
        self.assertIn(
            f"train.py: Training stopped on SIGTERM at step {steps[0]}, where",
            stderr[1],
        )
        self.assertIn(
            f"train.py: Training stopped on SIGTERM (sent to worker 1) at step "
            f"{steps[0]}, where its backup is saved: rerun the same command",
            stderr[0],
        )

        # Rerun, both resume there. Once the chief saved the second interval
        # after it (so both saved the first's backup), worker 1 crashes.
        resumed = steps[0] // 5 * 5 + 5
        processes = start_workers(data, model_dir, *flags)
        stderr = signal_training_worker(
            processes,
            callbacks_lib.checkpoint_path(
                os.path.join(model_dir, "checkpoints"), resumed + 5
            ),
            signal.SIGKILL,
        )
        self.assertEqual(processes[1].returncode, -signal.SIGKILL)
        for worker_stderr in stderr:
            self.assertIn(
                f"Resuming at step {steps[0]} of 100000 from the backup",
                worker_stderr,
            )
        # The other worker's collectives fail (a broken connection, or the
        # stopped one's missed heartbeats): one line, not a traceback.
        self.assertEqual(processes[0].returncode, 1, stderr[0][-3000:])
        lost = re.search(
            r"train.py: error: The cluster lost worker 1 during training .*"
            r"restart every worker with the same command to resume from step "
            r"([0-9]+), the last backup",
            stderr[0],
        )
        self.assertIsNotNone(lost, stderr[0][-3000:])
        self.assertGreaterEqual(int(lost.group(1)), resumed)
        self.assertNotIn("Traceback", stderr[0])

    @pytest.mark.slow
    @pytest.mark.xdist_group("multi_core")
    def test_sigterm_during_one_workers_save_stops_every_worker(self):
        # Worker 0 translated its whole dev set while worker 1, stopping,
        # waited for it in their next all-reduce: past a grace period.
        folder = fixtures.tempdir(self)
        data = write_corpus(folder)
        code = (
            "save = callbacks.save_model\n"
            "def save_model(model, path):\n"
            "    if worker == 1 and os.path.basename(path) == sys.argv[1]:\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "    save(model, path)\n"
            "callbacks.save_model = save_model\n"
            "class Record(keras.callbacks.Callback):\n"
            "    def on_train_batch_end(self, batch, logs=None):\n"
            "        self.last = np.asarray(logs['target_tokens']).item()\n"
            "    def on_epoch_end(self, epoch, logs=None):\n"
            "        print('tokens', self.last, "
            "logs['target_tokens'], flush=True)\n"
            "try:\n"
            "    train(train_steps=4, steps_per_checkpoint=2, "
            "bleu_every_steps=2,\n"
            "          bleu_max_sentences=2, extra_callbacks=(Record(),),\n"
            # Never reached: its agreement's collectives run on both.
            "          early_stopping_patience=5)\n"
            "except preemption.TrainingPreempted as stopped:\n"
            "    print('stopped', stopped.step, stopped.worker, flush=True)\n"
        )
        # At step 2's checkpoint, then (rerun) at the final model's save,
        # which worker 0 completes: every worker stops alike. The rerun
        # scores step 2 first, whose dev BLEU the stop skipped.
        for file, step, bleu in (
            ("ckpt-2.keras", 2, ""),
            ("model.keras", 4, "24"),
        ):
            processes = start_training_script(folder, data, code, file)
            outputs = [
                process.communicate(timeout=300) for process in processes
            ]
            for worker, (process, (stdout, stderr)) in enumerate(
                zip(processes, outputs)
            ):
                self.assertEqual(process.returncode, 0, stderr[-3000:])
                self.assertEqual(
                    re.findall(r"step (\d+): dev BLEU", stdout), list(bleu)
                )
                self.assertEqual(
                    stdout.split()[-3:],
                    ["stopped", str(step), "1" if worker == 0 else "None"],
                )
                # Keras averages the per-batch logs across workers: the
                # progress bar showed half the target tokens under two
                # workers. The last batch's running total is the epoch's,
                # which Keras reads from the whole (all-worker) variable.
                tokens = re.findall(r"^tokens (\S+) (\S+)$", stdout, re.M)
                if file == "model.keras":  # The rerun ends an epoch.
                    self.assertLen(tokens, 1)
                for last_batch, epoch in tokens:
                    self.assertEqual(float(last_batch), float(epoch))
                    self.assertGreater(float(epoch), 0)

    def test_worker_startup_timeout_is_checked_before_starting(self):
        tf_config = {
            "cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
            "task": {"type": "worker", "index": 0},
        }
        with mock.patch.dict(os.environ, TF_CONFIG=json.dumps(tf_config)):
            for timeout in (0, -5, float("nan"), float("inf"), "600", True):
                with (
                    self.subTest(timeout=timeout),
                    self.assertRaisesRegex(
                        ValueError,
                        "`worker_startup_timeout` must be a positive number of "
                        r"seconds \(--worker_startup_timeout\)",
                    ),
                ):
                    distribution.create_strategy(
                        "multi_worker", worker_startup_timeout=timeout
                    )

    def test_lost_worker_is_named_however_the_loss_was_noticed(self):
        cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"]}
        resolver = types.SimpleNamespace(
            task_type="worker",
            cluster_spec=lambda: types.SimpleNamespace(as_dict=lambda: cluster),
        )
        strategy = types.SimpleNamespace(cluster_resolver=resolver)
        for error, named in (
            # The coordination service, after the missed heartbeats.
            (
                tf.errors.UnavailableError(
                    None,
                    None,
                    "Collective ops is aborted by: Error reported from "
                    "/job:worker/task:1: The following tasks are unhealthy "
                    "(stopped sending "
                    "heartbeats):\n/job:worker/replica:0/task:1"
                    "\n/job:worker/replica:0/task:2\nThe tasks have crashed.",
                ),
                "worker 1, worker 2",
            ),
            # Sooner, a collective's broken connection.
            (
                tf.errors.UnavailableError(
                    None,
                    None,
                    "Collective ops is aborted by: recvmsg:Connection reset by "
                    "peer\nAdditional GRPC error information from remote "
                    "target /job:worker/replica:0/task:2 while calling "
                    "/tensorflow.WorkerService/RecvBuf",
                ),
                "worker 2",
            ),
            # Each worker once, in order, however often and in whichever
            # order they are listed.
            (
                tf.errors.UnavailableError(
                    None,
                    None,
                    "The following tasks are unhealthy (stopped sending "
                    "heartbeats):\n/job:worker/replica:0/task:2"
                    "\n/job:worker/replica:0/task:1"
                    "\n/job:worker/replica:0/task:2\n",
                ),
                "worker 1, worker 2",
            ),
            (
                tf.errors.UnavailableError(None, None, "Socket closed"),
                "a worker",
            ),
        ):
            lost = distribution.lost_worker_error(strategy, error, 40)
            self.assertIsInstance(lost, ConnectionError)
            self.assertTrue(
                str(lost).startswith(
                    f"The cluster lost {named} during training"
                ),
                str(lost),
            )
            self.assertIn("to resume from step 40, the last backup", str(lost))
        # Other errors are not about a lost worker; nor is any on one worker.
        other = tf.errors.InvalidArgumentError(
            None, None, "Incompatible shapes"
        )
        self.assertIsNone(distribution.lost_worker_error(strategy, other, 40))
        alone = types.SimpleNamespace(cluster_resolver=None)
        self.assertIsNone(distribution.lost_worker_error(alone, error, 40))

    def test_missing_worker_fails_in_time_naming_it(self):
        folder = fixtures.tempdir(self)
        data = write_corpus(folder)
        model_dir = os.path.join(folder, "run")
        # Worker 0 leads the cluster and sees who never came; worker 1
        # sees that the leader does not answer. Each alone used to wait
        # forever, with SIGTERM caught. The two run side by side, each in a
        # cluster of its own (addresses of its own).
        clusters = [
            [f"127.0.0.1:{free_port()}" for _ in range(2)] for _ in range(2)
        ]
        processes = []
        for index, addresses in enumerate(clusters):
            tf_config = {
                "cluster": {"worker": addresses},
                "task": {"type": "worker", "index": index},
            }
            processes.append(
                subprocess.Popen(
                    train_command(
                        data,
                        model_dir,
                        "--strategy=multi_worker",
                        "--worker_startup_timeout=2",
                    ),
                    env=environment(TF_CONFIG=json.dumps(tf_config)),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for index, (process, addresses) in enumerate(zip(processes, clusters)):
            _, stderr = process.communicate(timeout=120)
            self.assertEqual(process.returncode, 1, stderr[-3000:])
            missing = 1 - index
            self.assertIn(
                f"train.py: error: Worker {index} of 2 waited 2 s for the "
                f"cluster in TF_CONFIG to start, but worker {missing} "
                f"({addresses[missing]}) did not connect",
                stderr,
            )
            self.assertNotIn("Traceback", stderr)
        # It failed before writing anything.
        self.assertFalse(os.path.exists(model_dir))

    def test_ctrl_c_stops_a_worker_waiting_for_its_cluster(self):
        # Python's SIGINT handler cannot run while TensorFlow waits for the
        # peers (holding the GIL): Ctrl-C did nothing until the timeout.
        script = (
            "from keras_transformer.training import distribution\n"
            "print('waiting', flush=True)\n"
            "distribution.create_strategy('multi_worker', "
            "worker_startup_timeout=120)\n"
        )
        tf_config = {
            "cluster": {
                "worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]
            },
            "task": {"type": "worker", "index": 0},
        }
        # stderr goes to a file, not a pipe: read only on failure, it must
        # not fill up and block the worker.
        stderr = self.enterContext(tempfile.TemporaryFile(mode="w+"))
        process = subprocess.Popen(
            [sys.executable, "-c", script],
            env=environment(TF_CONFIG=json.dumps(tf_config)),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            # As from a terminal: a shell's background job (a test run's
            # too) ignores Ctrl-C, which the worker then rightly leaves so.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.addCleanup(process.kill)
        self.assertEqual(process.stdout.readline(), "waiting\n")
        # Into the wait, once the worker has swapped in SIGINT's default
        # action (a fixed sleep only guessed): a SIGINT before the wait
        # tests nothing.
        deadline = time.monotonic() + 60
        while sigint_is_caught(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        try:
            self.assertEqual(process.wait(timeout=30), -signal.SIGINT)
        except (AssertionError, subprocess.TimeoutExpired):
            stderr.seek(0)
            raise AssertionError(
                "SIGINT did not end the waiting worker (returncode "
                f"{process.poll()}); its stderr:\n{stderr.read()[-3000:]}"
            ) from None
        process.stdout.close()

    def test_sigterm_stops_a_multi_worker_process(self):
        # TensorFlow's preemption notifier catches SIGTERM once the strategy
        # starts: a stopped worker trained on until SIGKILL.
        script = (
            "import os, signal, time\n"
            "from keras_transformer.training import distribution\n"
            "distribution.create_strategy('multi_worker')\n"
            "print('started', flush=True)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(60)\n"
        )
        tf_config = {
            "cluster": {"worker": [f"127.0.0.1:{free_port()}"]},
            "task": {"type": "worker", "index": 0},
        }
        result = subprocess.run(
            [sys.executable, "-c", script],
            env=environment(TF_CONFIG=json.dumps(tf_config)),
            capture_output=True,
            text=True,
            timeout=50,
        )
        self.assertEqual(result.stdout, "started\n", result.stderr[-3000:])
        self.assertEqual(result.returncode, -signal.SIGTERM)
