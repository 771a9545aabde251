"""The training run of the paper's section 5 through `model.fit`.

`run_training` is the library behind `train.py` and the demo: vocabulary,
token batches, strategy, model, `fit` with resumable checkpoints,
TensorBoard and dev-set BLEU. It reads no flags.

Files in `model_dir`:
    settings.json              what a rerun must keep: model config, data,
                               languages, precision, seed
                               (`run_checks.save_settings`)
    vocab.model, vocab.vocab   the shared subword vocabulary (sentencepiece)
    vocab.data.json            the corpus and languages it was learned from
    model.keras                the model after the last step
    checkpoints/ckpt-<step>.keras   the last `keep_checkpoints` checkpoints
    backup/                    resumption state: weights, optimizer, step and
                               dropout seeds (`callbacks.ResumableBackup`)
    logs/                      TensorBoard logs
"""

import dataclasses
import gc
import os
import zlib

import keras
import tensorflow as tf
from absl import logging

from keras_transformer import config as config_lib
from keras_transformer import files, model_files
from keras_transformer.checks import check_positive_int
from keras_transformer.config import TransformerConfig
from keras_transformer.model import build_transformer
from keras_transformer.training import callbacks as callbacks_lib
from keras_transformer.training import distribution, run_checks
from keras_transformer.training import preemption as preemption_lib
from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import (
    MaskedTokenAccuracy,
    TargetTokenCount,
)
from keras_transformer.training.optimizer import (
    StepCountingLossScaleOptimizer,
    transformer_optimizer,
)

# What `run_training` raises for its caller's mistakes (its Raises): the
# commands print them in one line, without a traceback.
USER_ERRORS = (
    ValueError,
    run_checks.ModelDirBusyError,
    FileNotFoundError,
    FloatingPointError,
    TimeoutError,
    ConnectionError,
)


@dataclasses.dataclass(frozen=True)
class TrainingResult:
    """What a finished `run_training` produced.

    Attributes:
        step: optimizer steps taken in total (including resumed ones).
        model_path: the final `model.keras`.
        vocab_path: the sentencepiece model.
        log_dir: TensorBoard log directory.
        checkpoint_dir: directory of the kept `ckpt-<step>.keras` files.
        dev_bleu: sacreBLEU on the dev sentences at the last evaluation,
            or None when BLEU was not evaluated.
        dev_perplexity: the dev references' per-token perplexity at that
            evaluation (`evaluation.perplexity`, Table 3's "PPL (dev)"), or
            None when not evaluated or no dev pair fits the model's
            `max_length`.
        best_model_path: the `.keras` model of the highest dev BLEU
            (`callbacks.KeepBestModel`, its scores in the `.json` beside
            it), or None when BLEU is scored only at the end.
        best_step: that model's step, or None.
        best_dev_bleu: its dev BLEU, or None.
        stopped_early: whether early stopping ended the run before
            `train_steps` (`callbacks.EarlyStoppingOnBleu`): `step` is
            where.
        improved_step: when it stopped early, the step of the last dev
            BLEU that counted as better (the best's, unless
            `early_stopping_min_delta` left later gains out), or None
            (also on a worker that stopped on the first worker's decision
            without its own record).
        tokens_per_second: target tokens per second of the last epoch.
        data_stats: the training split's `DataStats`.
    """

    step: int
    model_path: str
    vocab_path: str
    log_dir: str
    checkpoint_dir: str
    dev_bleu: float | None
    dev_perplexity: float | None
    best_model_path: str | None
    best_step: int | None
    best_dev_bleu: float | None
    stopped_early: bool
    improved_step: int | None
    tokens_per_second: float | None
    data_stats: object


def _dev_perplexity_scorer(model, tokenizer, sources, references):
    """An `evaluation.PerplexityScorer` of the dev pairs, or None (with a
    warning) when none fits the model; warns of the pairs left out."""
    from keras_transformer import evaluation

    try:
        scorer = evaluation.PerplexityScorer(
            model, tokenizer, sources, references
        )
    except ValueError as error:
        logging.warning("No dev perplexity: %s", error)
        return None
    if scorer.stats.num_examples < scorer.stats.num_pairs:
        logging.warning(
            "Dev perplexity leaves pairs out: %s", scorer.stats.describe()
        )
    return scorer


def compile_for_training(
    model,
    warmup_steps: int,
    learning_rate_scale: float = 1.0,
    jit_compile: bool = True,
    optimizer=None,
    gradient_accumulation_steps: int = 1,
):
    """Compiles `model` with the paper's optimizer, schedule and loss.

    Call it inside the strategy's scope. `jit_compile` means what it says
    under a `tf.distribute` strategy too, where Keras's default ("auto")
    turns XLA off. `optimizer` replaces the paper's Adam (e.g. in tests).
    With `gradient_accumulation_steps` N above 1, each step takes the N
    batches of one dataset element (`batching.group_batches`) and updates
    once (`training/accumulation.py`). The optimizer's variables are
    created here when the model is built.
    """
    steps = check_positive_int(
        "gradient_accumulation_steps", gradient_accumulation_steps
    )
    config = model.config
    optimizer = optimizer or transformer_optimizer(
        config.d_model, warmup_steps, scale=learning_rate_scale
    )
    # The model's policy: the global one, or `build_transformer(..., dtype=)`
    # (Keras's compile would wrap that one in its own loss scaling).
    if model.dtype_policy.name == "mixed_float16":
        # Counts the steps it skips, so the step (checkpoint names,
        # resumption, BLEU) is that of `fit`.
        optimizer = StepCountingLossScaleOptimizer(optimizer)
    # Under several replicas Keras cannot XLA-compile its whole step (the
    # gradient all-reduce), nor a step whose batches change shape inside
    # it (accumulation); each batch's forward/backward pass is then
    # compiled instead (`replica_xla.py`).
    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    model.gradient_accumulation_steps = steps
    model.replica_jit_compile = bool(jit_compile) and (
        replicas > 1 or steps > 1
    )
    model.compile(
        optimizer=optimizer,
        loss=LabelSmoothedCrossEntropy(config.label_smoothing),
        metrics=[MaskedTokenAccuracy(), TargetTokenCount()],
        jit_compile=bool(jit_compile) and not model.replica_jit_compile,
    )
    if model.built:
        # Adam's moments now, in this scope, rather than when the first step
        # starts (Keras builds them then, or while tracing it without a
        # strategy): the base model's first step takes ~10 s instead of ~17,
        # and its memory peak is already the steady one, so the second step
        # pages in less new memory (benchmarks/PERFORMANCE.md).
        model.optimizer.build(model.trainable_variables)
    return model


def run_training(
    config: TransformerConfig,
    *,
    data: str,
    src_lang: str,
    tgt_lang: str,
    model_dir: str,
    train_steps: int,
    warmup_steps: int = 4000,
    batch_tokens: int = 4096,
    gradient_accumulation_steps: int = 1,
    vocab_size: int | None = None,
    learning_rate_scale: float = 1.0,
    steps_per_checkpoint: int = 1000,
    keep_checkpoints: int = 5,
    bleu_every_steps: int = 0,
    bleu_max_sentences: int = 500,
    early_stopping_patience: int = 0,
    early_stopping_min_delta: float = 0.0,
    strategy: "str | tf.distribute.Strategy" = "default",
    num_gpus: int = 0,
    tpu_address: str | None = None,
    worker_startup_timeout: float = distribution.DEFAULT_WORKER_STARTUP_TIMEOUT,
    mixed_precision: str = "float32",
    jit_compile: bool = True,
    seed: int = 0,
    data_dir: str | None = None,
    verbose: int | str = "auto",
    extra_callbacks: tuple = (),
) -> TrainingResult:
    """Trains (or resumes training of) a Transformer in `model_dir`.

    Restarting the same call after a crash resumes from the end of the last
    checkpoint interval whose checkpoint, BLEU and logs were all written
    and whose loss and weights stayed finite: weights, optimizer state and
    step counter (hence the learning rate) continue, and so do the data
    order and the dropout masks, so the run ends with the weights of an
    uninterrupted one (same machine and settings); at most one interval of
    work is lost, and none after SIGTERM (or Ctrl-C), which stops the run
    at the end of the step under way (or of the checkpoint or model being
    written) with its backup saved there (`preemption.SaveOnPreemption`).
    The settings of `run_checks.check_model_dir` must not change.

    Args:
        config: the model config; its `vocab_size` is replaced by the
            vocabulary's, and `source_vocab_size` must be unset (the
            vocabulary is shared).
        data: the `--data` spec ("demo", "text:PREFIX", "tsv:PATH",
            "tfds:wmt14_translate/de-en"); its paths are recorded absolute
            (`sources.normalize_data_spec`), so a rerun must name the same
            files, from any working directory.
        src_lang, tgt_lang: language codes.
        model_dir: output directory (see the module docstring): new, or
            the one of the run to resume.
        train_steps: optimizer steps in total (paper: 100k base, 300k big).
        warmup_steps: schedule warmup (paper: 4000).
        batch_tokens: source and target token budget of a global batch,
            padding included (32,768 holds the paper's ~25,000 real tokens
            a side, as tensor2tensor's 8 x 4,096 did).
        gradient_accumulation_steps: global batches per optimizer step
            (see `training/accumulation.py`): a step's update is that of
            one batch of `gradient_accumulation_steps * batch_tokens`.
        vocab_size: subword vocabulary size when it must be learned
            (default: the paper's for the pair, 2000 for the demo corpus;
            at least `tokens.MIN_VOCAB_SIZE`); a resumed run's vocabulary must
            have this size.
        learning_rate_scale: factor on the paper's learning rate (Eq. 3).
        steps_per_checkpoint: steps between checkpoints, logs and BLEU
            checks.
        keep_checkpoints: checkpoints kept (paper averages 5 or 20).
        bleu_every_steps: dev-set BLEU every this many steps (a multiple of
            `steps_per_checkpoint`), keeping the model of the best as
            `best_model.keras` (`callbacks.KeepBestModel`); 0 evaluates only
            at the end.
        bleu_max_sentences: dev sentences translated for BLEU, whose
            references' perplexity is also reported (0: neither).
        early_stopping_patience: end the run once this many dev BLEU
            evaluations in a row brought no BLEU above the best (with
            `early_stopping_min_delta`, none more than that above the
            reference; `callbacks.EarlyStoppingOnBleu`); 0 trains to
            `train_steps`.
            Needs `bleu_every_steps`. A rerun of a run stopped early
            trains no further (a larger patience goes on).
        early_stopping_min_delta: BLEU points an evaluation must gain
            over early stopping's reference (the last evaluation that
            gained that much, as in Keras's `EarlyStopping(min_delta=...)`)
            to count as better; needs `early_stopping_patience`.
        strategy: a strategy name (with `num_gpus`, see
            `distribution.create_strategy`) or a `tf.distribute.Strategy`.
        num_gpus: see `distribution.create_strategy`.
        tpu_address: the TPU of strategy "tpu" (see
            `distribution.create_strategy`).
        worker_startup_timeout: seconds the workers of strategy
            "multi_worker" wait for each other at start-up (see
            `distribution.create_strategy`).
        mixed_precision: see `distribution.set_precision`.
        jit_compile: XLA for the training step.
        seed: seed of initialization, dropout and shuffling.
        data_dir: TFDS data directory.
        verbose: `fit`'s progress bar setting.
        extra_callbacks: more Keras callbacks (e.g. for tests), run after
            the run's own (so after a resumed run's state is restored).

    Returns:
        A `TrainingResult`.

    Raises:
        ValueError: for inconsistent or out-of-range settings (named with
            their values), checked before the data is read, for a
            `model_dir` that is a file or holds a run of other settings, and
            for a resumed run already past `train_steps`.
        FileNotFoundError: for missing data files, among them a missing dev
            split when `bleu_max_sentences` asks for BLEU (checked before
            the training data is read).
        FloatingPointError: if the loss becomes NaN or infinite.
        preemption.TrainingPreempted: when SIGTERM or SIGINT came while it
            trained or saved the final model: the run stopped at the end
            of the step under way, with its backup saved there (a rerun
            after a stop at the last step only scores and saves the final
            model). Under strategy "multi_worker", on every worker.
        TimeoutError: when the workers of strategy "multi_worker" did not
            all start within `worker_startup_timeout`.
        ConnectionError: when another worker of that strategy stopped
            during training.
    """
    from keras_transformer.data import pipeline, sources
    from keras_transformer.decoding import translator as translator_lib

    _check_run_arguments(
        config,
        model_dir=model_dir,
        tgt_lang=tgt_lang,
        train_steps=train_steps,
        warmup_steps=warmup_steps,
        gradient_accumulation_steps=gradient_accumulation_steps,
        vocab_size=vocab_size,
        learning_rate_scale=learning_rate_scale,
        steps_per_checkpoint=steps_per_checkpoint,
        keep_checkpoints=keep_checkpoints,
        bleu_every_steps=bleu_every_steps,
        bleu_max_sentences=bleu_max_sentences,
        early_stopping_patience=early_stopping_patience,
        early_stopping_min_delta=early_stopping_min_delta,
        mixed_precision=mixed_precision,
        seed=seed,
    )
    # Absolute paths: the settings name the corpus, not its spelling from
    # this working directory.
    data = sources.normalize_data_spec(data)
    spec = sources.parse_data_spec(data)
    sources.check_data_dir(spec, data_dir)
    if vocab_size is None and spec.kind == "demo":
        vocab_size = sources.DEMO_VOCAB_SIZE
    # First: MultiWorkerMirroredStrategy must configure the collective ops
    # before TensorFlow runs anything.
    if isinstance(strategy, str):
        strategy_obj = distribution.create_strategy(
            strategy, num_gpus, tpu_address, worker_startup_timeout
        )
    else:
        strategy_obj = strategy
    run_checks.check_batch_tokens(
        batch_tokens, config.max_length, strategy_obj.num_replicas_in_sync
    )
    write_dir = model_dir
    if not distribution.is_chief(strategy_obj):
        # Other workers write their (identical) copies aside.
        write_dir = run_checks.worker_dir(
            model_dir, strategy_obj.cluster_resolver.task_id
        )
    settings = _run_settings(
        config, data, spec, data_dir, src_lang, tgt_lang, mixed_precision, seed
    )
    # An older run may have recorded a relative path.
    run_checks.check_model_dir(
        write_dir,
        settings,
        normalize={"data": sources.normalize_data_spec},
        # A run begun before a config field existed had its old behaviour;
        # one begun before data_dir was recorded is not checked for it.
        defaults={**config_lib.LEGACY_VALUES, "data_dir": settings["data_dir"]},
    )
    # From here on, this process alone trains in (and writes to) write_dir.
    with run_checks.training_lock(write_dir):
        # The training files first: with those missing, the (missing) dev
        # split is not the problem to report.
        sources.check_split_files(spec, "train", src_lang, tgt_lang)
        dev_pairs = None
        if bleu_max_sentences:
            # Now, not after the vocabulary and the training data: a corpus
            # without a dev split fails at once.
            try:
                dev_pairs = sources.load_pairs(
                    spec, "dev", src_lang, tgt_lang, data_dir
                )
            except sources.MissingSplitError as error:
                raise error.with_fix(
                    "Or train without dev BLEU: bleu_max_sentences=0 "
                    "(--bleu_max_sentences=0)."
                ) from None
        backup_dir = os.path.join(write_dir, "backup")
        # A resumed run skips the batches it trained on and restores the
        # dropout seeds with the weights: it goes on as if never stopped.
        # The step's batches depend on these too (besides data and seed).
        batching = {
            "batch_tokens": batch_tokens,
            "replicas": strategy_obj.num_replicas_in_sync,
            "gradient_accumulation_steps": gradient_accumulation_steps,
        }
        # A rerun may change these, with a warning: its learning rate jumps.
        schedule = {
            "warmup_steps": warmup_steps,
            "learning_rate_scale": learning_rate_scale,
        }
        start_step = callbacks_lib.ResumableBackup.resume_step(
            backup_dir, batching, schedule
        )
        # On every worker alike, before any of them trains on.
        steps = distribution.values_of_workers(strategy_obj, [start_step])[:, 0]
        run_checks.check_workers_resume_alike(steps.tolist(), model_dir)
        run_checks.check_resume_step(start_step, train_steps)
        if start_step:
            logging.info(
                "Resuming at step %d of %d from the backup in %s.",
                start_step,
                train_steps,
                backup_dir,
            )
        keras.utils.set_random_seed(seed)
        distribution.set_precision(mixed_precision)
        vocab_path = os.path.join(write_dir, model_files.VOCAB_FILE)
        tokenizer = _load_vocabulary(
            spec,
            vocab_path,
            strategy_obj,
            model_dir=model_dir,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            vocab_size=vocab_size,
            data_dir=data_dir,
            # A vocabulary left by a run that failed before training, whose
            # corpus was then fixed in place or whose size is now another, is
            # learned again; one that a model was trained with is kept.
            relearn_if_changed=start_step == 0,
        )
        config = config.replace(vocab_size=tokenizer.vocab_size)
        # Not the default strategy: per-replica (and per-worker) batches.
        distributed = strategy_obj is not tf.distribute.get_strategy()
        batches = pipeline.load_training_batches(
            spec,
            tokenizer,
            src_lang=src_lang,
            tgt_lang=tgt_lang,
            batch_tokens=batch_tokens,
            max_length=config.max_length,
            data_dir=data_dir,
            seed=seed,
            deterministic=True,
            repeat=True,
            strategy=strategy_obj if distributed else None,
            batches_per_step=gradient_accumulation_steps,
        )
        with strategy_obj.scope():
            model = compile_for_training(
                build_transformer(config),
                warmup_steps,
                learning_rate_scale,
                jit_compile,
                gradient_accumulation_steps=gradient_accumulation_steps,
            )

        paths = {
            "log_dir": os.path.join(write_dir, "logs"),
            "checkpoint_dir": os.path.join(
                write_dir, callbacks_lib.CHECKPOINT_DIR
            ),
            "model_path": os.path.join(write_dir, model_files.MODEL_FILE),
        }
        nan_stop = callbacks_lib.StopOnNaN()
        # Kept after the last step, so rerunning a finished run is a no-op.
        backup = callbacks_lib.ResumableBackup(
            backup_dir, steps_per_checkpoint, batching, schedule
        )
        preemption = preemption_lib.SaveOnPreemption(
            backup, strategy_obj, last_step=train_steps
        )
        dev_evaluator = best_model = early_stopping = None
        # In this order at each interval's end: the logs, the checkpoint, BLEU
        # (into the logs), the best model, TensorBoard, and then the backup,
        # which moves the resume point past the interval only once all of it
        # is written; after it, a stop for a signal that came meanwhile.
        run_callbacks = [
            nan_stop,
            callbacks_lib.ThroughputLogger(),
            callbacks_lib.KeepLastCheckpoints(
                paths["checkpoint_dir"],
                keep_checkpoints,
                every_steps=steps_per_checkpoint,
            ),
        ]
        if dev_pairs is not None:
            dev_sources = dev_pairs[0][:bleu_max_sentences]
            dev_references = dev_pairs[1][:bleu_max_sentences]
            translator = translator_lib.Translator(model, tokenizer)
            dev_evaluator = callbacks_lib.DevEvaluator(
                translator.translate,
                dev_sources,
                dev_references,
                tgt_lang,
                every_steps=bleu_every_steps or train_steps,
                final_step=train_steps,
                interrupted=preemption.signalled_anywhere,
                summary_dir=os.path.join(paths["log_dir"], "train"),
                perplexity_fn=_dev_perplexity_scorer(
                    model, tokenizer, dev_sources, dev_references
                ),
            )
            run_callbacks.append(dev_evaluator)
            if bleu_every_steps:
                # Scored at the end only, the best model is the final one.
                best_model = callbacks_lib.KeepBestModel(
                    dev_evaluator,
                    os.path.join(write_dir, model_files.BEST_MODEL_FILE),
                )
                run_callbacks.append(best_model)
        run_callbacks += [
            callbacks_lib.StepTensorBoard(paths["log_dir"]),
            backup,
            preemption,
        ]
        if early_stopping_patience:
            # After the backup: a resumed run's state is restored.
            early_stopping = callbacks_lib.EarlyStoppingOnBleu(
                best_model,
                early_stopping_patience,
                bleu_every_steps,
                strategy_obj,
                min_delta=early_stopping_min_delta,
            )
            run_callbacks.append(early_stopping)
        # After the backup, so they see a resumed run's restored state.
        run_callbacks += extra_callbacks
        # Only now: a run that failed before training never locks model_dir
        # to its settings.
        run_checks.save_settings(write_dir, settings)
        lost = None
        with preemption.catching_signals():
            try:
                rates = _fit_intervals(
                    model,
                    batches,
                    start_step=start_step,
                    train_steps=train_steps,
                    steps_per_checkpoint=steps_per_checkpoint,
                    callbacks=run_callbacks,
                    verbose=verbose,
                )
                if nan_stop.nan_step is None:
                    # Every worker alike (collectives: in the `try`, for a
                    # worker lost meanwhile): a signal to any worker since
                    # the last step's agreement leaves the final model to
                    # the rerun on all of them; one during the save (in the
                    # block: it waits for a whole file) stops them after it.
                    preemption.agree_on_signals()
                    if preemption.stopped is None:
                        callbacks_lib.save_model(model, paths["model_path"])
                        preemption.agree_on_signals()
            except tf.errors.OpError as error:
                lost = distribution.lost_worker_error(
                    strategy_obj, error, backup.saved_step
                )
                if lost is None:
                    raise
        if lost is not None:
            # Outside the handler, the failed step's frames are garbage: among
            # them a thread pool of TensorFlow's eager all-reduce, left open
            # when it failed, whose collection at exit printed a traceback.
            gc.collect()
            raise lost
        if nan_stop.nan_step is not None:
            raise _non_finite_error(
                nan_stop.nan_step,
                backup.saved_step,
                mixed_precision,
                learning_rate_scale,
            )
        if preemption.stopped is not None:
            # Also at the last step: the rerun scores and saves the final model.
            raise preemption.stopped
        step = callbacks_lib.current_step(model)
        best = best_model.best if best_model else None
        return TrainingResult(
            step=step,
            vocab_path=vocab_path,
            dev_bleu=dev_evaluator.last_scores.bleu
            if dev_evaluator and dev_evaluator.last_scores
            else None,
            dev_perplexity=dev_evaluator.last_perplexity.perplexity
            if dev_evaluator and dev_evaluator.last_perplexity
            else None,
            best_model_path=best_model.path if best else None,
            best_step=best["step"] if best else None,
            best_dev_bleu=best["bleu"] if best else None,
            stopped_early=bool(early_stopping and early_stopping.stopped_step),
            improved_step=early_stopping.improved_step
            if early_stopping
            else None,
            tokens_per_second=rates[-1] if rates else None,
            data_stats=batches.stats,
            **paths,
        )


def _check_run_arguments(
    config,
    *,
    model_dir,
    tgt_lang,
    train_steps,
    warmup_steps,
    gradient_accumulation_steps,
    vocab_size,
    learning_rate_scale,
    steps_per_checkpoint,
    keep_checkpoints,
    bleu_every_steps,
    bleu_max_sentences,
    early_stopping_patience,
    early_stopping_min_delta,
    mixed_precision,
    seed,
):
    """Raises the ValueError of `run_training` for an argument out of range
    or inconsistent with another, before any data is read."""
    from keras_transformer.data import tokenizer as tokenizer_lib

    run_checks.check_model_dir_named(model_dir)
    run_checks.check_steps(train_steps, steps_per_checkpoint)
    run_checks.check_run_settings(
        warmup_steps=warmup_steps,
        learning_rate_scale=learning_rate_scale,
        keep_checkpoints=keep_checkpoints,
        bleu_every_steps=bleu_every_steps,
        bleu_max_sentences=bleu_max_sentences,
        early_stopping_patience=early_stopping_patience,
        early_stopping_min_delta=early_stopping_min_delta,
        seed=seed,
    )
    check_positive_int(
        "gradient_accumulation_steps", gradient_accumulation_steps
    )
    distribution.check_precision(mixed_precision)
    if bleu_every_steps % steps_per_checkpoint:
        raise ValueError(
            "`bleu_every_steps` must be a multiple of `steps_per_checkpoint`"
            " (BLEU is computed at checkpoint ends). Received: "
            f"bleu_every_steps={bleu_every_steps}, "
            f"steps_per_checkpoint={steps_per_checkpoint}"
        )
    if bleu_max_sentences:
        from keras_transformer import evaluation

        # Dev BLEU would otherwise fail only at its first evaluation.
        evaluation.check_target_language(tgt_lang)
    if vocab_size is not None:
        tokenizer_lib.check_vocab_size(vocab_size)
    if config.source_vocab_size is not None:
        raise ValueError(
            "The one shared vocabulary (vocab.model) sets the source and "
            "target vocabulary sizes, so `source_vocab_size` must be unset; "
            "choose the size with vocab_size instead. "
            f"Received: source_vocab_size={config.source_vocab_size}"
        )


def _run_settings(
    config, data, spec, data_dir, src_lang, tgt_lang, mixed_precision, seed
):
    """What a rerun in the same `model_dir` must keep (`settings.json`, see
    `run_checks.check_model_dir`)."""
    from keras_transformer.data import tfds_source

    settings = config.to_dict()
    del settings["vocab_size"]  # The vocabulary's, checked once loaded.
    settings.update(
        data=data,
        # The folder a TFDS corpus is read from: another one holds other data.
        data_dir=(
            files.absolute(tfds_source.data_root(data_dir))
            if spec.kind == "tfds"
            else None
        ),
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        # Loss scaling adds optimizer variables: backups of one precision
        # do not load into the other.
        mixed_precision=mixed_precision,
        # The data order and dropout masks a resumed run continues.
        seed=seed,
    )
    return settings


def _load_vocabulary(
    spec,
    vocab_path,
    strategy,
    *,
    model_dir,
    src_lang,
    tgt_lang,
    vocab_size,
    data_dir,
    relearn_if_changed,
):
    """The run's tokenizer (`pipeline.load_or_train_tokenizer`), checked
    against `vocab_size` and, under a multi-worker strategy, against the
    other workers' vocabularies."""
    from keras_transformer.data import pipeline
    from keras_transformer.data import tokenizer as tokenizer_lib

    tokenizer = pipeline.load_or_train_tokenizer(
        spec,
        vocab_path,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        vocab_size=vocab_size,
        data_dir=data_dir,
        relearn_if_changed=relearn_if_changed,
    )
    if vocab_size is not None and tokenizer.vocab_size != vocab_size:
        raise ValueError(
            f"`vocab_size` differs from the {tokenizer.vocab_size} pieces of "
            f"{vocab_path}, which the run in model_dir learned: rerun with "
            f"vocab_size={tokenizer.vocab_size} (or none) to resume it, or "
            f"pass a new model_dir. Received: vocab_size={vocab_size}"
        )
    # The pieces, not the file: it also records its own path.
    pieces = tokenizer_lib.vocabulary_pieces(vocab_path)
    fingerprint = zlib.crc32("\n".join(pieces).encode())
    vocabularies = distribution.values_of_workers(
        strategy, [tokenizer.vocab_size, fingerprint]
    )
    run_checks.check_workers_share_vocabulary(
        [tuple(row) for row in vocabularies.tolist()],
        model_dir,
        model_files.VOCAB_FILE,
    )
    return tokenizer


def _non_finite_error(
    nan_step, saved_step, mixed_precision, learning_rate_scale
):
    """The FloatingPointError of a run stopped at the non-finite `nan_step`,
    saying where its rerun resumes (the backup's `saved_step`)."""
    restart = (
        f"it resumes from step {saved_step}, the end of the last "
        "interval with a finite loss"
        if saved_step
        else "it starts over, as no interval ended with a finite loss"
    )
    if mixed_precision == "mixed_float16":
        restart += " (or train in float32, in a new --model_dir)"
    return FloatingPointError(
        f"The training loss or weights became NaN or infinite at step "
        f"{nan_step}, so that interval was not saved. Lower the "
        "learning rate (--learning_rate_scale) or raise --warmup_steps "
        f"and rerun: {restart}. Received: "
        f"mixed_precision={mixed_precision}, "
        f"learning_rate_scale={learning_rate_scale}"
    )


def _fit_intervals(
    model,
    batches,
    *,
    start_step: int,
    train_steps: int,
    steps_per_checkpoint: int,
    callbacks: list,
    verbose,
) -> list:
    """`fit` from `start_step` to `train_steps`, an epoch per checkpoint
    interval.

    Keras's epochs all have one length: a run resumed inside an interval
    (a preempted one, or one begun with another `steps_per_checkpoint`)
    first trains to the interval's end in a `fit` of its own, so that the
    later intervals end, and save, on multiples of `steps_per_checkpoint`.

    Returns:
        The `tokens_per_second` of the epochs trained.
    """
    # (first step, epochs in all, steps per epoch) of each `fit`.
    fits = []
    to_interval_end = -start_step % steps_per_checkpoint
    if to_interval_end and start_step < train_steps:
        epochs = start_step // steps_per_checkpoint + 1
        fits.append((start_step, epochs, to_interval_end))
        start_step += to_interval_end
    # A finished run's rerun still fits (no epoch), for its final dev BLEU.
    if not fits or start_step < train_steps:
        epochs = train_steps // steps_per_checkpoint
        fits.append((start_step, epochs, steps_per_checkpoint))
    rates = []
    for first_step, epochs, steps_per_epoch in fits:
        history = model.fit(
            batches.dataset(first_step),
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            callbacks=callbacks,
            verbose=verbose,
            # The pipeline shuffles (seeded, per epoch). Keras ignores
            # `shuffle` for a dataset but warns about its default, True.
            shuffle=False,
        )
        rates += history.history.get("tokens_per_second", [])
        if model.stop_training:
            break
    return rates
