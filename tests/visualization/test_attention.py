"""Tests of the attention maps, their pictures and the plot_attention
command."""

import contextlib
import io
import os
import re
import sys
from unittest import mock

import numpy as np
from absl import flags

from keras_transformer import build_transformer, plot_attention
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
        sentence = "The cat."  # 8 tokens: within the model's 11.
        maps = attention.attention_maps(self.model, self.tokenizer, sentence)
        pieces = self.tokenizer.tokenize([sentence])[0].numpy().tolist()
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

    def test_file_names_and_titles_number_layers_from_one(self):
        config = self.model.config.replace(num_layers=2)
        maps = attention.attention_maps(
            build_transformer(config), self.tokenizer, SENTENCE, [10, 11, 3]
        )
        folder = fixtures.tempdir(self)
        # Each layer's plots take seconds: one positive and one negative.
        for layer, number in ((2, 2), (-2, 1)):
            paths = attention.save_layer_plots(maps, layer, folder)
            self.assertEqual(
                [os.path.basename(path) for path in paths],
                [f"{kind}_layer{number}.png" for kind in attention.KINDS],
            )
            self.assertTrue(all(os.path.getsize(path) > 0 for path in paths))
            # The file's number is the title's and that of the drawn layer.
            figure = attention.plot_heads(
                maps, "encoder", layer, os.path.join(folder, "check.png")
            )
            self.assertEqual(
                figure.get_suptitle(),
                f"Encoder self-attention, layer {number}",
            )
            self.assertAllClose(
                figure.axes[0].images[0].get_array(),
                maps.encoder[number - 1][0],
            )

    def test_bad_kind_and_layer_are_named(self):
        with self.assertRaisesRegex(ValueError, "Received: kind='x'"):
            attention.plot_heads(self.maps, "x", 1, os.devnull)
        for layer in (0, 2, -2):
            with self.assertRaisesRegex(
                ValueError,
                re.escape(
                    "numbered from 1; `layer` must be in [1, 1], or in "
                    f"[-1, -1] to count from the top. Received: layer={layer}"
                ),
            ):
                attention.plot_heads(self.maps, "cross", layer, os.devnull)
        folder = os.path.join(fixtures.tempdir(self), "plots")
        with self.assertRaisesRegex(ValueError, "Received: layer=0"):
            attention.save_layer_plots(self.maps, 0, folder)
        self.assertFalse(os.path.exists(folder))  # nothing written
        fixtures.write(folder, "not a folder")
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "names an existing file, not a directory; pass a directory "
                f"(it is created if missing). Received: output_dir={folder}"
            ),
        ):
            attention.save_layer_plots(self.maps, 1, folder)

    def test_empty_and_overlong_sentences_are_refused(self):
        # Nothing to translate, or more tokens than the model has positions
        # for (the translation would come from a truncated source).
        # (SENTENCE itself is longer than this model translates: the other
        # tests pass its target.)
        for sentence in ("", " \u00a0 ", SENTENCE):
            with self.assertRaisesRegex(
                ValueError,
                r"plotting needs 1 to 11 \(the model's max_length - 1\)",
            ):
                attention.attention_maps(self.model, self.tokenizer, sentence)

    def test_overlong_target_of_learned_positions_is_refused(self):
        config = self.model.config.replace(positional="learned")
        model = build_transformer(config)
        target_ids = [10] * config.max_length + [3]
        with self.assertRaisesRegex(
            ValueError,
            re.escape(
                "`target_ids` must have at most "
                f"max_length={config.max_length} tokens, where the model's "
                "learned positions stop; pass a shorter translation. Received: "
                f"len(target_ids)={len(target_ids)}"
            ),
        ):
            attention.attention_maps(
                model, self.tokenizer, "The cat.", target_ids
            )
        # Sinusoids go on: the same target is plotted.
        maps = attention.attention_maps(
            self.model, self.tokenizer, "The cat.", target_ids
        )
        self.assertLen(maps.target, len(target_ids))


class PlotAttentionCommandTest(TestCase):
    def run_command(self, *args):
        """`plot_attention` with flags `args`: (status, stderr)."""
        stderr = io.StringIO()
        flag_values = flags.FlagValues()
        plot_attention.define_flags(flag_values)
        flag_values(["plot_attention", *args])
        with contextlib.redirect_stderr(stderr):
            status = plot_attention.main(["plot_attention"], flag_values)
        return status, stderr.getvalue()

    def test_without_matplotlib_names_the_extra_before_loading_the_model(
        self,
    ):
        # An optional dependency; the model path does not exist, and is
        # not the error.
        with mock.patch.dict(sys.modules, {"matplotlib": None}):
            status, stderr = self.run_command(
                "--model=/nonexistent/model.keras", "--sentence=Hello ."
            )
        self.assertEqual(status, 1)
        self.assertEqual(
            stderr,
            "plot_attention: error: Attention plots need matplotlib, an "
            "optional dependency of keras-transformer-nmt: pip install "
            "'keras-transformer-nmt[plot]' (or pip install matplotlib).\n",
        )

    def test_a_saved_model_is_named_not_a_missing_model_keras(self):
        # It used to say "No model file at ... /1/model.keras".
        folder = fixtures.tempdir(self)
        version = os.path.join(folder, "transformer", "1")
        os.makedirs(version)
        fixtures.write(os.path.join(version, "saved_model.pb"), b"")
        for model in (os.path.join(folder, "transformer"), version):
            status, stderr = self.run_command(
                f"--model={model}", "--sentence=Hello ."
            )
            self.assertEqual(status, 1)
            self.assertRegex(
                stderr,
                "^plot_attention: error: plot_attention reads the Keras model.*"
                f"a SavedModel export.*Received: model={re.escape(model)}\n$",
            )
