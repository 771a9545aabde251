r"""Translates a test set and reports sacreBLEU, chrF and the paper's BLEU.

  python -m keras_transformer.evaluate --model=runs/base \
      --src=newstest2014.en --ref=newstest2014.de --output=hyps.de
  python -m keras_transformer.evaluate --model=/models/transformer \
      --data=tfds:wmt14_translate/de-en --split=test --output=hyps.de

`--model` is a training directory, a `.keras` checkpoint (e.g. an averaged
one) or an exported SavedModel; the languages default to those of the
training run (its settings.json), which flags must not contradict. Prints
the sacreBLEU signature to stderr and one JSON line on stdout: bleu, chrf,
signature, chrf_signature, num_sentences and tokenized_bleu — the paper's
Table 2 metric, BLEU on Moses-tokenized text, for German targets with
compounds split (`##AT##-##AT##`, as tensor2tensor's get_ende_bleu.sh); null
for Chinese, Japanese and Korean targets; tokenized_bleu_signature says
which; perplexity, the references' per-token perplexity under the model
(Table 3's PPL: teacher-forced, no label smoothing), and
perplexity_sentences, the pairs it scored (a pair with an empty side or a
side over the model's length limit is left out, with a warning); both null
for a SavedModel, whose signatures only search. See
`keras_transformer/evaluation.py`. Empty references or
translations of sentences that are not empty are counted in a warning on
stderr.
"""

import json
import os
import sys

from absl import app, flags

from keras_transformer import commands, files
from keras_transformer.commands import fail, progress_printer, run_command
from keras_transformer.data.text_files import read_sentences
from keras_transformer.training import run_checks

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Defines the evaluate flags on `flag_values`."""
    fv = {"flag_values": flag_values}
    commands.define_translation_flags(flag_values)
    flags.adopt_module_key_flags(commands, flag_values=flag_values)
    flags.DEFINE_string("src", None, "Source sentences, one per line.", **fv)
    flags.DEFINE_string(
        "ref", None, "Reference translations, one per line.", **fv
    )
    flags.DEFINE_string(
        "data",
        None,
        "Instead of --src/--ref: a data spec "
        "(demo, text:PREFIX, tsv:PATH, tfds:wmt14_translate/de-en).",
        **fv,
    )
    flags.DEFINE_enum(
        "split",
        "test",
        ["train", "dev", "test"],
        "Split of --data (test = newstest2014 for TFDS WMT14).",
        **fv,
    )
    for name, default, side in (
        ("src_lang", "en", "Source"),
        ("tgt_lang", "de", "Target"),
    ):
        flags.DEFINE_string(
            name,
            default,
            f"{side} language. Default: the model's, from an export's "
            f"record or the {run_checks.SETTINGS_FILE} of --model's run; "
            f"else {default}.",
            **fv,
        )
    flags.DEFINE_string("data_dir", None, "TFDS data directory.", **fv)
    flags.DEFINE_string(
        "output",
        None,
        "File for the hypotheses, one per line. Opened (created or emptied, as "
        "by shell redirection) before translating, so a path that cannot be "
        "written fails at once; its directory must exist (it is not created), "
        "and it must not be an input: --src, --ref, a file of the --data "
        "corpus or of the model's training corpus, the model or its "
        "vocabulary.",
        **fv,
    )


def _run_files(model: str) -> list[tuple[str, str, str]]:
    """The files of `model`'s training run (`inference.run_folder`) that a
    rerun or a resumption reads, as (flag, path, what): its settings,
    vocabulary and models, and everything in its checkpoints, backup and logs
    folders (the layout of `keras_transformer/training/trainer.py`)."""
    from keras_transformer import inference

    folder = inference.run_folder(model)
    if folder is None:
        return []
    files = []
    for root, _, names in os.walk(folder):
        relative = os.path.relpath(root, folder).split(os.sep)[0]
        for name in names:
            if relative in ("checkpoints", "backup", "logs") or (
                relative == "."
                and (
                    name in (run_checks.SETTINGS_FILE, "model.keras")
                    or name.startswith("vocab.")
                )
            ):
                files.append(
                    ("model", os.path.join(root, name), "training run")
                )
    return files


def _run_corpus_files(model: str) -> list[tuple[str, str, str]]:
    """The files of every split of the corpus that `model`'s training run
    read (its settings' `--data`), as (flag, path, what); none for a model
    without a run folder, or for the demo or TFDS corpora."""
    from keras_transformer import inference
    from keras_transformer.data import sources

    folder = inference.run_folder(model)
    settings = folder and run_checks.read_settings(folder)
    if not settings or not all(
        settings.get(name) for name in ("data", "src_lang", "tgt_lang")
    ):
        return []
    files = sources.corpus_files(
        settings["data"], settings["src_lang"], settings["tgt_lang"]
    )
    return [
        ("model", path, f"training run's {split} split")
        for split, path in files
    ]


def _languages(flag_values) -> tuple[str, str]:
    """`--src_lang` and `--tgt_lang`, defaulting to the model's languages
    (`inference.model_languages`: an export's record, else its training
    run's settings).

    Raises:
        ValueError: if a language passed contradicts the model's.
    """
    from keras_transformer import inference

    found = inference.model_languages(flag_values.model)
    if found is None:
        if not (
            flag_values["src_lang"].present or flag_values["tgt_lang"].present
        ):
            # An export of a model trained elsewhere, or a .keras file
            # outside its run: the target language chooses the tokenizers.
            _warn(
                "the model records no languages; scoring as "
                f"{flag_values.src_lang}->{flag_values.tgt_lang} (pass "
                "--src_lang and --tgt_lang to choose)"
            )
        return flag_values.src_lang, flag_values.tgt_lang
    trained, where = found
    passed = {
        name: flag_values[name].value
        for name in trained
        if flag_values[name].present
    }
    from keras_transformer.evaluation import primary_language

    # As the tokenizers see them: "DE" or "de-CH" is a "de" model's language.
    if any(
        primary_language(value) != primary_language(trained[name])
        for name, value in passed.items()
    ):
        given = " ".join(f"--{name}={value}" for name, value in passed.items())
        raise ValueError(
            "The model was trained "
            f"{trained['src_lang']}->{trained['tgt_lang']} ({where}) but "
            f"{given}; drop the flags or correct them. Received: "
            f"model={flag_values.model}"
        )
    return trained["src_lang"], trained["tgt_lang"]


def _check_test_set_flags(flag_values) -> None:
    """Fails unless the flags name one test set: --src and --ref, or --data
    (with --split and --data_dir, which --src and --ref would ignore).

    Raises:
        ValueError: naming the flags given.
    """
    src, ref, data = flag_values.src, flag_values.ref, flag_values.data
    received = f"Received: src={src}, ref={ref}, data={data}"
    if data and (src or ref):
        raise ValueError(
            f"Pass either --src and --ref, or --data, not both. {received}"
        )
    if data:
        return
    if src and not ref:
        raise ValueError(
            "`--src` needs `--ref`, the reference translations to score "
            "against (to translate without scoring, use "
            f"keras_transformer.translate). {received}"
        )
    if ref and not src:
        raise ValueError(
            "`--ref` needs `--src`, the source "
            f"sentences to translate. {received}"
        )
    if not src:
        raise ValueError(f"Pass --src and --ref files, or --data. {received}")
    # Only flags given explicitly: --split has a default.
    ignored = [
        name for name in ("split", "data_dir") if flag_values[name].present
    ]
    if ignored:
        given = " and ".join(f"--{name}" for name in ignored)
        verb, pronoun = (
            ("apply", "them") if len(ignored) > 1 else ("applies", "it")
        )
        values = ", ".join(
            f"{name}={flag_values[name].value}" for name in ignored
        )
        raise ValueError(
            f"{given} {verb} only to --data, not to --src and --ref; drop "
            f"{pronoun}, or pass --data instead of --src and --ref. "
            f"Received: {values}, src={src}, ref={ref}"
        )


def _model_files(model: str, vocab: str | None) -> list[tuple[str, str, str]]:
    """The files `load_translator` reads for `--model` and `--vocab`, as
    (flag, path, what): a `.keras` file and its vocabulary, or every file
    of a SavedModel. A missing one is left for `load_translator` to name."""
    from keras_transformer import inference

    export = inference.export_path(model)
    if export:
        return [
            ("model", os.path.join(folder, name), "model")
            for folder, _, names in os.walk(export)
            for name in names
        ]
    keras_file = (
        os.path.join(model, "model.keras") if os.path.isdir(model) else model
    )
    try:
        vocab = inference.vocab_beside(keras_file, vocab)
    except FileNotFoundError:
        return [("model", keras_file, "model")]
    return [("model", keras_file, "model"), ("vocab", vocab, "vocabulary")]


def _check_output(flag_values, src_lang: str, tgt_lang: str) -> None:
    """Fails if `--output` is an input file, which writing it would destroy:
    `--src`, `--ref`, a file of any split of a `--data=text:` or `tsv:`
    corpus, a file of the model (its vocabulary too), which is read before
    the output is opened, or a file of its training run (`_run_files`),
    which a resumption reads, its training corpus included.

    Raises:
        ValueError: naming both paths.
        FileNotFoundError: if `--data` has no `--split` split (`sources`).
    """
    output = flag_values.output
    if not output:
        return
    inputs = [
        ("ref", flag_values.ref, "references"),
        ("src", flag_values.src, "sources"),
    ]
    if flag_values.data:
        from keras_transformer.data import sources

        # The split to score must exist (MissingSplitError otherwise).
        sources.split_files(
            flag_values.data, flag_values.split, src_lang, tgt_lang
        )
        inputs += [
            ("data", path, f"{split} split")
            for split, path in sources.corpus_files(
                flag_values.data, src_lang, tgt_lang
            )
        ]
    inputs += _model_files(flag_values.model, flag_values.vocab)
    inputs += _run_files(flag_values.model)
    inputs += _run_corpus_files(flag_values.model)
    for name, path, what in inputs:
        if path and files.same_file(output, path):
            raise ValueError(
                "`--output` must not be an input file: writing it would "
                f"overwrite the {what}; choose another path. "
                f"Received: output={output}, {name}={path}"
            )


def _test_set(flag_values, src_lang: str, tgt_lang: str):
    """The (sources, references) of the flags (see `_check_test_set_flags`).

    Raises:
        ValueError: if --src and --ref differ in length.
    """
    if flag_values.data:
        from keras_transformer.data import sources

        return sources.load_pairs(
            flag_values.data,
            flag_values.split,
            src_lang,
            tgt_lang,
            flag_values.data_dir,
        )
    src, ref = flag_values.src, flag_values.ref
    sources_, references = (
        read_sentences(src, "src"),
        read_sentences(ref, "ref"),
    )
    if len(sources_) != len(references):
        raise ValueError(
            "--src and --ref must have one line per sentence. Received: "
            f"{src} has {len(sources_)} lines, {ref} has {len(references)}"
        )
    return sources_, references


def _open_output(path: str):
    """Opens `path` for the hypotheses, naming it if that fails.

    Raises:
        OSError: (the subclass `open` raised) if `path` cannot be written:
            its directory is missing, it is a directory, or no permission.
    """
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as error:
        raise type(error)(
            f"Cannot write --output ({error.strerror}); its directory must "
            "exist (it is not created) and be writable. "
            f"Received: output={path}"
        ) from None


def _write_hypotheses(file, hypotheses: list[str], path: str) -> None:
    """Writes `hypotheses`, one a line, to the opened `--output` `file`
    and closes it.

    Raises:
        OSError: (the subclass the write raised) naming `path`, if the
            write fails, e.g. on a full disk.
    """
    try:
        with file:
            file.writelines(line + "\n" for line in hypotheses)
    except OSError as error:
        raise type(error)(
            f"Writing --output failed ({error.strerror or error}); the scores "
            "above are complete, the file is not. "
            f"Received: output={path}"
        ) from None


def _empty_where_source_is_not(
    sources: list[str], texts: list[str]
) -> list[int]:
    """The 0-based indices of the `texts` that are empty (or blank) where
    their source sentence is not."""
    return [
        index
        for index, (source, text) in enumerate(zip(sources, texts))
        if source.strip() and not text.strip()
    ]


def _warn(message: str) -> None:
    """Prints a warning line on stderr (stdout holds only the JSON line)."""
    print(f"evaluate: warning: {message}", file=sys.stderr)


def main(argv, flag_values=FLAGS):
    """Evaluates the model of the flags (see the module docstring).

    Args:
        argv: the command line left after the flags (only the program).
        flag_values: the parsed flags.

    Returns:
        The exit status: 0, or 1 after a one-line error on stderr.
    """
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    import tensorflow as tf

    from keras_transformer import evaluation, inference

    try:
        # Checks of the flags alone, before any file is read or written.
        _check_test_set_flags(flag_values)
        # Before the languages, whose warning would otherwise come first.
        inference.check_model_path(flag_values.model)
        src_lang, tgt_lang = _languages(flag_values)
        _check_output(flag_values, src_lang, tgt_lang)
        evaluation.check_target_language(tgt_lang)
        # Before TensorFlow's first op: the setting is fixed once it starts.
        inference.set_decoding_threads(
            flag_values.model, flag_values.intra_op_threads
        )
        sources_, references = _test_set(flag_values, src_lang, tgt_lang)
        translator = inference.load_translator(
            flag_values.model,
            flag_values.vocab,
            **commands.decoding_settings(flag_values),
        )
        # Before the long translation, so a bad path fails at once.
        output = (
            _open_output(flag_values.output) if flag_values.output else None
        )
    except (ValueError, OSError, TypeError, tf.errors.OpError) as error:
        # User errors: one line, no traceback. The tf.errors come from an
        # unreadable --vocab or input file (missing, or a directory).
        return fail("evaluate", error)
    empty = _empty_where_source_is_not(sources_, references)
    if empty:
        # Scored anyway: a few may be genuine, but usually the files are
        # misaligned (an extra or missing line), which BLEU would not show.
        _warn(
            f"{len(empty)} of {len(references)} references are empty where "
            f"the source is not, the first on line {empty[0] + 1}; the sources "
            "and references may be misaligned"
        )
    hypotheses = translator.translate(
        sources_, flag_values.batch_size, progress_printer()
    )
    empty = _empty_where_source_is_not(sources_, hypotheses)
    if empty:
        # BLEU 0 alone does not tell a broken model from a weak one.
        _warn(
            f"{len(empty)} of {len(hypotheses)} translations are empty where "
            "the source is not; the model may be undertrained or the "
            "vocabulary may not match it"
        )
    write_error = None
    if output:
        try:
            _write_hypotheses(output, hypotheses, flag_values.output)
        except OSError as error:
            # Reported after the scores: a full disk must not lose the
            # translation's scores (it was a traceback and no scores).
            write_error = error
    scores = evaluation.score(hypotheses, references, tgt_lang)
    perplexity = _perplexity(translator, sources_, references)
    print(
        f"{translator.description}: BLEU {scores.bleu:.2f} "
        f"({scores.bleu_signature}), chrF {scores.chrf:.2f}, tokenized BLEU "
        + (
            "n/a (no spaces between words)"
            if scores.tokenized_bleu is None
            else (
                f"{scores.tokenized_bleu:.2f} "
                f"({scores.tokenized_bleu_signature})"
            )
        )
        + (
            ", perplexity n/a"
            if perplexity is None
            else (
                f", perplexity {perplexity.perplexity:.3f} "
                f"({perplexity.num_tokens} target tokens)"
            )
        ),
        file=sys.stderr,
    )
    print(
        json.dumps(
            {
                **scores.to_json_dict(),
                "perplexity": (
                    None
                    if perplexity is None
                    else round(perplexity.perplexity, 4)
                ),
                "perplexity_sentences": (
                    None
                    if perplexity is None
                    else perplexity.stats.num_examples
                ),
            }
        )
    )
    return fail("evaluate", write_error) if write_error else 0


def _perplexity(translator, sources_, references):
    """`translator.perplexity` of the test set, with a warning on stderr
    for the pairs it leaves out; None for a SavedModel."""
    try:
        perplexity = translator.perplexity(sources_, references)
    except ValueError as error:  # No pair can be scored.
        _warn(str(error))
        return None
    if perplexity is not None:
        stats = perplexity.stats
        if stats.num_examples < stats.num_pairs:
            _warn(
                f"perplexity over {stats.num_examples} of {stats.num_pairs} "
                f"pairs (the others cannot be scored): {stats.describe()}"
            )
    return perplexity


def run():
    """Entry point of `python -m keras_transformer.evaluate`,
    and of the installed `keras-transformer-evaluate` command."""
    run_command(__name__, main, define_flags)


if __name__ == "__main__":
    run()
