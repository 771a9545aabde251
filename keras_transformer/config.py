"""Frozen model configs: the paper's base and big models, Table 3 rows, tiny."""

import dataclasses
import math
import warnings

from keras_transformer import tokens
from keras_transformer.checks import is_integer, is_real

POSITIONAL_CHOICES = ("sinusoidal", "learned")
SHARING_CHOICES = ("all", "target", "none")
NORM_CHOICES = ("post", "pre")

# The special ids plus at least one token to translate.
_MIN_VOCAB_SIZE = tokens.NUM_SPECIAL_TOKENS + 1
_VOCAB_REASON = (
    f" (ids 0-{tokens.NUM_SPECIAL_TOKENS - 1} are the special tokens "
    f"{tokens.PAD_PIECE}, {tokens.UNK_PIECE}, {tokens.BOS_PIECE}, "
    f"{tokens.EOS_PIECE}, and a vocabulary needs at least one more)"
)
OPTIONAL_FIELDS = ("key_dim", "value_dim", "source_vocab_size")
# Fields added after configs were first saved, with the value that a saved
# config (or run settings) without them means: the behaviour before.
LEGACY_VALUES = {"attention_bias": True}


def with_legacy_values(values: dict, what: str) -> dict:
    """`values` with each `LEGACY_VALUES` field it lacks, and a warning
    naming them: a config written by hand that leaves out `attention_bias`
    would silently get the biases that the paper's model does not have.

    Args:
        values: a saved config (of a model or a layer).
        what: what it is the config of, for the warning.
    """
    missing = {
        name: value
        for name, value in LEGACY_VALUES.items()
        if name not in values
    }
    if missing:
        settings = ", ".join(f"{k}={v}" for k, v in missing.items())
        warnings.warn(
            f"The {what} config has no {', '.join(missing)}: taking "
            f"{settings}, as configs saved before the field existed meant. "
            "Give the field to choose (the paper's attention has no biases: "
            "attention_bias=False); re-save a model to record it.",
            stacklevel=3,
        )
    return {**missing, **values}


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Hyper-parameters of the Transformer (Vaswani et al., 2017).

    Field names follow the paper's symbols (Table 3).

    Args:
        vocab_size: V, the target vocabulary size (and the shared one when
            `share_embeddings="all"`).
        num_layers: N, layers in the encoder stack and in the decoder stack.
        d_model: width of every sublayer output and of the embeddings.
        d_ff: inner width of the position-wise feed-forward network.
        num_heads: h, the number of attention heads.
        key_dim: d_k, the query/key width per head. Defaults to
            `d_model // num_heads`.
        value_dim: d_v, the value width per head. Defaults to
            `d_model // num_heads`.
        dropout: P_drop, applied to every sublayer output before the residual
            sum and to the sums of embeddings and positional encodings.
        attention_dropout: dropout on the attention weights (not in the
            paper, which is why it defaults to 0).
        label_smoothing: eps_ls of the training loss (section 5.4).
        positional: "sinusoidal" (section 3.5) or "learned" (Table 3 row E).
        max_length: longest sequence the learned position table holds, and
            the longest input the exported model accepts.
        share_embeddings: "all" ties the source embedding, the target
            embedding and the pre-softmax projection (section 3.4); "target"
            ties only the target embedding and the projection (separate
            source vocabulary); "none" uses three separate matrices.
        source_vocab_size: source vocabulary size when it differs from
            `vocab_size` (only with `share_embeddings` "target" or "none").
        norm_position: "post" is the paper's `LayerNorm(x + Sublayer(x))`;
            "pre" normalises the sublayer input and adds a final LayerNorm.
        layer_norm_epsilon: epsilon of every LayerNormalization.
        attention_bias: whether the attention projections W^Q, W^K, W^V and
            W^O have biases. The paper's have none (section 3.2.2, as in
            tensor2tensor); Keras's `MultiHeadAttention` has them. Models
            saved before this field existed had them (see `from_dict`).

    Raises:
        ValueError: for a field of the wrong type (bools are not numbers
            here, and only bools are `attention_bias`) or out of range, a
            vocabulary without room for a token beyond the 4 special ids, or
            an odd `d_model` with sinusoidal positions.
    """

    vocab_size: int = 37000
    num_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8
    key_dim: int | None = None
    value_dim: int | None = None
    dropout: float = 0.1
    attention_dropout: float = 0.0
    label_smoothing: float = 0.1
    positional: str = "sinusoidal"
    max_length: int = 256
    share_embeddings: str = "all"
    source_vocab_size: int | None = None
    norm_position: str = "post"
    layer_norm_epsilon: float = 1e-6
    attention_bias: bool = False

    def __post_init__(self):
        for name in ("vocab_size", "source_vocab_size"):
            self._check_int(name, _MIN_VOCAB_SIZE, _VOCAB_REASON)
        for name in (
            "num_layers",
            "d_model",
            "d_ff",
            "num_heads",
            "key_dim",
            "value_dim",
        ):
            self._check_int(name)
        self._check_int(
            "max_length",
            minimum=2,
            reason=(
                " (a sentence holds a token and EOS, a target BOS and a token)"
            ),
        )
        if (self.key_dim is None or self.value_dim is None) and (
            self.d_model % self.num_heads
        ):
            raise ValueError(
                "`d_model` must be divisible by `num_heads` when `key_dim` "
                "or `value_dim` is unset (they default to d_model / h). Set "
                "them explicitly or change num_heads. "
                f"Received: d_model={self.d_model}, "
                f"num_heads={self.num_heads}"
            )
        for name in ("dropout", "attention_dropout", "label_smoothing"):
            self._check_float(name, "a number in [0, 1)", lambda x: 0 <= x < 1)
        _check_choice("positional", self.positional, POSITIONAL_CHOICES)
        _check_choice(
            "share_embeddings", self.share_embeddings, SHARING_CHOICES
        )
        _check_choice("norm_position", self.norm_position, NORM_CHOICES)
        if self.positional == "sinusoidal" and self.d_model % 2:
            # Section 3.5: dimensions 2i and 2i + 1 are a sine/cosine pair.
            raise ValueError(
                "Sinusoidal positional encodings interleave sine and cosine "
                "pairs (section 3.5), so `d_model` must be even: use an even "
                "d_model or positional='learned'. "
                f"Received: d_model={self.d_model}, "
                f"positional={self.positional!r}"
            )
        if self.share_embeddings == "all" and self.source_vocab_size not in (
            None,
            self.vocab_size,
        ):
            raise ValueError(
                "With share_embeddings='all' the source and target share one "
                "vocabulary, so `source_vocab_size` must be unset or equal "
                "to `vocab_size`; use share_embeddings='target' or 'none' "
                "for separate vocabularies. "
                f"Received: source_vocab_size={self.source_vocab_size}, "
                f"vocab_size={self.vocab_size}"
            )
        self._check_float(
            "layer_norm_epsilon",
            "a positive finite number",
            lambda x: 0 < x < math.inf,
        )
        self._check_bool("attention_bias")

    def _check_int(self, name, minimum=1, reason=""):
        """Checks an int field (None is allowed for the optional ones)."""
        if name in OPTIONAL_FIELDS and getattr(self, name) is None:
            return
        expected = (
            "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        )
        self._set_number(
            name, int, expected + reason, lambda value: value >= minimum
        )

    def _check_float(self, name, expected, is_valid):
        """Checks a float field; whole numbers (JSON's `0`) are accepted."""
        self._set_number(name, float, expected, is_valid)

    def _check_bool(self, name):
        """Checks a bool field: 0, 1 or "false" are not read as bools."""
        value = getattr(self, name)
        if not isinstance(value, bool):
            raise ValueError(
                f"`{name}` must be True or False. "
                f"Received: {name}={value!r} ({type(value).__name__})"
            )

    def _set_number(self, name, kind, expected, is_valid):
        """Raises unless field `name` is a valid `kind`; stores it as one.

        bool is an int subclass but never a size or a rate, so it is
        rejected. numpy scalars pass and are stored as Python numbers, so
        `to_dict` stays JSON-serializable.
        """
        value = getattr(self, name)
        is_kind = is_integer if kind is int else is_real
        wrong_type = not is_kind(value)
        if wrong_type or not is_valid(value):
            received = f"{name}={value!r}"
            if wrong_type:
                received += f" ({type(value).__name__})"
            raise ValueError(
                f"`{name}` must be {expected}. Received: {received}"
            )
        # The dataclass is frozen; __post_init__ may still normalise.
        object.__setattr__(self, name, kind(value))

    @property
    def head_key_dim(self) -> int:
        """d_k: `key_dim`, or d_model / h when unset."""
        return self.key_dim or self.d_model // self.num_heads

    @property
    def head_value_dim(self) -> int:
        """d_v: `value_dim`, or d_model / h when unset."""
        return self.value_dim or self.d_model // self.num_heads

    @property
    def input_vocab_size(self) -> int:
        """Size of the source vocabulary."""
        return self.source_vocab_size or self.vocab_size

    def replace(self, **overrides) -> "TransformerConfig":
        """Returns a copy with `overrides` applied (unknown names raise)."""
        _check_fields(overrides)
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TransformerConfig":
        """The config of `to_dict()`'s `values` (e.g. a saved model's).

        A field of `LEGACY_VALUES` that `values` lacks was written before
        the field existed, and takes the value it had then (a model saved
        without `attention_bias` has attention biases), with a warning
        (`with_legacy_values`).
        """
        _check_fields(values)
        return cls(**with_legacy_values(values, "Transformer"))

    @classmethod
    def preset(cls, name: str, **overrides) -> "TransformerConfig":
        """A named preset ("tiny", "base", "big" or a Table 3 row) + overrides.

        Args:
            name: one of `PRESETS`: "tiny", "base", "big", or a Table 3 row
                "A1".."A4", "B1", "B2", "C1".."C7", "D1".."D4", "E".
            **overrides: any config field, e.g. `vocab_size=8000`.

        Raises:
            ValueError: for an unknown preset or field name.
        """
        if name not in PRESETS:
            raise ValueError(
                f"Unknown preset. Choose one of {sorted(PRESETS)}. "
                f"Received: name={name!r}"
            )
        _check_fields(overrides)
        return cls(**{**PRESETS[name], **overrides})


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {choices}. Received: {name}={value!r}"
        )


def _check_fields(values):
    known = {f.name for f in dataclasses.fields(TransformerConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(
            f"Unknown TransformerConfig field(s) {unknown}. Known fields: "
            f"{sorted(known)}. Received: {unknown[0]}={values[unknown[0]]!r}"
        )


_BASE = dict(
    num_layers=6,
    d_model=512,
    d_ff=2048,
    num_heads=8,
    dropout=0.1,
    label_smoothing=0.1,
)

# Table 3 of the paper: each row changes the base model in the fields given.
# Unlisted fields are identical to the base model.
TABLE3_ROWS = {
    "A1": dict(num_heads=1, key_dim=512, value_dim=512),
    "A2": dict(num_heads=4, key_dim=128, value_dim=128),
    "A3": dict(num_heads=16, key_dim=32, value_dim=32),
    "A4": dict(num_heads=32, key_dim=16, value_dim=16),
    "B1": dict(key_dim=16),
    "B2": dict(key_dim=32),
    "C1": dict(num_layers=2),
    "C2": dict(num_layers=4),
    "C3": dict(num_layers=8),
    "C4": dict(d_model=256, key_dim=32, value_dim=32),
    "C5": dict(d_model=1024, key_dim=128, value_dim=128),
    "C6": dict(d_ff=1024),
    "C7": dict(d_ff=4096),
    "D1": dict(dropout=0.0),
    "D2": dict(dropout=0.2),
    "D3": dict(label_smoothing=0.0),
    "D4": dict(label_smoothing=0.2),
    "E": dict(positional="learned"),
}

PRESETS = {
    # Small enough to train on 2 CPU cores in minutes (tests, the demo).
    "tiny": dict(
        num_layers=2,
        d_model=128,
        d_ff=512,
        num_heads=4,
        dropout=0.1,
        label_smoothing=0.1,
        vocab_size=8000,
        max_length=128,
    ),
    "base": dict(_BASE),
    "big": dict(_BASE, d_model=1024, d_ff=4096, num_heads=16, dropout=0.3),
    **{row: dict(_BASE, **fields) for row, fields in TABLE3_ROWS.items()},
}
