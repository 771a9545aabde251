"""Tests of the attention maps and their pictures."""

import os

import numpy as np

from keras_transformer.decoding.translator import Translator
from keras_transformer.visualization import attention
from tests.data import fixtures
from tests.decoding.test_translator import tiny_model
from tests.test_case import TestCase

SENTENCE = fixtures.PAIRS[0][0]


class AttentionMapsTest(TestCase):
    def setUp(self):
        super().setUp()
        self.model = tiny_model()
        self.tokenizer = fixtures.tokenizer()
        self.maps = attention.attention_maps(
            self.model, self.tokenizer, SENTENCE, target_ids=[10, 11, 12, 3]
        )

    def test_maps_are_attention_distributions(self):
        maps = self.maps
        num_source, num_target = len(maps.source), len(maps.target)
        self.assertEqual(maps.source[-1], "</s>")
        self.assertEqual(maps.target_input[0], "<s>")
        self.assertLen(maps.encoder, self.model.config.num_layers)
        heads = self.model.config.num_heads
        self.assertEqual(maps.encoder[0].shape, (heads, num_source, num_source))
        self.assertEqual(maps.decoder[0].shape, (heads, num_target, num_target))
        self.assertEqual(maps.cross[0].shape, (heads, num_target, num_source))
        for weights in maps.encoder + maps.decoder + maps.cross:
            self.assertAllClose(weights.sum(-1), np.ones(weights.shape[:-1]))
        for weights in maps.decoder:
            # Causal: no position attends to a later one.
            self.assertAllEqual(np.triu(weights, k=1), np.zeros_like(weights))

    def test_default_target_is_the_model_translation(self):
        maps = attention.attention_maps(self.model, self.tokenizer, SENTENCE)
        pieces = self.tokenizer.tokenize([SENTENCE])[0].numpy().tolist()
        translator = Translator(self.model, self.tokenizer)
        result = translator.translate_ids(np.array([pieces + [3]], np.int32))
        length = int(result["lengths"][0])
        self.assertEqual(
            maps.target,
            self.tokenizer.id_to_piece(result["output_ids"][0, :length]),
        )
        self.assertEqual(maps.target_input[1:], maps.target[:-1])

    def test_plots_show_the_weights_with_the_tokens(self):
        folder = fixtures.tempdir(self)
        for kind in attention.KINDS:
            path = os.path.join(folder, f"{kind}.png")
            figure = attention.plot_heads(self.maps, kind, -1, path)
            self.assertTrue(os.path.getsize(path) > 0)
            weights = getattr(self.maps, kind)[-1]
            axis = figure.axes[1]
            self.assertAllClose(axis.images[0].get_array(), weights[1])
            labels = [t.get_text() for t in axis.get_yticklabels()]
            rows = self.maps.target if kind != "encoder" else self.maps.source
            self.assertEqual(labels, rows)

    def test_bad_kind_and_layer_are_named(self):
        with self.assertRaisesRegex(ValueError, "Received: kind='x'"):
            attention.plot_heads(self.maps, "x", 0, os.devnull)
        with self.assertRaisesRegex(ValueError, "Received: layer=5"):
            attention.plot_heads(self.maps, "cross", 5, os.devnull)
