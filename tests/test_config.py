import dataclasses

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

    def test_every_table3_row_is_a_preset(self):
        for row, fields in config_lib.TABLE3_ROWS.items():
            config = TransformerConfig.preset(row)
            for name, value in fields.items():
                self.assertEqual(getattr(config, name), value)

    def test_overrides_and_frozen(self):
        config = TransformerConfig.preset("base", vocab_size=1000)
        self.assertEqual(config.vocab_size, 1000)
        with self.assertRaises(dataclasses.FrozenInstanceError):
            config.d_model = 4
        self.assertEqual(config.replace(dropout=0.2).dropout, 0.2)
        self.assertEqual(TransformerConfig.from_dict(config.to_dict()), config)

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
        config = TransformerConfig.preset("base", d_model=500, key_dim=64, value_dim=32)
        self.assertEqual((config.head_key_dim, config.head_value_dim), (64, 32))
