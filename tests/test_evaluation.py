import sacrebleu

from keras_transformer import evaluation
from tests.test_case import TestCase

REFERENCES = [
    "Der Mann sieht den großen Hund.",
    "Am dritten Mai liest die Frau ein Buch.",
    "Ich weiß, dass das Kind ein rotes Auto kaufen will.",
]


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
            ],
        )

    def test_paper_tokenization_splits_compounds_and_punctuation(self):
        self.assertEqual(
            evaluation.paper_tokenize("Die Nord-Süd-Achse, sagte er."),
            "Die Nord ##AT##-##AT## Süd ##AT##-##AT## Achse , sagte er .",
        )

    def test_length_mismatch_and_empty_input_are_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "2 hypotheses and 3 ref"):
            evaluation.score(REFERENCES[:2], REFERENCES)
        with self.assertRaisesRegex(ValueError, "empty"):
            evaluation.score([], [])
