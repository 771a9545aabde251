"""Tests of the Translator: tokenizer + model + beam search, in Python."""

import re

import keras
import numpy as np
import tensorflow as tf

from keras_transformer import TransformerConfig, build_transformer
from keras_transformer.decoding import translator as translator_lib
from keras_transformer.decoding.transformer_search import (
    transformer_beam_search,
)
from keras_transformer.decoding.translator import Translator
from keras_transformer.tokens import BOS_ID, EOS_ID
from tests.data import fixtures
from tests.test_case import TestCase

MAX_LENGTH = 12
SENTENCES = ["The cat sleeps on the sofa.", "I like green tea."]


def tiny_model(seed=7, **overrides):
    """A random 1-layer model over the fixtures' vocabulary; `overrides`
    are config fields."""
    keras.utils.set_random_seed(seed)
    config = TransformerConfig.preset(
        "tiny",
        vocab_size=fixtures.VOCAB_SIZE,
        num_layers=1,
        d_model=32,
        d_ff=64,
        num_heads=4,
        max_length=MAX_LENGTH,
    )
    return build_transformer(config.replace(**overrides))


def tiny_translator(beam_size=4, alpha=0.6, length_offset=4, model=None):
    """A fresh translator over a seeded random model.

    Built inside each test: `tf.random.set_seed` (which the TestCase's
    `setUp` calls) destroys sentencepiece resources created before it.
    """
    model = tiny_model() if model is None else model
    return Translator(
        model,
        fixtures.tokenizer(),
        beam_size=beam_size,
        alpha=alpha,
        length_offset=length_offset,
    )


def numpy(results):
    return {key: value.numpy() for key, value in results.items()}


class TranslatorTest(TestCase):
    def assert_same_results(self, got, want, atol):
        """The same outputs: strings and ids equal, scores within `atol`."""
        got, want = numpy(got), numpy(want)
        self.assertEqual(sorted(got), sorted(want))
        for key in want:
            if want[key].dtype.kind == "f":
                self.assertAllClose(got[key], want[key], atol=atol)
            else:
                self.assertAllEqual(got[key], want[key])

    def test_beam_one_equals_greedy_full_forward_passes(self):
        # Beam 1 with alpha 0 is greedy search; its incremental decoding
        # (caches) must pick the arg-max of full forward passes.
        translator = tiny_translator(beam_size=1, alpha=0.0)
        model = translator.model
        source = np.array([[5, 9, 17, 30, EOS_ID]], "int32")
        result = numpy(translator.translate_ids(tf.constant(source)))
        target = [BOS_ID]
        for _ in range(4 + 4):  # 4 tokens + length_offset
            logits = model(
                {"source_ids": source, "target_ids": np.array([target])}
            )
            target.append(int(np.argmax(logits[0, -1])))
            if target[-1] == EOS_ID:
                break
        expected = target[1:]
        self.assertEqual(result["lengths"][0], len(expected))
        self.assertAllEqual(result["output_ids"][0, : len(expected)], expected)

    def test_a_temporary_translator_translates(self):
        # Its tf.functions used to hold it weakly: the instance was freed
        # during the call ("'NoneType' object has no attribute"). The three
        # are made alike, so one of them shows it.
        model, tokenizer = tiny_model(), fixtures.tokenizer()
        strings = tf.constant(SENTENCES)
        kept = Translator(model, tokenizer)
        self.assertAllEqual(
            Translator(model, tokenizer).translate(strings)["outputs"],
            kept.translate(strings)["outputs"],
        )

    def test_translate_equals_translate_ids_on_tokenized_input(self):
        translator = tiny_translator()
        strings = tf.constant(SENTENCES)
        text = numpy(translator.translate(strings))
        pieces = translator.tokenizer.tokenize(strings).to_tensor()
        ids = numpy(translator.translate_ids(pieces))
        self.assertAllClose(text["scores"], ids["scores"], atol=1e-5)
        self.assertAllEqual(
            text["outputs"],
            translator.tokenizer.detokenize(ids["output_ids"]).numpy(),
        )
        # A final EOS and extra padding on the ids change nothing.
        eos = tf.concat([pieces, tf.fill([2, 1], EOS_ID)], axis=1)
        eos = tf.pad(eos, [[0, 0], [0, 3]])
        self.assertAllClose(
            numpy(translator.translate_ids(eos))["scores"], ids["scores"]
        )

    def test_translate_ids_drops_a_leading_bos_as_translate_never_adds_one(
        self,
    ):
        # Some tokenizers add BOS to every sequence; the model's sources
        # have none (as `translate` builds them), so it is dropped like EOS.
        translator = tiny_translator()
        pieces = translator.tokenizer.tokenize(tf.constant(SENTENCES))
        ids = translator.translate_ids(pieces.to_tensor())
        bos = tf.fill([2, 1], BOS_ID)
        eos = tf.fill([2, 1], EOS_ID)
        for name, source in (
            ("bos", tf.concat([bos, pieces], axis=1)),
            ("bos and eos", tf.concat([bos, pieces, eos], axis=1)),
        ):
            with self.subTest(name):
                with_bos = translator.translate_ids(source.to_tensor())
                self.assert_same_results(with_bos, ids, atol=1e-5)
        # A row of only BOS (and EOS) has nothing to translate.
        alone = numpy(
            translator.translate_ids(tf.constant([[BOS_ID, EOS_ID, 0]]))
        )
        self.assertAllEqual(alone["lengths"], [0])
        self.assertAllEqual(alone["scores"], [0.0])

    def test_overlong_input_is_truncated_and_flagged(self):
        translator = tiny_translator()
        long = "The cat sleeps on the sofa and the dog barks at the postman."
        result = numpy(translator.translate(tf.constant([long, "Hi"])))
        self.assertAllEqual(result["truncated"], [True, False])
        # The translation is that of the first max_input_length tokens.
        pieces = translator.tokenizer.tokenize(tf.constant([long]))
        self.assertGreater(pieces.row_lengths()[0], MAX_LENGTH - 1)
        kept = pieces[:, : translator.max_input_length].to_tensor()
        ids = numpy(translator.translate_ids(kept))
        self.assertAllClose(result["scores"][:1], ids["scores"], atol=1e-5)
        self.assertFalse(ids["truncated"][0])
        # Texts long enough that only their beginning is tokenized
        # (`SubwordTokenizer.tokenize_head`), with spaces or without.
        huge = numpy(
            translator.translate(
                tf.constant([" ".join([long] * 100), "x" * 3000])
            )
        )
        self.assertAllEqual(huge["truncated"], [True, True])
        self.assertAllClose(huge["scores"][:1], ids["scores"], atol=1e-5)

    def test_empty_and_invalid_utf8_inputs_are_reported(self):
        translator = tiny_translator()
        bad = b"Hi \xff\xfe there"
        # Only whitespace, Unicode's too (no-break and ideographic spaces,
        # which sentencepiece normalizes away): nothing to translate.
        blank = "\u00a0 \u3000\t".encode()
        inputs = tf.constant([b"", b"   ", bad, b"Hi", blank])
        result = numpy(translator.translate(inputs))
        # Empty input: empty output, score 0, not flagged as cut short.
        self.assertAllEqual(result["outputs"][[0, 1, 4]], [b"", b"", b""])
        self.assertAllEqual(result["scores"][[0, 1, 4]], [0.0, 0.0, 0.0])
        self.assertFalse(any(result["reached_length_limit"][[0, 1, 4]]))
        self.assertLess(result["scores"][3], 0.0)
        # Invalid UTF-8: translated with U+FFFD replacements, flagged.
        self.assertAllEqual(
            result["invalid_utf8"], [False, False, True, False, False]
        )
        fixed = "Hi \ufffd\ufffd there"
        expected = numpy(translator.translate(tf.constant([fixed])))
        self.assertEqual(result["outputs"][2], expected["outputs"][0])
        self.assertAllClose(result["scores"][2], expected["scores"][0])
        self.assertFalse(expected["invalid_utf8"][0])

    def test_translate_ids_rows_without_subwords_translate_as_empty_text(self):
        # A client that tokenizes "" sends only padding, or only EOS: it
        # gets `translate`'s "" (no token, score 0), not a translation
        # decoded from a lone EOS (a score of about -8 before).
        translator = tiny_translator()
        pieces = translator.tokenizer.tokenize(tf.constant(["Hi"])).to_tensor()
        ids = tf.pad(pieces, [[0, 2], [0, 1]])  # Rows 2 and 3: padding.
        ids = tf.tensor_scatter_nd_update(ids, [[2, 0]], [EOS_ID])
        result = numpy(translator.translate_ids(ids))
        self.assertFalse(result["output_ids"][1:].any())
        self.assertAllEqual(result["lengths"][1:], [0, 0])
        self.assertAllEqual(result["scores"][1:], [0.0, 0.0])
        self.assertFalse(any(result["reached_length_limit"][1:]))
        # The row with subwords is translated as on its own.
        alone = numpy(translator.translate_ids(pieces))
        self.assertAllClose(result["scores"][0], alone["scores"][0], atol=1e-5)
        self.assertLess(result["scores"][0], 0.0)
        self.assertEqual(result["lengths"][0], alone["lengths"][0])

    def test_outputs_stopped_at_the_length_limit_are_flagged(self):
        translator = tiny_translator(length_offset=0)
        strings = tf.constant([*SENTENCES, "Hi", ""])
        pieces = translator.tokenizer.tokenize(strings)
        # A random model's hypotheses do not end within a limit of the
        # input length (offset 0): every one stops there, without EOS.
        ids = numpy(translator.translate_ids(pieces.to_tensor()))
        kept = np.minimum(pieces.row_lengths(), translator.max_input_length)
        self.assertAllEqual(ids["lengths"], kept)
        self.assertAllEqual(ids["reached_length_limit"], kept > 0)
        best = numpy(translator.translate(strings))
        # The empty input translates to "": nothing was cut short.
        self.assertAllEqual(
            best["reached_length_limit"], [True, True, True, False]
        )
        options = numpy(translator.translate_with_options(strings, 0.6, 0, 4))
        self.assertEqual(options["reached_length_limit"].shape, (4, 4))
        self.assertAllEqual(
            options["reached_length_limit"][:, 0], best["reached_length_limit"]
        )
        # The flag is "the last token is not EOS".
        output_ids = tf.constant(
            [[[5, 6, EOS_ID, 0], [5, 6, 7, 8], [9, 0, 0, 0]]]
        )
        lengths = tf.constant([[3, 4, 0]])
        self.assertAllEqual(
            translator_lib._without_eos(output_ids, lengths),
            [[False, True, False]],
        )

    def test_translate_ids_rejects_ids_outside_the_vocabulary(self):
        translator = tiny_translator()
        for bad in (-1, fixtures.VOCAB_SIZE):
            with self.assertRaisesRegex(
                tf.errors.InvalidArgumentError,
                re.escape(
                    f"in [0, {fixtures.VOCAB_SIZE}) (the vocabulary size)"
                )
                + f".*Received: source_ids=.*{bad}",
            ):
                translator.translate_ids(tf.constant([[5, bad, 9]]))

    def test_paths_in_place_of_the_model_or_tokenizer_say_how_to_load_them(
        self,
    ):
        model, tokenizer = tiny_model(), fixtures.tokenizer()
        for arg, model_arg, tokenizer_arg in (
            ("model", "run/model.keras", tokenizer),
            ("tokenizer", model, "run/vocab.model"),
        ):
            with self.assertRaisesRegex(
                TypeError,
                f"^`{arg}` must be a loaded .*, not a str: load the model with "
                r"keras\.saving\.load_model\(PATH\).*inference\.load_translator"
                f"\\. Received: {arg}='run/",
            ):
                Translator(model_arg, tokenizer_arg)

    def test_batch_of_one_and_large_batch_agree(self):
        translator = tiny_translator()
        many = [fixtures.PAIRS[i % 24][0] for i in range(48)]
        batch = numpy(translator.translate(tf.constant(many)))
        self.assertEqual(batch["outputs"].shape, (48,))
        for index in (0, 5, 47):
            alone = numpy(translator.translate(tf.constant([many[index]])))
            self.assertEqual(alone["outputs"][0], batch["outputs"][index])
            self.assertAllClose(
                alone["scores"][0], batch["scores"][index], atol=1e-4
            )

    def test_options_return_sorted_n_best_led_by_the_default(self):
        translator = tiny_translator()
        strings = tf.constant(SENTENCES)
        best = numpy(translator.translate(strings))
        n_best = numpy(translator.translate_with_options(strings, 0.6, 4, 3))
        self.assertEqual(n_best["outputs"].shape, (2, 3))
        self.assertAllEqual(n_best["outputs"][:, 0], best["outputs"])
        self.assertAllClose(n_best["scores"][:, 0], best["scores"])
        self.assertAllGreaterEqual(
            n_best["scores"][:, :-1] - n_best["scores"][:, 1:], 0.0
        )

    def test_request_options_equal_export_time_settings(self):
        settings = ((1.5, 4), (0.6, 0))
        models = [tiny_model() for _ in range(len(settings) + 1)]
        translator = tiny_translator(model=models[-1])
        strings = tf.constant(SENTENCES)
        for (alpha, offset), model in zip(settings, models):
            fixed = tiny_translator(
                alpha=alpha, length_offset=offset, model=model
            )
            expected = numpy(fixed.translate(strings))
            result = numpy(
                translator.translate_with_options(strings, alpha, offset, 1)
            )
            self.assertAllEqual(result["outputs"][:, 0], expected["outputs"])
            self.assertAllClose(
                result["scores"][:, 0], expected["scores"], atol=1e-5
            )
        # Offset 0: no output is longer than its input (paper: input + 50).
        pieces = fixed.tokenizer.tokenize(strings)
        lengths = fixed.translate_ids(pieces.to_tensor())["lengths"]
        self.assertAllLessEqual(
            lengths.numpy() - pieces.row_lengths().numpy(), 0
        )

    def test_huge_length_offset_saturates_at_max_length(self):
        # num_tokens + 2**31 - 1 overflows int32: the limit must saturate
        # at max_length, not wrap to a negative one (empty translations).
        translator = tiny_translator()
        strings = tf.constant(SENTENCES)
        expected = numpy(
            translator.translate_with_options(strings, 0.6, MAX_LENGTH, 2)
        )
        huge = numpy(
            translator.translate_with_options(strings, 0.6, 2**31 - 1, 2)
        )
        self.assertAllEqual(huge["outputs"], expected["outputs"])
        self.assertAllClose(huge["scores"], expected["scores"])
        self.assertAllLess(expected["scores"], 0.0)  # real hypotheses
        # The same for an export-time default beyond int32.
        fixed = tiny_translator(length_offset=2**40, model=translator.model)
        result = numpy(fixed.translate(strings))
        self.assertAllEqual(result["outputs"], expected["outputs"][:, 0])

    def test_options_out_of_range_name_the_option(self):
        translator = tiny_translator()
        strings = tf.constant(["Hi"])
        for args, message in (
            ((0.6, 4, 5), "`num_hypotheses` must be in [1, 4]"),
            ((0.6, 4, 0), "Received: num_hypotheses="),
            (
                (-1.0, 4, 1),
                "`alpha` must be a non-negative number. Received: alpha=",
            ),
            ((float("nan"), 4, 1), "Received: alpha=] [nan]"),
            ((float("inf"), 4, 1), "Received: alpha=] [inf]"),
            ((0.6, -2, 1), "Received: length_offset="),
        ):
            with self.assertRaisesRegex(
                tf.errors.InvalidArgumentError, re.escape(message)
            ):
                translator.translate_with_options(strings, *args)

    def test_request_alpha_is_bounded_at_the_requests_longest_output(self):
        # A client may send any alpha; one whose length penalty overflows
        # float32 at the request's longest output, min(source tokens +
        # length_offset, max_length), would give every hypothesis -0.0.
        model = tiny_model()
        strings = tf.constant(SENTENCES)  # both cut to max_length - 1 tokens
        for translator in (
            tiny_translator(model=model),
            Translator(model, fixtures.tokenizer(), jit_compile=True),
        ):
            for offset, longest, bound, beyond in (
                (50, MAX_LENGTH, 85.19, 85.2),
                (0, MAX_LENGTH - 1, 90.45, 90.46),
            ):
                with self.subTest(
                    jit_compile=translator.jit_compile, offset=offset
                ):
                    result = translator.translate_with_options(
                        strings, bound, offset, 4
                    )
                    scores = result["scores"].numpy()
                    self.assertAllLess(scores, 0.0)  # finite, not -0.0
                    self.assertAllGreaterEqual(
                        scores[:, :-1] - scores[:, 1:], 0.0
                    )
                    message = (
                        f"`alpha` must be at most {bound} here: the length "
                        f"penalty ((5 + {longest}) / 6) ** alpha of the "
                        "longest output overflows float32 beyond it "
                        f"(paper: 0.6). Received: alpha=] [{beyond}]"
                    )
                    with self.assertRaisesRegex(
                        tf.errors.InvalidArgumentError, re.escape(message)
                    ):
                        translator.translate_with_options(
                            strings, beyond, offset, 4
                        )

    def test_xla_translator_equals_the_graph_translator(self):
        # jit_compile pads the batch (3 -> 4) and the lengths to buckets:
        # the padding must change nothing.
        model = tiny_model()
        graph = tiny_translator(model=model)
        xla = Translator(
            model, fixtures.tokenizer(), length_offset=4, jit_compile=True
        )
        strings = tf.constant([*SENTENCES, ""])
        for name, call in (
            ("translate", lambda t: t.translate(strings)),
            ("options", lambda t: t.translate_with_options(strings, 0.0, 2, 3)),
            ("ids", lambda t: t.translate_ids(tf.constant([[5, 9, 17, 0]]))),
        ):
            with self.subTest(name):
                self.assert_same_results(call(xla), call(graph), atol=1e-4)
        for translator in (graph, xla):  # growing and fixed-size caches
            empty = translator.translate(tf.constant([], tf.string))["outputs"]
            self.assertEqual(empty.shape, (0,))

    def test_parallel_searches_equal_one_search(self):
        # The parts of a batch are searched by separate loops (some empty
        # when the batch is smaller); each sentence's results must not
        # change, nor their order.
        model = tiny_model()
        one = Translator(
            model, fixtures.tokenizer(), length_offset=4, parallel_searches=1
        )
        strings = tf.constant([*SENTENCES, "", SENTENCES[0]])
        # 2 (the default) splits the four sentences evenly, 3 unevenly; the
        # one-sentence and empty calls leave parts empty.
        for parts in (2, 3):
            split = Translator(
                model,
                fixtures.tokenizer(),
                length_offset=4,
                parallel_searches=parts,
            )
            for name, call in (
                ("translate", lambda t: t.translate(strings)),
                (
                    "options",
                    lambda t: t.translate_with_options(strings, 0.0, 2, 3),
                ),
                ("one sentence", lambda t: t.translate(strings[:1])),
                ("no sentence", lambda t: t.translate(strings[:0])),
                (
                    "ids",
                    lambda t: t.translate_ids(tf.constant([[5, 9, 17, 0]])),
                ),
            ):
                with self.subTest(name, parts=parts):
                    # Matmuls over fewer rows may round differently.
                    self.assert_same_results(call(split), call(one), atol=1e-5)

    def test_constructor_checks(self):
        model = tiny_model()
        tokenizer = fixtures.tokenizer()
        for kwargs, message in (
            ({"beam_size": 0}, "Received: beam_size=0"),
            (
                {"beam_size": fixtures.VOCAB_SIZE + 1},
                "`beam_size` must be at most the vocabulary size: beam search "
                "takes the top K of the V next tokens. Lower `beam_size`. "
                f"Received: beam_size={fixtures.VOCAB_SIZE + 1}, "
                f"vocab_size={fixtures.VOCAB_SIZE}",
            ),
            ({"alpha": -0.5}, "Received: alpha=-0.5"),
            ({"alpha": float("nan")}, "Received: alpha=nan"),
            (
                {"alpha": 85.2},
                "`alpha` must be at most 85.19 here: the length penalty "
                f"((5 + {MAX_LENGTH}) / 6) ** alpha of the longest output "
                "overflows float32 beyond it (paper: 0.6). "
                "Received: alpha=85.2",
            ),
            ({"length_offset": -1}, "Received: length_offset=-1"),
            ({"parallel_searches": 0}, "Received: parallel_searches=0"),
            ({"parallel_searches": True}, "Received: parallel_searches=True"),
            ({"beam_size": True}, "Received: beam_size=True"),
        ):
            with self.assertRaisesRegex(ValueError, re.escape(message)):
                Translator(model, tokenizer, **kwargs)
        # As beam_search says it.
        with self.assertRaisesRegex(
            TypeError, "number .* Received: alpha='0.6'"
        ):
            Translator(model, tokenizer, alpha="0.6")
        # numpy integers (e.g. from a sweep) are integers.
        translator = Translator(
            model,
            tokenizer,
            beam_size=np.int64(2),
            length_offset=np.int32(5),
            parallel_searches=np.int64(2),
        )
        self.assertEqual(
            (
                translator.beam_size,
                translator.length_offset,
                translator.parallel_searches,
            ),
            (2, 5, 2),
        )
        self.assertIs(type(translator.length_offset), int)
        # The largest alpha whose penalty at max_length stays finite.
        Translator(model, tokenizer, alpha=85.19)
        # A beam as wide as the vocabulary is allowed.
        Translator(model, tokenizer, beam_size=fixtures.VOCAB_SIZE)
        other = build_transformer(model.config.replace(vocab_size=100))
        with self.assertRaisesRegex(
            ValueError, "share one vocabulary.*model.config.vocab_size=100"
        ):
            Translator(other, tokenizer)
        # Its own source vocabulary, of the tokenizer's size or not: the
        # source ids would index it (silently wrong, or a gather error).
        for source_vocab_size in (50, fixtures.VOCAB_SIZE + 8):
            own_source = build_transformer(
                model.config.replace(
                    share_embeddings="target",
                    source_vocab_size=source_vocab_size,
                )
            )
            with self.assertRaisesRegex(
                ValueError,
                "one vocabulary.*this one has its own source vocabulary. "
                f"Received: model.config.source_vocab_size={source_vocab_size}",
            ):
                Translator(own_source, tokenizer)


class SearchBoundaryTest(TestCase):
    def test_a_source_of_exactly_max_input_length_tokens_is_kept_whole(self):
        # max_length - 1 subword tokens (+ EOS) fit: not truncated, and
        # translated from all of them; one more token is truncated.
        translator = tiny_translator()
        limit = translator.max_input_length  # 11
        tokens = list(range(5, 5 + limit + 1))  # 12 subword ids, none special
        fits = tf.constant([tokens[:limit]])
        result = translator.translate_ids(fits)
        self.assertAllEqual(result["truncated"], [False])
        over = translator.translate_ids(tf.constant([tokens]))
        self.assertAllEqual(over["truncated"], [True])
        # The reference: the model's search over the 11 tokens and EOS, with
        # translate_ids's limit min(11 + length_offset 4, max_length).
        expected = transformer_beam_search(
            translator.model,
            tf.constant([tokens[:limit] + [EOS_ID]]),
            beam_size=4,
            max_decode_length=[min(limit + 4, MAX_LENGTH)],
            alpha=0.6,
        )
        self.assertAllClose(result["scores"], expected.scores[:, 0], atol=1e-5)
        self.assertAllEqual(result["lengths"], expected.lengths[:, 0])

    def test_parallel_searches_of_unequal_limits_equal_one_search(self):
        # Without `max_decode_steps` the parts must still share one loop
        # length (the largest limit of the whole batch), or their ids
        # cannot be joined.
        model = tiny_model()
        source = tf.constant(
            [[5, 9, 17, EOS_ID], [6, 7, EOS_ID, 0], [8, EOS_ID, 0, 0]]
        )
        limits = tf.constant([7, 3, 2])
        one = transformer_beam_search(model, source, 2, limits, num_return=2)
        for parts in (2, 3):
            split = transformer_beam_search(
                model, source, 2, limits, num_return=2, parallel_searches=parts
            )
            self.assertEqual(split.ids.shape, (3, 2, 7))
            self.assertAllEqual(split.ids, one.ids)
            self.assertAllEqual(split.lengths, one.lengths)
            self.assertAllClose(split.scores, one.scores, atol=1e-5)


class EosBiased:
    """A `Transformer` whose decoding steps favour EOS by `bias` (so that
    hypotheses end early and the search can stop before its limits) and
    count themselves in `steps` (a tf.Variable, also inside graphs)."""

    def __init__(self, model, bias):
        self._model = model
        self._bias = tf.one_hot(EOS_ID, model.config.vocab_size) * bias
        self.steps = tf.Variable(0)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def decode_step(self, *args, **kwargs):
        self.steps.assign_add(1)
        logits, cache = self._model.decode_step(*args, **kwargs)
        return logits + self._bias, cache


class NumNeededTest(TestCase):
    SOURCE = [[5, 9, 17, 30, 41, 12, EOS_ID], [6, 7, 8, 22, EOS_ID, 0, 0]]

    def test_parallel_searches_with_num_needed_equal_one_search(self):
        # All N returned hypotheses, not only the `num_needed` first: a
        # search stops once those are final and leaves the others as they
        # are then, so the parts must stop as one search does.
        model = EosBiased(tiny_model(), bias=4.0)
        source = tf.constant(self.SOURCE)

        def search(parts, num_needed):
            return transformer_beam_search(
                model,
                source,
                4,
                11,
                num_return=4,
                num_needed=num_needed,
                parallel_searches=parts,
            )

        one = search(1, 1)
        full = search(1, None)
        self.assertNotAllClose(  # fixture: stopping early shows
            one.scores[:, 1:], full.scores[:, 1:]
        )
        split = search(2, 1)
        self.assertAllEqual(split.ids, one.ids)
        self.assertAllEqual(split.lengths, one.lengths)
        self.assertAllClose(split.scores, one.scores, atol=1e-5)

    def test_request_for_fewer_hypotheses_decodes_fewer_steps(self):
        # translate_with_options's graph holds K hypotheses; a request for
        # one must stop once it is final, not wait for all K.
        model = EosBiased(tiny_model(), bias=4.0)
        translator = tiny_translator(model=model)
        source = tf.constant(
            ["The cat sleeps on the sofa.", "I like green tea."]
        )
        steps = []
        for n in (1, 4):
            model.steps.assign(0)
            translator.translate_with_options(source, 0.6, 4, n)
            steps.append(int(model.steps.numpy()))
        self.assertLess(steps[0], steps[1])


def learned_positions_translators(max_length=20):
    """The graph and XLA translators (length_offset 50) of a tiny model
    with a learned position table of `max_length` rows (Table 3 row E)."""
    model = tiny_model(max_length=max_length, positional="learned")
    return [
        Translator(
            model, fixtures.tokenizer(), length_offset=50, jit_compile=jit
        )
        for jit in (False, True)
    ]


class XlaLearnedPositionsTest(TestCase):
    def test_xla_source_padding_stays_within_a_learned_position_table(self):
        # 16 subword tokens + EOS were padded to 32 source positions for
        # XLA's length buckets, past the table's 20 rows ("Expected size[0]
        # in [0, 20], but got 32"); the graph translator translated them.
        graph, xla = learned_positions_translators(max_length=20)
        ids = tf.constant([list(range(5, 21))])  # 16 tokens (at most 19)
        got, want = xla.translate_ids(ids), graph.translate_ids(ids)
        self.assertAllEqual(got["output_ids"], want["output_ids"])
        self.assertAllClose(got["scores"], want["scores"], atol=1e-4)
