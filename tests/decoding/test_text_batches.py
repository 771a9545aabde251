"""Tests of `translate_texts`: sentences through a translate function."""

import tensorflow as tf

from keras_transformer.decoding import text_batches
from tests.test_case import TestCase


class TranslateTextsTest(TestCase):
    def test_gives_one_line_per_sentence(self):
        # Every character `str.splitlines` splits on, e.g. a form feed or
        # U+2028 spelled by byte-fallback pieces, not only "\r" and "\n".
        breaks = [
            chr(code)
            for code in range(0x110000)
            if len(f"a{chr(code)}b".splitlines()) == 2
        ]
        self.assertContainsSubset(["\f", "\v", "\x85", "\u2028"], breaks)
        sentences = [f"a{mark}b" for mark in breaks] + ["a\r\n\x0c\u2029b"]

        def translate_fn(inputs):
            return {"outputs": inputs}

        translations = text_batches.translate_texts(translate_fn, sentences)
        self.assertEqual(translations, ["a b"] * len(sentences))

    def test_names_the_sentences_cut_short(self):
        def translate_fn(inputs):
            # A fake model: "long" inputs were truncated, "loop" outputs
            # stopped at the limit.
            texts = [text.decode() for text in inputs.numpy()]
            return {
                "outputs": tf.constant(
                    [text.upper() + "\r\n!" for text in texts]
                ),
                "truncated": tf.constant(["long" in text for text in texts]),
                "reached_length_limit": tf.constant(
                    ["loop" in t for t in texts]
                ),
            }

        sentences = ["a", "long b", "c", "loop d", "long loop e"] + ["f"] * 20
        with self.assertLogs("absl", "WARNING") as logs:
            translations = text_batches.translate_texts(
                translate_fn, sentences, batch_size=2
            )
        # One line each: a line break spelled by byte pieces becomes a space.
        self.assertEqual(
            translations, [text.upper() + " !" for text in sentences]
        )
        self.assertLen(logs.output, 2)
        self.assertIn(
            "2 of 25 sentences are longer than the model's input limit",
            logs.output[0],
        )
        self.assertIn("sentences 2, 5 (1-based)", logs.output[0])
        self.assertIn(
            "2 of 25 translations stopped at their length limit", logs.output[1]
        )
        self.assertIn("sentences 4, 5 (1-based)", logs.output[1])
        # Nothing cut short, nothing logged; many are listed in part.
        plain = {"outputs": tf.constant(["x"])}
        with self.assertNoLogs("absl", "WARNING"):
            text_batches.translate_texts(lambda inputs: plain, ["x"])
        self.assertEqual(
            text_batches._positions(range(25)),
            "1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 15 more",
        )


def flagging_fn(inputs):
    """Upper-cases; flags inputs holding "long" as truncated."""
    texts = [text.decode() for text in inputs.numpy()]
    return {
        "outputs": tf.constant([text.upper() for text in texts]),
        "truncated": tf.constant(["long" in text for text in texts]),
    }


class TranslateTextsOrderTest(TestCase):
    def test_progress_counts_the_sentences_done_after_each_batch(self):
        calls = []
        sentences = ["a", "bb", "ccc", "dddd", "eeeee"]
        translations = text_batches.translate_texts(
            flagging_fn,
            sentences,
            batch_size=2,
            on_batch=lambda done, total: calls.append((done, total)),
        )
        self.assertEqual(calls, [(2, 5), (4, 5), (5, 5)])
        self.assertEqual(translations, [s.upper() for s in sentences])

    def test_translations_return_in_input_order_for_any_batch_size(self):
        # A batch holds its sentences shortest first (here 1, 2, 0): each
        # output goes back to its own sentence, batches of one included.
        sentences = ["ccc", "a", "bb"]
        for batch_size in (1, 2, 3):
            self.assertEqual(
                text_batches.translate_texts(
                    flagging_fn, sentences, batch_size=batch_size
                ),
                ["CCC", "A", "BB"],
            )

    def test_warning_lists_positions_in_input_order(self):
        # Batches run shortest first: the longer sentence 1 is found after
        # sentence 2, but the warning lists them in order.
        sentences = ["a long long one", "long two", "x"]
        with self.assertLogs("absl", "WARNING") as logs:
            text_batches.translate_texts(flagging_fn, sentences, batch_size=1)
        self.assertLen(logs.output, 1)
        self.assertIn("2 of 3 sentences", logs.output[0])
        self.assertIn("sentences 1, 2 (1-based)", logs.output[0])

    def test_ten_positions_are_listed_without_a_remainder(self):
        self.assertEqual(
            text_batches._positions(range(10)), "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"
        )
        self.assertEqual(
            text_batches._positions(range(11)),
            "1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 1 more",
        )
