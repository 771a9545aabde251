r"""Translates sentences for people: arguments, a file or stdin -> stdout.

  python -m keras_transformer.translate --model=runs/demo "The queen works."
  python -m keras_transformer.translate --model=runs/demo --input=news.en
  cat news.en | python -m keras_transformer.translate --model=/models/t/1

`--model` is a training directory, a `.keras` checkpoint or a SavedModel.
One translation per line, in UTF-8 whatever the locale (as the input must
be); files show a progress bar on stderr. Sentences cut to the model's input
limit, and translations that stopped at their length limit, are named in a
warning on stderr.
"""

import os
import sys

from absl import flags

from keras_transformer import commands
from keras_transformer.commands import fail, progress_printer, run_command
from keras_transformer.data.text_files import read_sentences, split_lines

FLAGS = flags.FLAGS


def define_flags(flag_values=FLAGS):
    """Defines the translate flags on `flag_values`."""
    commands.define_translation_flags(flag_values)
    flags.adopt_module_key_flags(commands, flag_values=flag_values)
    flags.DEFINE_string(
        "input",
        None,
        "File of sentences, one per line (default: the arguments, else stdin).",
        flag_values=flag_values,
    )


def main(argv, flag_values=FLAGS):
    import tensorflow as tf

    from keras_transformer import inference

    try:
        # Before TensorFlow's first op: the setting is fixed once it starts.
        inference.set_decoding_threads(
            flag_values.model, flag_values.intra_op_threads
        )
        if len(argv) > 1:
            if flag_values.input:
                raise ValueError(
                    "Pass sentences as arguments or --input, not both. "
                    f"Received: input={flag_values.input}, arguments={argv[1:]}"
                )
            sentences, on_batch = _arguments(argv[1:]), None
        elif flag_values.input:
            sentences, on_batch = (
                read_sentences(flag_values.input, "input"),
                progress_printer(),
            )
        else:
            # Bytes, split as --input files are (on "\n" only, checked UTF-8).
            sentences = split_lines(sys.stdin.buffer.read(), "standard input")
            on_batch = None
        translator = inference.load_translator(
            flag_values.model,
            flag_values.vocab,
            **commands.decoding_settings(flag_values),
        )
    except (ValueError, OSError, TypeError, tf.errors.OpError) as error:
        # User errors: one line, no traceback. The tf.errors come from an
        # unreadable --vocab or input file (missing, or a directory).
        return fail("translate", error)
    translations = translator.translate(
        sentences, flag_values.batch_size, on_batch
    )
    # UTF-8 bytes, not `print`: under a non-UTF-8 locale (e.g. LANG=C on
    # old systems, or PYTHONIOENCODING=ascii) printing "Königin" raised
    # UnicodeEncodeError after the whole input was translated.
    output = "".join(line + "\n" for line in translations).encode("utf-8")
    try:
        sys.stdout.buffer.write(output)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (e.g. `| head`): not an error of ours. Python
        # would flush stdout again at exit and print a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _arguments(arguments):
    """The sentence arguments, checked: Python keeps bytes that are not
    UTF-8 as lone surrogates, which TensorFlow cannot take."""
    for number, argument in enumerate(arguments, start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                f"Argument {number} is not valid UTF-8; convert it (e.g. "
                f"`iconv -f LATIN1 -t UTF-8`). Received: argument {number}="
                f"{argument.encode('utf-8', 'backslashreplace').decode()}"
            ) from None
    return arguments


def run():
    """Entry point of `python -m keras_transformer.translate`,
    and of the installed `keras-transformer-translate` command."""
    run_command(__name__, main, define_flags)


if __name__ == "__main__":
    run()
