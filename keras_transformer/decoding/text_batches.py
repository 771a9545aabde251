"""Lists of sentences through a translate function: batches of similar
length, one line per translation, and a warning for what was cut short."""

import re

import tensorflow as tf
from absl import logging


def translate_texts(
    translate_fn, sentences, batch_size: int = 32, on_batch=None
):
    """Translates a list of sentences in batches of similar length.

    Sorting by length keeps padding (and the beam's maximum length) small
    per batch; the translations come back in the input order, each one
    line: line breaks that byte-fallback pieces spell (e.g. `<0x0A>`, or
    any other that `str.splitlines` splits on) are replaced by a space, so
    that files of one translation per line stay aligned with their sources.
    Sentences that `translate_fn` flags as `truncated` (longer than the
    model's input limit) or whose translation `reached_length_limit` are
    named in a logged warning, so that nothing is cut short silently.

    Args:
        translate_fn: a function from `tf.string` [B] to a dict with
            `outputs` `tf.string` [B], e.g. `Translator.translate` or the
            `serving_default` signature of an export.
        sentences: the sentences (`str`).
        batch_size: sentences per call.
        on_batch: optional `f(done, total)` called after each batch (for a
            progress display).

    Returns:
        The translations, `list[str]`, in the order of `sentences`.
    """
    if batch_size < 1:
        raise ValueError(
            f"`batch_size` must be positive. Received: batch_size={batch_size}"
        )
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    translations = [""] * len(sentences)
    flagged = {flag: [] for flag in _CUT_SHORT}
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        batch = tf.constant([sentences[i] for i in indices], tf.string)
        results = translate_fn(inputs=batch)
        for index, output in zip(indices, results["outputs"].numpy()):
            translations[index] = _LINE_BREAKS.sub(" ", output.decode("utf-8"))
        for flag, found in flagged.items():
            if flag in results:
                found += [
                    i for i, cut in zip(indices, results[flag].numpy()) if cut
                ]
        if on_batch is not None:
            on_batch(start + len(indices), len(order))
    for flag, found in flagged.items():
        if found:
            logging.warning(
                _CUT_SHORT[flag],
                len(found),
                len(sentences),
                _positions(found),
            )
    return translations


# Every character `str.splitlines` splits on, not only "\r" and "\n": a form
# feed or U+2028 left in a translation also splits its line in two.
_LINE_BREAKS = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+")

# What each flag of a translation means, for `translate_texts`'s warnings.
_CUT_SHORT = {
    "truncated": (
        "%d of %d sentences are longer than the model's input limit "
        "(max_length - 1 subword tokens) and were translated from their first "
        "tokens only: sentences %s (1-based). "
        "Split them to translate them whole."
    ),
    "reached_length_limit": (
        "%d of %d translations stopped at their length limit (input length + "
        "the length offset, at most the model's max_length) before the end "
        "token, so they may be cut short: sentences %s (1-based)."
    ),
}


def _positions(indices, shown=10):
    """'3, 7, 12' (1-based), or the first `shown` and how many more."""
    numbers = [str(index + 1) for index in sorted(indices)]
    more = len(numbers) - shown
    return ", ".join(numbers[:shown]) + (
        f" and {more} more" if more > 0 else ""
    )
