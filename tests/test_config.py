import dataclasses
import json
import re
import warnings

import numpy as np
from absl.testing import parameterized

from keras_transformer import TransformerConfig
from keras_transformer import config as config_lib
from tests.test_case import TestCase


class TransformerConfigTest(TestCase):
    def test_base_and_big_match_the_paper(self):
        base = TransformerConfig.preset("base")
        self.assertEqual(
            (base.num_layers, base.d_model, base.d_ff, base.num_heads),
            (6, 512, 2048, 8),
        )
        self.assertEqual((base.head_key_dim, base.head_value_dim), (64, 64))
        self.assertEqual((base.dropout, base.label_smoothing), (0.1, 0.1))
        big = TransformerConfig.preset("big")
        self.assertEqual(
            (big.num_layers, big.d_model, big.d_ff, big.num_heads, big.dropout),
            (6, 1024, 4096, 16, 0.3),
        )

    def test_presets_are_the_papers_rows(self):
        # Tables 3 and 4 of the paper, written out: N, d_model, d_ff, h,
        # d_k, d_v, P_drop, eps_ls, positional encoding.
        sinusoid, learned = "sinusoidal", "learned"
        rows = {
            "base": (6, 512, 2048, 8, 64, 64, 0.1, 0.1, sinusoid),
            "big": (6, 1024, 4096, 16, 64, 64, 0.3, 0.1, sinusoid),
            "A1": (6, 512, 2048, 1, 512, 512, 0.1, 0.1, sinusoid),
            "A2": (6, 512, 2048, 4, 128, 128, 0.1, 0.1, sinusoid),
            "A3": (6, 512, 2048, 16, 32, 32, 0.1, 0.1, sinusoid),
            "A4": (6, 512, 2048, 32, 16, 16, 0.1, 0.1, sinusoid),
            "B1": (6, 512, 2048, 8, 16, 64, 0.1, 0.1, sinusoid),
            "B2": (6, 512, 2048, 8, 32, 64, 0.1, 0.1, sinusoid),
            "C1": (2, 512, 2048, 8, 64, 64, 0.1, 0.1, sinusoid),
            "C2": (4, 512, 2048, 8, 64, 64, 0.1, 0.1, sinusoid),
            "C3": (8, 512, 2048, 8, 64, 64, 0.1, 0.1, sinusoid),
            "C4": (6, 256, 2048, 8, 32, 32, 0.1, 0.1, sinusoid),
            "C5": (6, 1024, 2048, 8, 128, 128, 0.1, 0.1, sinusoid),
            "C6": (6, 512, 1024, 8, 64, 64, 0.1, 0.1, sinusoid),
            "C7": (6, 512, 4096, 8, 64, 64, 0.1, 0.1, sinusoid),
            "D1": (6, 512, 2048, 8, 64, 64, 0.0, 0.1, sinusoid),
            "D2": (6, 512, 2048, 8, 64, 64, 0.2, 0.1, sinusoid),
            "D3": (6, 512, 2048, 8, 64, 64, 0.1, 0.0, sinusoid),
            "D4": (6, 512, 2048, 8, 64, 64, 0.1, 0.2, sinusoid),
            "E": (6, 512, 2048, 8, 64, 64, 0.1, 0.1, learned),
        }
        self.assertEqual(
            set(config_lib.TABLE3_ROWS) | {"base", "big"}, set(rows)
        )
        for row, expected in rows.items():
            c = TransformerConfig.preset(row)
            got = (c.num_layers, c.d_model, c.d_ff, c.num_heads, c.head_key_dim)
            got += (
                c.head_value_dim,
                c.dropout,
                c.label_smoothing,
                c.positional,
            )
            self.assertEqual(got, expected, row)

    def test_overrides_and_frozen(self):
        config = TransformerConfig.preset("base", vocab_size=1000)
        self.assertEqual(config.vocab_size, 1000)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            config.d_model = 4
        self.assertEqual(config.replace(dropout=0.2).dropout, 0.2)
        self.assertEqual(TransformerConfig.from_dict(config.to_dict()), config)

    def test_attention_bias_defaults_to_the_papers_none(self):
        # Section 3.2.2: Q W^Q, K W^K, V W^V and Concat(...) W^O, no biases.
        for config in (
            TransformerConfig(),
            TransformerConfig.preset("base"),
            TransformerConfig.preset("tiny"),
            TransformerConfig.preset("big"),
        ):
            self.assertIs(config.attention_bias, False)
        for value in (False, True):
            config = TransformerConfig.preset("tiny", attention_bias=value)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # The field is there.
                self.assertEqual(
                    TransformerConfig.from_dict(config.to_dict()), config
                )

    def test_a_dict_saved_without_attention_bias_had_the_biases(self):
        # Models saved before the field existed have attention biases.
        values = TransformerConfig.preset("tiny").to_dict()
        del values["attention_bias"]
        # With a warning: a hand-written dict got the biases silently.
        with self.assertWarnsRegex(
            UserWarning,
            "The Transformer config has no attention_bias: taking "
            "attention_bias=True, .*attention_bias=False",
        ):
            config = TransformerConfig.from_dict(values)
        self.assertIs(config.attention_bias, True)

    def test_unknown_field_and_preset_are_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "Received: d_modle=3"):
            TransformerConfig.preset("base", d_modle=3)
        with self.assertRaisesRegex(ValueError, "Received: name='huge'"):
            TransformerConfig.preset("huge")
        with self.assertRaisesRegex(ValueError, "Received: layers=2"):
            TransformerConfig.preset("tiny").replace(layers=2)

    def test_validation_messages(self):
        cases = [
            (dict(d_model=500, num_heads=8), "d_model=500, num_heads=8"),
            (dict(num_heads=0), "num_heads=0"),
            (dict(dropout=1.0), "dropout=1.0"),
            (dict(positional="rotary"), "positional='rotary'"),
            (dict(share_embeddings="some"), "share_embeddings='some'"),
            (dict(norm_position="mid"), "norm_position='mid'"),
            (dict(source_vocab_size=5), "source_vocab_size=5"),
            (dict(vocab_size=2.5), "vocab_size=2.5"),
        ]
        for overrides, message in cases:
            with self.assertRaisesRegex(ValueError, message):
                TransformerConfig.preset("base", **overrides)

    def test_explicit_head_dims_allow_indivisible_width(self):
        config = TransformerConfig.preset(
            "base", d_model=500, key_dim=64, value_dim=32
        )
        self.assertEqual((config.head_key_dim, config.head_value_dim), (64, 32))
        # Both: d_v would be d_model // h = 62 here, silently.
        for unset in ("key_dim", "value_dim"):
            dims = {"key_dim": 64, "value_dim": 64, unset: None}
            with self.assertRaisesRegex(ValueError, "divisible by `num_heads`"):
                TransformerConfig.preset("base", d_model=500, **dims)

    @parameterized.parameters(1, 7, 511)
    def test_odd_d_model_needs_learned_positions(self, d_model):
        # An odd width used to pass here and fail at the model's first call.
        message = (
            "Sinusoidal positional encodings interleave sine and cosine pairs "
            "(section 3.5), so `d_model` must be even: use an even d_model or "
            "positional='learned'. "
            f"Received: d_model={d_model}, positional='sinusoidal'"
        )
        with self.assertRaisesRegex(ValueError, re.escape(message)):
            TransformerConfig.preset("tiny", d_model=d_model, num_heads=1)
        config = TransformerConfig.preset(
            "tiny", d_model=d_model, num_heads=1, positional="learned"
        )
        self.assertEqual(config.d_model, d_model)

    @parameterized.named_parameters(
        ("vocab_size_4", dict(vocab_size=4), "vocab_size=4"),
        ("vocab_size_1", dict(vocab_size=1), "vocab_size=1"),
        (
            "source_vocab_size_4",
            dict(share_embeddings="none", source_vocab_size=4),
            "source_vocab_size=4",
        ),
    )
    def test_vocabulary_needs_the_special_ids_and_one_more(
        self, overrides, received
    ):
        name = received.split("=")[0]
        message = (
            f"`{name}` must be an integer >= 5 (ids 0-3 are the special tokens "
            "<pad>, <unk>, <s>, </s>, and a vocabulary needs at least one "
            f"more). Received: {received}"
        )
        with self.assertRaisesRegex(ValueError, re.escape(message)):
            TransformerConfig.preset("tiny", **overrides)
        smallest = {
            key: 5 if key == name else v for key, v in overrides.items()
        }
        config = TransformerConfig.preset("tiny", **smallest)
        self.assertEqual(getattr(config, name), 5)

    @parameterized.named_parameters(
        ("str_int", "d_model", "512", "a positive integer", "'512' (str)"),
        ("bool_int", "d_model", True, "a positive integer", "True (bool)"),
        ("float_int", "num_layers", 2.0, "a positive integer", "2.0 (float)"),
        ("str_optional_int", "key_dim", "8", "a positive integer", "'8' (str)"),
        (
            "none_int",
            "num_heads",
            None,
            "a positive integer",
            "None (NoneType)",
        ),
        ("str_rate", "dropout", "0.1", "a number in [0, 1)", "'0.1' (str)"),
        (
            "bool_rate",
            "label_smoothing",
            False,
            "a number in [0, 1)",
            "False (bool)",
        ),
        (
            "list_rate",
            "attention_dropout",
            [0.1],
            "a number in [0, 1)",
            "[0.1] (list)",
        ),
        (
            "str_epsilon",
            "layer_norm_epsilon",
            "1e-6",
            "a positive finite number",
            "'1e-6' (str)",
        ),
        ("int_bool", "attention_bias", 1, "True or False", "1 (int)"),
        (
            "str_bool",
            "attention_bias",
            "false",
            "True or False",
            "'false' (str)",
        ),
        (
            "none_bool",
            "attention_bias",
            None,
            "True or False",
            "None (NoneType)",
        ),
    )
    def test_wrong_types_are_clear_errors(
        self, name, value, expected, received
    ):
        # Strings used to raise a bare TypeError from a comparison.
        message = f"`{name}` must be {expected}. Received: {name}={received}"
        with self.assertRaisesRegex(ValueError, re.escape(message)):
            TransformerConfig.preset("tiny", **{name: value})

    def test_range_errors_keep_the_received_value(self):
        cases = [
            ("dropout", 1.0, "a number in [0, 1)"),
            ("attention_dropout", -0.1, "a number in [0, 1)"),
            ("layer_norm_epsilon", 0, "a positive finite number"),
            # The layers rejected it only when built.
            ("layer_norm_epsilon", float("inf"), "a positive finite number"),
            (
                "max_length",
                1,
                "an integer >= 2 (a sentence holds a token and EOS, a target "
                "BOS and a token)",
            ),
        ]
        for name, value, expected in cases:
            message = f"`{name}` must be {expected}. Received: {name}={value}"
            with self.assertRaisesRegex(ValueError, re.escape(message) + "$"):
                TransformerConfig.preset("tiny", **{name: value})

    def test_numpy_and_whole_numbers_are_stored_as_python_numbers(self):
        config = TransformerConfig.preset(
            "tiny",
            d_model=np.int64(64),
            key_dim=np.int32(16),
            dropout=0,
            label_smoothing=np.float32(0.25),
            layer_norm_epsilon=1,
        )
        self.assertEqual((config.d_model, config.key_dim), (64, 16))
        self.assertEqual(
            (config.dropout, config.layer_norm_epsilon), (0.0, 1.0)
        )
        for name in ("d_model", "key_dim"):
            self.assertIs(type(getattr(config, name)), int)
        for name in ("dropout", "label_smoothing", "layer_norm_epsilon"):
            self.assertIs(type(getattr(config, name)), float)
        # JSON spells a whole float as an int ("dropout": 0): still accepted.
        text = json.dumps(config.to_dict()).replace(
            '"dropout": 0.0', '"dropout": 0'
        )
        self.assertIn('"dropout": 0,', text)
        self.assertEqual(TransformerConfig.from_dict(json.loads(text)), config)
