r"""The main job end to end on the embedded demo corpus, on CPU in minutes.

  python -m keras_transformer.demo --model_dir=runs/demo

Trains the tiny preset on the English-German demo corpus
(`data/demo_corpus.py`), reports sacreBLEU on its test split, exports a TF
Serving SavedModel and translates example sentences through the export.
Rerunning resumes (or, when finished, reuses) the training in `model_dir`.
"""

import dataclasses
import json
import os

from absl import app, flags

from keras_transformer.commands import fail, run_command, stopped
from keras_transformer.training.run_checks import MAX_SEED

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Defines the demo flags on `flag_values`."""
    fv = {"flag_values": flag_values}
    flags.DEFINE_string(
        "model_dir", "runs/demo", "Training output directory.", **fv
    )
    flags.DEFINE_string(
        "export_dir",
        None,
        "TF Serving base directory (default: <model_dir>/export).",
        **fv,
    )
    flags.DEFINE_integer(
        "train_steps", 1200, "Optimizer steps.", lower_bound=1, **fv
    )
    flags.DEFINE_integer(
        "steps_per_checkpoint",
        200,
        "Steps between checkpoints.",
        lower_bound=1,
        **fv,
    )
    flags.DEFINE_integer(
        "batch_tokens", 2048, "Tokens per batch and side.", lower_bound=1, **fv
    )
    flags.DEFINE_integer(
        "warmup_steps", 600, "Learning-rate warmup steps.", lower_bound=1, **fv
    )
    flags.DEFINE_integer(
        "seed",
        0,
        "Random seed, 0 to 2**32 - 1 (numpy's).",
        lower_bound=0,
        upper_bound=MAX_SEED,
        **fv,
    )


SUMMARY_FILE = "demo_summary.json"  # in the model directory

EXAMPLES = [
    "The queen works on the seventeenth of November.",
    "When we sleep with a dog, the hungry baker swims in our park.",
    "The daughter thinks that a cup is new.",
    "I call the doctor in the city, because he is hungry.",
]


def run_demo(
    model_dir,
    export_dir,
    train_steps,
    steps_per_checkpoint,
    batch_tokens,
    warmup_steps,
    seed,
) -> dict:
    """Train -> test BLEU -> export -> translate through the export.

    Returns:
        A summary dict (also written to `<model_dir>/demo_summary.json`).
    """
    from keras_transformer import evaluation, model_files, serving
    from keras_transformer.config import TransformerConfig
    from keras_transformer.data import sources
    from keras_transformer.data.tokenizer import SubwordTokenizer
    from keras_transformer.decoding import text_batches
    from keras_transformer.decoding import translator as translator_lib
    from keras_transformer.training import trainer

    # Checked before training, which takes minutes.
    export_path = demo_export_path(model_dir, export_dir)
    check_export_path(export_path, model_dir)
    result = trainer.run_training(
        TransformerConfig.preset("tiny"),
        data="demo",
        src_lang="en",
        tgt_lang="de",
        model_dir=model_dir,
        train_steps=train_steps,
        warmup_steps=warmup_steps,
        batch_tokens=batch_tokens,
        steps_per_checkpoint=steps_per_checkpoint,
        bleu_max_sentences=200,
        seed=seed,
        verbose=2,
    )

    # Test BLEU with the in-Python beam search (beam 4, alpha 0.6).
    translator = translator_lib.Translator(
        model_files.load_model(result.model_path),
        SubwordTokenizer.from_file(result.vocab_path),
    )
    test_sources, test_references = sources.load_pairs(
        "demo", "test", "en", "de"
    )
    hypotheses = text_batches.translate_texts(
        translator.translate, test_sources
    )
    hypotheses_path = os.path.join(model_dir, "test.hyp.de")
    with open(hypotheses_path, "w", encoding="utf-8") as file:
        file.writelines(line + "\n" for line in hypotheses)
    scores = evaluation.score(hypotheses, test_references, "de")

    # Export, reload as TF Serving would, translate through the export.
    export_path = serving.export_translator(
        translator,
        export_path,
        overwrite=True,
        languages={"src_lang": "en", "tgt_lang": "de"},
    )
    exported = serving.load_exported(export_path)
    served = text_batches.translate_texts(
        exported.signatures["serving_default"], EXAMPLES
    )
    in_python = text_batches.translate_texts(translator.translate, EXAMPLES)

    summary = {
        "step": result.step,
        "test_bleu": scores.bleu,
        "test_chrf": scores.chrf,
        "bleu_signature": scores.bleu_signature,
        "num_test_sentences": scores.num_sentences,
        "dev_bleu": result.dev_bleu,
        "dev_perplexity": result.dev_perplexity,
        "training_data": dataclasses.asdict(result.data_stats),
        "export_equals_python": served == in_python,
        "model": result.model_path,
        "vocab": result.vocab_path,
        "logs": result.log_dir,
        "export": export_path,
        "hypotheses": hypotheses_path,
        "examples": dict(zip(EXAMPLES, served)),
    }
    with open(os.path.join(model_dir, SUMMARY_FILE), "w") as file:
        json.dump(summary, file, indent=2, ensure_ascii=False)
    return summary


def demo_export_path(model_dir, export_dir=None):
    """The version directory the demo exports to: version 1 of model
    "transformer" under `export_dir`, by default `<model_dir>/export`."""
    from keras_transformer import serving

    base = export_dir or os.path.join(model_dir, "export")
    return serving.serving_path(base, "transformer", 1)


def check_export_path(export_path, model_dir):
    """Fails unless the demo may write its export at `export_path`: a new
    version, or one the demo of `model_dir` wrote (its default export
    directory, or the export its last summary names), which a rerun
    replaces. A version of anything else is never deleted.

    Raises:
        FileExistsError: if `export_path` holds a version the demo of
            `model_dir` did not write, or is a file.
        NotADirectoryError, PermissionError: if it cannot be created.
    """
    from keras_transformer import serving

    own = [demo_export_path(model_dir)]
    summary = os.path.join(model_dir, SUMMARY_FILE)
    if os.path.isfile(summary):
        try:
            with open(summary, encoding="utf-8") as file:
                own.append(json.load(file)["export"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # Not the demo's summary: nothing else is its own.
    ours = any(
        os.path.realpath(export_path) == os.path.realpath(p) for p in own
    )
    if os.path.isdir(export_path) and not ours:
        raise FileExistsError(
            f"{export_path} exists and is not an export of this demo's "
            "--model_dir; the demo replaces only its own exports. Pass "
            "another --export_dir, or remove that version. "
            "Received: "
            f"export_dir={os.path.dirname(os.path.dirname(export_path))}"
        )
    serving.check_export_path(export_path, overwrite=True)


def main(argv, flag_values=FLAGS):
    """Runs the demo as the flags say; returns the exit status.

    Returns:
        0 after the demo; 1 after a user error, printed as one line (as by
        train.py), or if the export translates otherwise than Python; 128
        + the signal's number when SIGTERM or Ctrl-C stopped training (a
        rerun resumes it).
    """
    from keras_transformer.data import pipeline
    from keras_transformer.training import preemption, trainer

    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        summary = run_demo(
            flag_values.model_dir,
            flag_values.export_dir,
            flag_values.train_steps,
            flag_values.steps_per_checkpoint,
            flag_values.batch_tokens,
            flag_values.warmup_steps,
            flag_values.seed,
        )
    except (*trainer.USER_ERRORS, OSError) as error:
        # As train.py: one line, no TensorFlow traceback (OSError: an export
        # directory that cannot be written).
        return fail("demo", error)
    except preemption.TrainingPreempted as preempted:
        return stopped("demo", preempted)
    print("\nTranslations through the exported SavedModel:")
    for source, target in summary["examples"].items():
        print(f"  {source}\n  -> {target}")
    stats = pipeline.DataStats(**summary["training_data"])
    print(
        f"\nTraining data: {stats.describe()}\n"
        f"Test BLEU {summary['test_bleu']:.2f}, chrF "
        f"{summary['test_chrf']:.2f} on {summary['num_test_sentences']} "
        f"sentences ({summary['bleu_signature']})\n"
        f"Model:       {summary['model']} (step {summary['step']})\n"
        f"Vocabulary:  {summary['vocab']}\n"
        f"TensorBoard: tensorboard --logdir={summary['logs']}\n"
        f"Export:      {summary['export']} (serving == Python: "
        f"{summary['export_equals_python']})\n"
        f"Hypotheses:  {summary['hypotheses']}"
    )
    return 0 if summary["export_equals_python"] else 1


def run():
    """Entry point of `python -m keras_transformer.demo`, and of the installed
    `keras-transformer-demo` command."""
    run_command(__name__, main, define_flags)


if __name__ == "__main__":
    run()
