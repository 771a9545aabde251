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
