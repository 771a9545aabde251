import contextlib
import io
import json
import math
import os
import re
import shutil
import tempfile
from unittest import mock

import numpy as np
import sacrebleu
import sacremoses
import tensorflow as tf
from sacrebleu.tokenizers import tokenizer_ja_mecab, tokenizer_ko_mecab

from keras_transformer import evaluate, evaluation, serving, tokens
from keras_transformer.training import run_checks
from tests.data import fixtures
from tests.decoding.test_translator import tiny_model
from tests.test_case import TestCase
from tests.test_commands import parse_flags, run_main

# Patched by name: `evaluate.main` imports it when it runs.
INFERENCE = "keras_transformer.inference"

REFERENCES = [
    "Der Mann sieht den großen Hund.",
    "Am dritten Mai liest die Frau ein Buch.",
    "Ich weiß, dass das Kind ein rotes Auto kaufen will.",
]


def parse(*args):
    """The evaluate command's flags, parsed from `args`."""
    return parse_flags(evaluate, *args)[0]


def fake_translator(hypotheses):
    """A loaded translator that returns `hypotheses` and, as an export,
    scores no perplexity."""
    translator = mock.Mock(description="fake")
    translator.translate.return_value = hypotheses
    translator.perplexity.return_value = None
    return translator


def run_with_translations(hypotheses, *args):
    """`evaluate.main` on the flags with a translator that returns
    `hypotheses` (the `--model` is never loaded); its exit status, stdout
    and stderr."""
    translator = fake_translator(hypotheses)
    with mock.patch(f"{INFERENCE}.load_translator", return_value=translator):
        result = run_main(evaluate, *args)
    return result.returncode, result.stdout, result.stderr


class EvaluationTest(TestCase):
    def test_perfect_translation_scores_100(self):
        scores = evaluation.score(REFERENCES, REFERENCES)
        self.assertAllClose(scores.bleu, 100.0)
        self.assertAllClose(scores.chrf, 100.0)
        self.assertAllClose(scores.tokenized_bleu, 100.0)
        self.assertEqual(scores.num_sentences, 3)
        self.assertIn("nrefs:1", scores.bleu_signature)

    def test_matches_sacrebleu_on_a_known_pair(self):
        hypotheses = [
            "Der Mann sieht einen großen Hund.",
            "Am dritten Mai liest eine Frau das Buch.",
            "Ich weiß, dass das Kind ein Auto will.",
        ]
        scores = evaluation.score(hypotheses, REFERENCES)
        expected = sacrebleu.corpus_bleu(hypotheses, [REFERENCES]).score
        self.assertAllClose(scores.bleu, expected)
        self.assertAllClose(
            scores.chrf, sacrebleu.corpus_chrf(hypotheses, [REFERENCES]).score
        )
        self.assertLess(scores.bleu, 100.0)
        self.assertEqual(
            sorted(scores.to_json_dict()),
            [
                "bleu",
                "chrf",
                "chrf_signature",
                "num_sentences",
                "signature",
                "tokenized_bleu",
                "tokenized_bleu_signature",
            ],
        )

    def test_paper_tokenization_splits_compounds_and_punctuation(self):
        self.assertEqual(
            evaluation.paper_tokenize("Die Nord-Süd-Achse, sagte er.", "de"),
            "Die Nord ##AT##-##AT## Süd ##AT##-##AT## Achse , sagte er .",
        )

    def test_compound_splitting_is_for_german_targets_only(self):
        # get_ende_bleu.sh's ##AT## splitting is the en-de convention; French
        # hyphenated words stay whole, as Moses tokenizes them.
        self.assertEqual(
            evaluation.paper_tokenize("C'est-à-dire un porte-avions.", "fr"),
            "C' est-à-dire un porte-avions .",
        )
        for lang in ("en", "fr", "es"):
            self.assertNotIn(
                "##AT##",
                evaluation.paper_tokenize("A well-known e-mail.", lang),
            )
        self.assertEqual(
            evaluation.paper_tokenize("Ein E-Mail-Konto.", "de"),
            "Ein E ##AT##-##AT## Mail ##AT##-##AT## Konto .",
        )

    def test_tokenized_bleu_is_case_sensitive(self):
        # As multi-bleu.perl without -lc: a lower-cased hypothesis is wrong.
        hypotheses, references = (
            ["das haus ist klein ."],
            ["Das Haus ist klein ."],
        )
        self.assertAllClose(
            evaluation.tokenized_bleu(references, references, "de"), 100
        )
        self.assertLess(
            evaluation.tokenized_bleu(hypotheses, references, "de"), 100
        )

    def test_french_tokenized_bleu_is_multi_bleu_on_moses_tokens(self):
        # multi-bleu.perl on `tokenizer.perl -l fr` output (checked against
        # the script): "C' est-à-dire qu' il arrive hier ." against
        # "C' est-à-dire qu' il est arrivé hier ."; 1- to 4-gram precisions
        # 6/7, 4/6, 2/5, 1/4; 7 words against 8. Split compounds (3 more
        # matching tokens each side) scored 67.75.
        hypotheses = ["C'est-à-dire qu'il arrive hier."]
        references = ["C'est-à-dire qu'il est arrivé hier."]
        expected = (
            100 * math.exp(1 - 8 / 7) * (6 / 7 * 4 / 6 * 2 / 5 * 1 / 4) ** 0.25
        )
        self.assertAllClose(
            evaluation.tokenized_bleu(hypotheses, references, "fr"), expected
        )
        scores = evaluation.score(hypotheses, references, target_lang="fr")
        self.assertAllClose(scores.tokenized_bleu, expected)
        self.assertEqual(scores.tokenized_bleu_signature, "moses-fr|multi-bleu")
        german = evaluation.score(REFERENCES, REFERENCES, target_lang="de")
        self.assertEqual(
            german.to_json_dict()["tokenized_bleu_signature"],
            "moses-de+compound-split|multi-bleu",
        )

    def test_length_mismatch_and_empty_input_are_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "2 hypotheses and 3 ref"):
            evaluation.score(REFERENCES[:2], REFERENCES)
        with self.assertRaisesRegex(ValueError, "empty"):
            evaluation.score([], [])

    def test_a_string_or_bytes_instead_of_sentences_is_a_clear_error(self):
        # One string was scored as one sentence per character (9 here).
        for function in (evaluation.score, evaluation.tokenized_bleu):
            with self.assertRaisesRegex(
                TypeError,
                re.escape(
                    "`hypotheses` must be a list of sentences, not one string; "
                    "wrap it in a list. Received: hypotheses='Der Hund.'"
                ),
            ):
                function("Der Hund.", "Der Hund.", "de")
        for references, item in (
            ([["Der Hund."]], "['Der Hund.'] (list)"),
            ([b"Der Hund."], "b'Der Hund.' (bytes)"),
        ):
            with self.assertRaisesRegex(
                TypeError,
                re.escape(
                    "`references` must hold strings (decode bytes as UTF-8). "
                    f"Received: references[0]={item}"
                ),
            ):
                evaluation.score(["Der Hund."], references)

    def test_bleu_tokenizes_chinese_targets_as_sacrebleu_does(self):
        references = ["我们今天去公园散步。", "他昨天买了一本新书。"]
        hypotheses = ["我们今天去公园跑步。", "他昨天买了一本旧书。"]
        scores = evaluation.score(hypotheses, references, target_lang="zh")
        self.assertIn("tok:zh", scores.bleu_signature)
        expected = sacrebleu.corpus_bleu(
            hypotheses, [references], tokenize="zh"
        )
        self.assertAllClose(scores.bleu, expected.score)
        self.assertGreater(scores.bleu, 50.0)  # 13a's whole-sentence words: 0.
        # Moses leaves unspaced sentences whole too: no tokenized BLEU.
        self.assertIsNone(scores.tokenized_bleu)
        self.assertIsNone(scores.to_json_dict()["tokenized_bleu"])
        self.assertIsNone(scores.to_json_dict()["tokenized_bleu_signature"])

    def test_bleu_is_unchanged_for_languages_with_spaces(self):
        hypotheses = [
            "Der Mann sieht einen großen Hund.",
            "Am dritten Mai liest eine Frau das Buch.",
            "Ich weiß, dass das Kind ein Auto will.",
        ]
        expected = sacrebleu.corpus_bleu(hypotheses, [REFERENCES]).score
        for lang in ("en", "de", "fr"):
            scores = evaluation.score(hypotheses, REFERENCES, target_lang=lang)
            self.assertIn("tok:13a", scores.bleu_signature)
            self.assertAllClose(scores.bleu, expected)
            self.assertIsNotNone(scores.tokenized_bleu)

    def test_language_codes_count_by_their_primary_subtag(self):
        # Exact matches only gave "zh-TW" 13a (BLEU 0 here) and a tokenized
        # BLEU of whole sentences; "fr-CA" Moses' default rules, "de-CH" no
        # compound splitting.
        references = ["我们今天去公园散步。", "他昨天买了一本新书。"]
        hypotheses = ["我们今天去公园跑步。", "他昨天买了一本旧书。"]
        chinese = evaluation.score(hypotheses, references, target_lang="zh")
        for lang in ("zh-TW", "zh_CN", "ZH", "zh-Hant-TW"):
            scores = evaluation.score(hypotheses, references, target_lang=lang)
            self.assertEqual(scores, chinese, lang)
            self.assertIn("tok:zh", scores.bleu_signature)
            self.assertIsNone(scores.tokenized_bleu)
        for lang in ("de-CH", "DE", "de_AT"):
            self.assertEqual(
                evaluation.paper_tokenize("Ein E-Mail-Konto.", lang),
                "Ein E ##AT##-##AT## Mail ##AT##-##AT## Konto .",
            )
            self.assertEqual(
                evaluation.score(
                    REFERENCES, REFERENCES, lang
                ).tokenized_bleu_signature,
                "moses-de+compound-split|multi-bleu",
            )
        self.assertEqual(
            evaluation.paper_tokenize("C'est-à-dire un porte-avions.", "fr-CA"),
            "C' est-à-dire un porte-avions .",
        )
        self.assertEqual(
            evaluation.tokenized_bleu_signature("pt_BR"), "moses-pt|multi-bleu"
        )
        message = "pip install 'sacrebleu[ja]'. Received: target_lang=ja-JP"
        with (
            mock.patch.object(tokenizer_ja_mecab, "MeCab", None),
            self.assertRaisesRegex(ValueError, re.escape(message)),
        ):
            evaluation.check_target_language("ja-JP")

    def test_missing_japanese_and_korean_tokenizers_are_clear_errors(self):
        # As without mecab-python3 / mecab-ko installed (sacreBLEU's extras).
        for lang, module in (
            ("ja", tokenizer_ja_mecab),
            ("ko", tokenizer_ko_mecab),
        ):
            message = (
                f"BLEU for target language {lang} needs an optional sacreBLEU "
                f"tokenizer that is not installed; install it with pip install "
                f"'sacrebleu[{lang}]'. Received: target_lang={lang}"
            )
            with mock.patch.object(module, "MeCab", None):
                with self.assertRaisesRegex(
                    ValueError, f"^{re.escape(message)}$"
                ):
                    evaluation.check_target_language(lang)
                with self.assertRaisesRegex(ValueError, "sacrebleu"):
                    evaluation.score(["一"], ["一"], target_lang=lang)
        evaluation.check_target_language("de")

    def test_tokenized_bleu_is_multi_bleu_without_smoothing(self):
        # 1- to 4-gram precisions 5/5, 3/4, 2/3, 1/2; 5 words against 6.
        hypothesis = ["Der Mann sieht den Hund"]
        reference = ["Der Mann sieht den großen Hund"]
        self.assertAllClose(
            evaluation.tokenized_bleu(hypothesis, reference, "de"),
            100 * math.exp(1 - 6 / 5) * (1 * 3 / 4 * 2 / 3 * 1 / 2) ** 0.25,
        )
        # No 4-gram in common: multi-bleu.perl gives 0 (smoothing: 10.68).
        self.assertEqual(
            evaluation.tokenized_bleu(
                ["Der Hund läuft schnell weg."],
                ["Ein Hund rennt schnell davon."],
                "de",
            ),
            0.0,
        )

    def test_paper_tokenization_builds_one_moses_tokenizer_per_language(self):
        evaluation._moses_tokenizer.cache_clear()
        with mock.patch.object(
            sacremoses, "MosesTokenizer", wraps=sacremoses.MosesTokenizer
        ) as constructor:
            for sentence in REFERENCES:
                evaluation.paper_tokenize(sentence, "de")
            evaluation.paper_tokenize("The man sees the dog.", "en")
        self.assertEqual(constructor.call_count, 2)
        evaluation._moses_tokenizer.cache_clear()


class PerplexityTest(TestCase):
    def per_sentence_perplexity(self, model, tokenizer, pairs):
        """Table 3's PPL by hand: each pair alone (no padding, no batch),
        exp of the mean -log p of its target tokens and EOS."""
        total, count = 0.0, 0
        for source, target in pairs:
            source_ids = tokenizer.tokenize(tf.constant([source])).to_list()[0]
            target_ids = tokenizer.tokenize(tf.constant([target])).to_list()[0]
            logits = model(
                {
                    "source_ids": tf.constant([source_ids + [tokens.EOS_ID]]),
                    "target_ids": tf.constant([[tokens.BOS_ID] + target_ids]),
                },
                training=False,
            )[0]
            log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float64)).numpy()
            labels = target_ids + [tokens.EOS_ID]
            total -= sum(log_probs[i, label] for i, label in enumerate(labels))
            count += len(labels)
        return math.exp(total / count), count

    def test_is_the_exp_of_the_mean_token_loss_however_batched(self):
        model = tiny_model(max_length=40)
        tokenizer = fixtures.tokenizer()
        pairs = fixtures.PAIRS[:9]
        want, count = self.per_sentence_perplexity(model, tokenizer, pairs)
        sources, references = zip(*pairs)
        # Batches of one or two pairs (a budget of max_length), and one.
        for batch_tokens in (40, 4096):
            with self.subTest(batch_tokens=batch_tokens):
                got = evaluation.perplexity(
                    model, tokenizer, sources, references, batch_tokens
                )
                self.assertAllClose(got.perplexity, want, rtol=1e-5)
                self.assertEqual(got.num_tokens, count)
                self.assertEqual(got.stats.num_examples, len(pairs))
        # An untrained model is near uniform over the 320 ids.
        self.assertBetween(want, 100, 1000)

    def test_a_scorer_reads_the_weights_of_each_call(self):
        # As during training: the same dev pairs, scored again as the
        # weights change, without tracing the model again.
        model = tiny_model(max_length=40)
        tokenizer = fixtures.tokenizer()
        pairs = fixtures.PAIRS[:5]
        scorer = evaluation.PerplexityScorer(model, tokenizer, *zip(*pairs))
        before = scorer().perplexity
        rng = np.random.default_rng(0)
        model.set_weights(
            [w + rng.normal(0, 0.1, w.shape) for w in model.get_weights()]
        )
        want, _ = self.per_sentence_perplexity(model, tokenizer, pairs)
        after = scorer().perplexity
        self.assertAllClose(after, want, rtol=1e-5)
        self.assertNotAllClose(after, before, rtol=1e-3)
        # One trace for batches of every shape, and for both calls.
        traces = scorer._summed_loss.experimental_get_tracing_count()
        self.assertEqual(traces, 1)

    def test_pairs_it_cannot_score_are_left_out_and_counted(self):
        model = tiny_model(max_length=40)
        tokenizer = fixtures.tokenizer()
        long_source = " ".join(source for source, _ in fixtures.PAIRS[:4])
        pairs = [
            fixtures.PAIRS[0],
            (fixtures.PAIRS[1][0], ""),
            (long_source, fixtures.PAIRS[2][1]),
            fixtures.PAIRS[3],
        ]
        got = evaluation.perplexity(model, tokenizer, *zip(*pairs))
        want, count = self.per_sentence_perplexity(
            model, tokenizer, [pairs[0], pairs[3]]
        )
        self.assertAllClose(got.perplexity, want, rtol=1e-5)
        self.assertEqual(got.num_tokens, count)
        self.assertEqual(
            (
                got.stats.num_pairs,
                got.stats.dropped_empty,
                got.stats.dropped_overlong,
            ),
            (4, 1, 1),
        )
        with self.assertRaisesRegex(
            ValueError, "No pair can be scored for perplexity.*1 pairs read"
        ):
            evaluation.perplexity(model, tokenizer, [long_source], ["Ja."])
        with self.assertRaisesRegex(ValueError, "as many references"):
            evaluation.perplexity(model, tokenizer, ["Hi."], [])


class EvaluateCommandTest(TestCase):
    def tempdir(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder, ignore_errors=True)
        return folder

    def setUp(self):
        super().setUp()
        self.folder = self.tempdir()
        self.src = os.path.join(self.folder, "test.en")
        self.ref = os.path.join(self.folder, "test.de")
        for path, line in ((self.src, "Hello."), (self.ref, "Hallo.")):
            with open(path, "w", encoding="utf-8") as file:
                file.write(line + "\n")
        # A training directory of a de->en run (the model is never loaded).
        self.model_dir = os.path.join(self.folder, "run")
        os.makedirs(os.path.join(self.model_dir, "checkpoints"))
        for name in (
            "model.keras",
            "averaged.keras",
            "checkpoints/ckpt-2.keras",
        ):
            open(os.path.join(self.model_dir, name), "wb").close()
        settings = {"src_lang": "de", "tgt_lang": "en", "data": "demo"}
        with open(
            os.path.join(self.model_dir, run_checks.SETTINGS_FILE), "w"
        ) as f:
            json.dump(settings, f)

    def assert_one_line_error(self, args, message):
        result = run_main(evaluate, *args)
        self.assertEqual(result.returncode, 1)
        self.assertEqual(result.stderr, f"evaluate: error: {message}\n")

    def test_output_must_not_be_an_input_file(self):
        model = f"--model={self.model_dir}"
        inputs = [model, f"--src={self.src}", f"--ref={self.ref}"]
        hard_link = os.path.join(self.folder, "hard.de")
        os.link(self.ref, hard_link)
        symlink = os.path.join(self.folder, "link.en")
        os.symlink(self.src, symlink)
        for output, name, path, what in (
            (self.ref, "ref", self.ref, "references"),
            (hard_link, "ref", self.ref, "references"),
            (
                os.path.join(self.folder, ".", "test.de"),
                "ref",
                self.ref,
                "references",
            ),
            (symlink, "src", self.src, "sources"),
        ):
            self.assert_one_line_error(
                [*inputs, f"--output={output}"],
                "`--output` must not be an input file: writing it would "
                f"overwrite the {what}; choose another path. "
                f"Received: output={output}, {name}={path}",
            )
        # A file of a `--data` test split (the run is de->en: test.de, test.en).
        for data in (
            f"text:{self.folder}/train",
            f"text:test={self.folder}/test",
        ):
            for path in (self.ref, self.src):
                self.assert_one_line_error(
                    [
                        model,
                        f"--data={data}",
                        "--split=test",
                        f"--output={path}",
                    ],
                    "`--output` must not be an input file: writing it would "
                    "overwrite the test split; choose another path. "
                    f"Received: output={path}, data={path}",
                )
        with open(self.ref, encoding="utf-8") as file:
            self.assertEqual(file.read(), "Hallo.\n")
        with open(self.src, encoding="utf-8") as file:
            self.assertEqual(file.read(), "Hello.\n")

    def test_output_must_not_be_a_file_of_another_split_or_the_training_data(
        self,
    ):
        # Scoring the test split must not overwrite the corpus's train or
        # dev files, nor those of the model's own training corpus.
        for split in ("train", "dev"):
            for lang in ("de", "en"):
                with open(
                    os.path.join(self.folder, f"{split}.{lang}"), "w"
                ) as f:
                    f.write("Daten.\n")
        tsv = os.path.join(self.folder, "train.tsv")
        with open(tsv, "w") as file:
            file.write("Hallo.\tHello.\n")
        model = f"--model={self.model_dir}"
        for data, path, split in (
            (f"text:{self.folder}/train", f"{self.folder}/train.de", "train"),
            (f"text:{self.folder}/train", f"{self.folder}/dev.en", "dev"),
            (f"tsv:test={self.src},train={tsv}", tsv, "train"),
        ):
            self.assert_one_line_error(
                [model, f"--data={data}", "--split=test", f"--output={path}"],
                "`--output` must not be an input file: writing it would "
                f"overwrite the {split} split; choose another path. "
                f"Received: output={path}, data={path}",
            )
        settings = {
            "src_lang": "de",
            "tgt_lang": "en",
            "data": f"text:{self.folder}/train",
        }
        with open(
            os.path.join(self.model_dir, run_checks.SETTINGS_FILE), "w"
        ) as f:
            json.dump(settings, f)
        path = f"{self.folder}/dev.en"
        self.assert_one_line_error(
            [
                model,
                f"--src={self.src}",
                f"--ref={self.ref}",
                f"--output={path}",
            ],
            "`--output` must not be an input file: writing it would overwrite "
            "the training run's dev split; choose another path. "
            f"Received: output={path}, model={path}",
        )
        for split in ("train", "dev"):
            with open(os.path.join(self.folder, f"{split}.en")) as file:
                self.assertEqual(file.read(), "Daten.\n")

    def test_output_must_not_be_a_file_of_the_model(self):
        data = [f"--src={self.src}", f"--ref={self.ref}"]
        run_dir = self.model_dir
        vocab = os.path.join(run_dir, "vocab.model")
        checkpoint = os.path.join(run_dir, "checkpoints", "ckpt-2.keras")
        other_vocab = os.path.join(self.folder, "other.model")
        export = os.path.join(self.folder, "export", "1")
        os.makedirs(os.path.join(export, "variables"))
        for path in (
            vocab,
            other_vocab,
            os.path.join(export, "saved_model.pb"),
            os.path.join(export, "variables", "variables.index"),
        ):
            with open(path, "w") as file:
                file.write("model")
        # A training directory or a checkpoint: the .keras file and the
        # vocabulary found beside it (or one level up).
        for model, output, name, what in (
            (run_dir, "model.keras", "model", "model"),
            (run_dir, "vocab.model", "vocab", "vocabulary"),
            (checkpoint, "vocab.model", "vocab", "vocabulary"),
            (checkpoint, "checkpoints/ckpt-2.keras", "model", "model"),
        ):
            output = path = os.path.join(run_dir, output)
            self.assert_one_line_error(
                [f"--model={model}", *data, f"--output={output}"],
                "`--output` must not be an input file: writing it would "
                f"overwrite the {what}; choose another path. "
                f"Received: output={output}, {name}={path}",
            )
        self.assert_one_line_error(
            [
                f"--model={run_dir}",
                *data,
                f"--vocab={other_vocab}",
                f"--output={other_vocab}",
            ],
            "`--output` must not be an input file: writing it would overwrite "
            "the vocabulary; choose another path. "
            f"Received: output={other_vocab}, vocab={other_vocab}",
        )
        # Every file of an export (here its latest version of a serving
        # directory, which records no languages: they are given).
        index = os.path.join(export, "variables", "variables.index")
        languages = ["--src_lang=en", "--tgt_lang=de"]
        self.assert_one_line_error(
            [
                f"--model={os.path.dirname(export)}",
                *data,
                *languages,
                f"--output={index}",
            ],
            "`--output` must not be an input file: writing it would overwrite "
            f"the model; choose another path. Received: output={index}, "
            f"model={index}",
        )
        for path in (vocab, other_vocab, index):
            with open(path) as file:
                self.assertEqual(file.read(), "model")

    def test_output_must_not_be_a_file_of_the_training_run(self):
        # A resumption reads them: overwriting settings.json broke the run.
        data = [f"--src={self.src}", f"--ref={self.ref}"]
        run_dir = self.model_dir
        os.makedirs(os.path.join(run_dir, "backup"))
        state = os.path.join(run_dir, "backup", "state.json")
        settings = os.path.join(run_dir, run_checks.SETTINGS_FILE)
        data_json = os.path.join(run_dir, "vocab.data.json")
        for path in (state, data_json):
            open(path, "w").close()
        averaged = os.path.join(run_dir, "averaged.keras")
        checkpoint = os.path.join(run_dir, "checkpoints", "ckpt-2.keras")
        for model, output in (
            (run_dir, settings),
            (run_dir, state),
            (run_dir, data_json),
            (averaged, settings),
            (averaged, checkpoint),
            (checkpoint, settings),
        ):
            self.assert_one_line_error(
                [f"--model={model}", *data, f"--output={output}"],
                "`--output` must not be an input file: writing it would "
                "overwrite the training run; choose another path. "
                f"Received: output={output}, model={output}",
            )
        with open(settings) as file:
            self.assertEqual(json.load(file)["src_lang"], "de")
        # A new file beside the run's files is fine.
        flag_values = parse(
            f"--model={run_dir}", *data, f"--output={run_dir}/h.en"
        )
        evaluate._check_output(flag_values, "de", "en")

    def test_test_set_flags_name_one_test_set(self):
        model = f"--model={self.model_dir}"
        src, ref = f"--src={self.src}", f"--ref={self.ref}"
        for args, message in (
            (
                [src, ref, "--data=demo"],
                "Pass either --src and --ref, or --data, not both. Received: "
                f"src={self.src}, ref={self.ref}, data=demo",
            ),
            (
                [ref, "--data=demo"],
                "Pass either --src and --ref, or --data, not both. Received: "
                f"src=None, ref={self.ref}, data=demo",
            ),
            (
                [src],
                "`--src` needs `--ref`, the reference translations to score "
                "against (to translate without scoring, use "
                "keras_transformer.translate). Received: "
                f"src={self.src}, ref=None, data=None",
            ),
            (
                [ref],
                "`--ref` needs `--src`, the source sentences to translate. "
                f"Received: src=None, ref={self.ref}, data=None",
            ),
            (
                [],
                "Pass --src and --ref files, or --data. "
                "Received: src=None, ref=None, data=None",
            ),
        ):
            self.assert_one_line_error([model, *args], message)

    def test_split_and_data_dir_are_refused_with_src_and_ref(self):
        # They apply to --data only: with --src/--ref they were ignored.
        model = f"--model={self.model_dir}"
        src, ref = f"--src={self.src}", f"--ref={self.ref}"
        files = f"src={self.src}, ref={self.ref}"
        for args, message in (
            (
                ["--split=dev"],
                "--split applies only to --data, not to --src and --ref; drop "
                "it, or pass --data instead of --src and --ref. Received: "
                f"split=dev, {files}",
            ),
            (
                ["--split=test"],  # The default, but given.
                "--split applies only to --data, not to --src and --ref; drop "
                "it, or pass --data instead of --src and --ref. Received: "
                f"split=test, {files}",
            ),
            (
                ["--split=dev", "--data_dir=/tfds"],
                "--split and --data_dir apply only to --data, not to --src and "
                "--ref; drop them, or pass --data instead of --src and --ref. "
                f"Received: split=dev, data_dir=/tfds, {files}",
            ),
        ):
            self.assert_one_line_error([model, src, ref, *args], message)
        # The default alone is no flag given; with --data both apply.
        evaluate._check_test_set_flags(parse(model, src, ref))
        evaluate._check_test_set_flags(
            parse(model, "--data=demo", "--split=dev", "--data_dir=/tfds")
        )

    def test_languages_default_to_the_training_runs(self):
        for model in (
            self.model_dir,
            os.path.join(self.model_dir, "averaged.keras"),
            os.path.join(self.model_dir, "checkpoints", "ckpt-2.keras"),
        ):
            self.assertEqual(
                evaluate._languages(parse(f"--model={model}")), ("de", "en")
            )
            # Languages as the tokenizers see them (primary subtag, any case).
            for tgt_lang in ("en", "EN", "en-GB"):
                self.assertEqual(
                    evaluate._languages(
                        parse(f"--model={model}", f"--tgt_lang={tgt_lang}")
                    ),
                    ("de", "en"),
                )
        # An export records its own (a TF Serving model directory or one
        # version): it is the only file of the model that evaluate sees.
        base = self.tempdir()
        version = os.path.join(base, "3")
        os.makedirs(version)
        open(os.path.join(version, "saved_model.pb"), "wb").close()
        serving.write_languages(version, {"src_lang": "en", "tgt_lang": "fr"})
        for model in (base, version):
            self.assertEqual(
                evaluate._languages(parse(f"--model={model}")), ("en", "fr")
            )
        self.assert_one_line_error(
            [
                f"--model={base}",
                f"--src={self.src}",
                f"--ref={self.ref}",
                "--tgt_lang=de",
            ],
            "The model was trained en->fr "
            f"({version}/assets.extra/languages.json) but --tgt_lang=de; drop "
            f"the flags or correct them. Received: model={base}",
        )
        # Without a record (an export of a model trained elsewhere), the
        # flags as given, with a warning if none is.
        os.remove(os.path.join(version, serving.LANGUAGES_FILE))
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            self.assertEqual(
                evaluate._languages(parse(f"--model={base}")), ("en", "de")
            )
        self.assertEqual(
            stderr.getvalue(),
            "evaluate: warning: the model records no languages; scoring as "
            "en->de (pass --src_lang and --tgt_lang to choose)\n",
        )
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            self.assertEqual(
                evaluate._languages(
                    parse(f"--model={base}", "--src_lang=fr", "--tgt_lang=en")
                ),
                ("fr", "en"),
            )
        self.assertEqual(stderr.getvalue(), "")
        # A damaged record is named.
        with open(os.path.join(version, serving.LANGUAGES_FILE), "w") as file:
            file.write("[1]")
        with self.assertRaisesRegex(ValueError, "languages file is damaged"):
            evaluate._languages(parse(f"--model={base}"))

    def test_languages_that_contradict_the_training_run_are_errors(self):
        checkpoint = os.path.join(self.model_dir, "checkpoints", "ckpt-2.keras")
        data = [f"--src={self.src}", f"--ref={self.ref}"]
        for model, languages in (
            (self.model_dir, ["--src_lang=en", "--tgt_lang=de"]),
            (checkpoint, ["--tgt_lang=de"]),
        ):
            self.assert_one_line_error(
                [f"--model={model}", *data, *languages],
                "The model was trained de->en ("
                f"{self.model_dir}/settings.json) but {' '.join(languages)}; "
                f"drop the flags or correct them. Received: model={model}",
            )

    def test_settings_that_are_not_json_are_a_clear_error(self):
        path = os.path.join(self.model_dir, run_checks.SETTINGS_FILE)
        with open(path, "w") as file:
            file.write("{")
        self.assert_one_line_error(
            [
                f"--model={self.model_dir}",
                f"--src={self.src}",
                f"--ref={self.ref}",
            ],
            "The training run's settings.json is not valid JSON (Expecting "
            "property name enclosed in double quotes: line 1 column 2 "
            f"(char 1)); repair or delete it. Received: {path}",
        )

    def test_tokenized_bleu_is_scored_in_the_target_language(self):
        # --tgt_lang reaches the tokenized BLEU (French: no compound
        # splitting), and the printed name says what was computed.
        export = self.tempdir()  # No settings: the languages of the flags.
        hypothesis = "C'est-à-dire qu'il arrive hier."
        ref = os.path.join(self.folder, "test.fr")
        with open(ref, "w", encoding="utf-8") as file:
            file.write("C'est-à-dire qu'il est arrivé hier.\n")
        status, stdout, stderr = run_with_translations(
            [hypothesis],
            f"--model={export}",
            f"--src={self.src}",
            f"--ref={ref}",
            "--tgt_lang=fr",
        )
        self.assertEqual(status, 0, stderr)
        scores = json.loads(stdout)
        # multi-bleu.perl on the Moses tokens (see the French test above).
        self.assertEqual(scores["tokenized_bleu"], 42.38)
        self.assertEqual(
            scores["tokenized_bleu_signature"], "moses-fr|multi-bleu"
        )
        self.assertIn("tokenized BLEU 42.38 (moses-fr|multi-bleu)", stderr)

    def test_a_failed_output_write_still_prints_the_scores(self):
        # A full disk: it was a traceback after the translation, no scores.
        if not os.path.exists("/dev/full"):
            self.skipTest("needs Linux's /dev/full")
        status, stdout, stderr = run_with_translations(
            ["Hallo."],
            f"--model={self.tempdir()}",
            f"--src={self.src}",
            f"--ref={self.ref}",
            "--output=/dev/full",
        )
        self.assertEqual(status, 1)
        self.assertEqual(json.loads(stdout)["chrf"], 100.0)
        self.assertIn("chrF 100.00", stderr)
        self.assertTrue(
            stderr.endswith(
                "evaluate: error: Writing --output failed (No space left on "
                "device); the scores above are complete, the file is not. "
                "Received: output=/dev/full\n"
            ),
            stderr,
        )

    def test_missing_bleu_tokenizer_fails_before_translating(self):
        export = self.tempdir()  # No settings, no model.
        with mock.patch.object(tokenizer_ja_mecab, "MeCab", None):
            self.assert_one_line_error(
                [
                    f"--model={export}",
                    f"--src={self.src}",
                    f"--ref={self.ref}",
                    "--tgt_lang=ja",
                ],
                "BLEU for target language ja needs an optional sacreBLEU "
                "tokenizer that is not installed; install it with pip install "
                "'sacrebleu[ja]'. Received: target_lang=ja",
            )

    def write_lines(self, name, lines):
        """Writes `lines` to a file `name` in the test's folder; its path."""
        path = os.path.join(self.folder, name)
        with open(path, "w", encoding="utf-8") as file:
            file.writelines(line + "\n" for line in lines)
        return path

    def test_empty_translations_are_a_warning(self):
        # A model that outputs only empty lines printed BLEU 0.00, no hint.
        src = self.write_lines("three.en", ["Hello.", "", "Good day."])
        ref = self.write_lines("three.de", ["Hallo.", "", "Guten Tag."])
        args = [
            f"--model={self.tempdir()}",
            f"--src={src}",
            f"--ref={ref}",
            "--tgt_lang=de",
        ]
        status, stdout, stderr = run_with_translations(["", "", " "], *args)
        self.assertEqual(status, 0, stderr)
        # The blank source's empty translation is no symptom.
        self.assertIn(
            "evaluate: warning: 2 of 3 translations are empty where the "
            "source is not; the model may be undertrained or the vocabulary "
            "may not match it\n",
            stderr,
        )
        self.assertEqual(stdout.count("\n"), 1)
        self.assertEqual(json.loads(stdout)["bleu"], 0.0)
        status, _, stderr = run_with_translations(["Hallo.", "", "Tag."], *args)
        self.assertEqual(status, 0, stderr)
        self.assertNotIn("warning", stderr)

    def test_empty_references_are_a_warning(self):
        # Usually misaligned files; they were scored silently.
        src = self.write_lines("five.en", ["Hello.", "", "Yes.", "No.", "Hi."])
        ref = self.write_lines("five.de", ["Hallo.", "", "", "", "Hallo."])
        status, stdout, stderr = run_with_translations(
            ["Hallo.", "", "Ja.", "Nein.", "Hallo."],
            f"--model={self.tempdir()}",
            f"--src={src}",
            f"--ref={ref}",
        )
        self.assertEqual(status, 0, stderr)
        self.assertIn(
            "evaluate: warning: 2 of 5 references are empty where the source "
            "is not, the first on line 3; the sources and references may be "
            "misaligned\n",
            stderr,
        )
        self.assertNotIn("translations are empty", stderr)
        self.assertEqual(json.loads(stdout)["num_sentences"], 5)

    def test_pairs_left_out_of_the_perplexity_are_a_warning(self):
        translator = fake_translator(["Hallo."])
        stats = mock.Mock(num_examples=2, num_pairs=3)
        stats.describe.return_value = "3 pairs read, 2 kept"
        translator.perplexity.return_value = evaluation.Perplexity(
            perplexity=5.0, num_tokens=7, stats=stats
        )
        args = [f"--model={self.model_dir}", f"--src={self.src}"]
        args.append(f"--ref={self.ref}")
        with mock.patch(
            f"{INFERENCE}.load_translator", return_value=translator
        ):
            result = run_main(evaluate, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(
            "evaluate: warning: perplexity over 2 of 3 pairs (the others "
            "cannot be scored): 3 pairs read, 2 kept\n",
            result.stderr,
        )
        scores = json.loads(result.stdout)
        self.assertEqual(
            (scores["perplexity"], scores["perplexity_sentences"]), (5.0, 2)
        )
        # None of them: a warning and no perplexity, the scores still.
        translator.perplexity.side_effect = ValueError("No pair can be scored")
        with mock.patch(
            f"{INFERENCE}.load_translator", return_value=translator
        ):
            result = run_main(evaluate, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(
            "evaluate: warning: No pair can be scored\n", result.stderr
        )
        self.assertIn(", perplexity n/a\n", result.stderr)
        self.assertIsNone(json.loads(result.stdout)["perplexity"])

    def test_regional_target_language_is_scored_and_printed_as_its_language(
        self,
    ):
        # --tgt_lang=zh-TW got 13a and a tokenized BLEU of whole sentences.
        ref = self.write_lines("test.zh", ["我们今天去公园散步。"])
        status, stdout, stderr = run_with_translations(
            ["我们今天去公园跑步。"],
            f"--model={self.tempdir()}",
            f"--src={self.src}",
            f"--ref={ref}",
            "--tgt_lang=zh-TW",
        )
        self.assertEqual(status, 0, stderr)
        scores = json.loads(stdout)
        self.assertIn("tok:zh", scores["signature"])
        self.assertGreater(scores["bleu"], 50.0)
        self.assertIsNone(scores["tokenized_bleu"])
        self.assertIn("tok:zh", stderr)
        self.assertIn("tokenized BLEU n/a (no spaces between words)", stderr)

    def test_flags_reach_the_threads_the_loader_and_the_batches(self):
        model = self.tempdir()  # No languages: those of the flags.
        flag_values, argv = parse_flags(
            evaluate,
            f"--model={model}",
            f"--src={self.src}",
            f"--ref={self.ref}",
            "--src_lang=en",
            "--tgt_lang=de",
            "--vocab=v.model",
            "--batch_size=3",
            "--intra_op_threads=5",
            "--beam_size=2",
            "--alpha=1.0",
        )
        translator = fake_translator(["Hallo."])
        with (
            mock.patch(f"{INFERENCE}.set_decoding_threads") as threads,
            mock.patch(
                f"{INFERENCE}.load_translator", return_value=translator
            ) as load,
            contextlib.redirect_stdout(io.StringIO()) as stdout,
            contextlib.redirect_stderr(io.StringIO()),
        ):
            self.assertEqual(evaluate.main(argv, flag_values), 0)
        threads.assert_called_once_with(model, 5)
        load.assert_called_once_with(model, "v.model", beam_size=2, alpha=1.0)
        self.assertEqual(
            translator.translate.call_args.args[:2], (["Hello."], 3)
        )
        scores = json.loads(stdout.getvalue())
        self.assertEqual(scores["chrf"], 100.0)
        self.assertIsNone(scores["perplexity"])
        self.assertIsNone(scores["perplexity_sentences"])

    def test_output_must_not_be_a_log_of_the_training_run(self):
        logs = os.path.join(self.model_dir, "logs", "train")
        os.makedirs(logs)
        events = os.path.join(logs, "events.out.tfevents.1")
        open(events, "w").close()
        self.assert_one_line_error(
            [
                f"--model={self.model_dir}",
                f"--src={self.src}",
                f"--ref={self.ref}",
                f"--output={events}",
            ],
            "`--output` must not be an input file: writing it would "
            "overwrite the training run; choose another path. "
            f"Received: output={events}, model={events}",
        )
