"""Text in, text out: tokenizer + Transformer + beam search in one tf.Module.

Shape legend: B batch, S source length, L output length, N hypotheses
returned, K beam.
"""

import functools

import tensorflow as tf

from keras_transformer.checks import check_positive_int, is_integer
from keras_transformer.decoding.beam_search import (
    ALPHA_TOO_LARGE,
    check_alpha,
    max_alpha,
)
from keras_transformer.decoding.transformer_search import (
    DEFAULT_PARALLEL_SEARCHES,
    check_parallel_searches,
    transformer_beam_search,
)
from keras_transformer.tokens import BOS_ID, EOS_ID, PAD_ID

# The paper's decoding defaults (section 6.1).
DEFAULT_BEAM_SIZE = 4
DEFAULT_ALPHA = 0.6
DEFAULT_LENGTH_OFFSET = 50
# With `jit_compile`, source and cache lengths are padded to multiples of
# this, so XLA compiles one program per bucket rather than per length.
_LENGTH_BUCKET = 16

_STRINGS = tf.TensorSpec([None], tf.string, name="inputs")
_IDS = tf.TensorSpec([None, None], tf.int32, name="source_ids")
# The input signatures of `Translator`'s `tf.function`s (the SavedModel's).
_SIGNATURES = {
    "translate": [_STRINGS],
    "translate_with_options": [
        _STRINGS,
        tf.TensorSpec([], tf.float32, name="alpha"),
        tf.TensorSpec([], tf.int32, name="length_offset"),
        tf.TensorSpec([], tf.int32, name="num_hypotheses"),
    ],
    "translate_ids": [_IDS],
}


# Outputs of the string signatures with one entry per hypothesis.
_PER_HYPOTHESIS = ("outputs", "scores", "reached_length_limit")


def _without_eos(ids, lengths):
    """bool [B, N]: the hypotheses of `ids` [B, N, L] whose last token (at
    `lengths` - 1) is not EOS, i.e. that stopped at their length limit."""
    last = tf.gather(ids, tf.maximum(lengths - 1, 0), batch_dims=2)
    return (lengths > 0) & (last != EOS_ID)


def _checking_shapes(method, signature):
    """`method` with the shapes of its arguments checked in the graph.

    TF Serving feeds a request's tensors whatever their shapes (it does not
    compare them with the signature's, as Python's `tf.function` does): a
    2-D batch of strings would be translated flattened, with flags of
    another shape than the outputs, and a scalar option that is a vector
    would fail deep inside the search. `EnsureShape` is a runtime check (an
    assertion on `tf.rank` would be folded away by Grappler, which knows
    the placeholders' static shapes); its error names the input, its shape
    and the signature's.
    """

    @functools.wraps(method)
    def checked(*args):
        return method(
            *(
                tf.ensure_shape(arg, spec.shape)
                for arg, spec in zip(args, signature)
            )
        )

    return checked


def _check(condition, problem, name, value):
    """An in-graph check whose error ends `Received: name=value`; `problem`
    is a string or a string tensor."""
    return tf.debugging.Assert(
        condition,
        [tf.strings.join([problem, f" Received: {name}="]), value],
        summarize=1,
    )


class _Untracked:
    """Holds the Keras model out of the checkpoint graph of the module.

    Only the model's weights are tracked (see `Translator.__init__`), so an
    optimizer attached to a trained model never enters the export.
    """

    def __init__(self, model):
        self.model = model


class Translator(tf.Module):
    """Translates sentences with a trained Transformer and its vocabulary.

    The three `tf.function`s are both the in-Python API and the signatures of
    the exported SavedModel; their loops are explicit `tf.while_loop`s, so
    they do not rely on autograph. Input policy, applied per sentence and
    reported in the outputs rather than raised:

    - Invalid UTF-8 is decoded with U+FFFD replacement characters, and
      `invalid_utf8` is True.
    - A sentence of more than `max_input_length` subword tokens is truncated
      to its first `max_input_length` tokens, and `truncated` is True.
    - Each hypothesis has at most `min(source tokens + length_offset,
      max_length)` tokens, EOS included (paper: input length + 50); one
      that reaches that limit before EOS stops there, and
      `reached_length_limit` is True.
    - A sentence without subword tokens (empty, or only whitespace)
      translates to "" with score 0; in `translate_ids`, a row of only
      padding (or BOS and EOS) to no token (length 0) with score 0.
    - `translate_ids` fails on ids outside [0, vocab_size), naming the
      first.

    Args:
        model: a trained `keras_transformer.Transformer`.
        tokenizer: the `SubwordTokenizer` the model was trained with.
        beam_size: K, the beam width (paper: 4), at most the vocabulary
            size.
        alpha: default length penalty strength (paper: 0.6), at most
            `beam_search.max_alpha(max_length)` (its length penalty
            overflows float32 beyond it).
        length_offset: default output length allowance beyond the input
            length (paper: 50).
        jit_compile: run the encoder and beam search as one XLA program
            (on CPU faster only for single sentences, slower than the
            stock graph from 8 sentences on; README, Performance).
            Batches are padded to a power of two and lengths to multiples
            of 16, and XLA compiles once per such shape. A SavedModel of
            it needs XLA at serving time: TF Serving's
            `--xla_cpu_compilation_enabled=true` on CPU.
        parallel_searches: without `jit_compile`, the batch is split into
            this many parts searched side by side (same results); 1 runs
            one search. XLA runs one program, so it always searches once.
            The searches are fastest with TensorFlow's threads per op set to
            the cores divided by them, before the process's first op
            (`inference.set_decoding_threads`; 2 cores, small model: a call
            388-420 -> 265-311 ms).
        name: name of the module.

    Raises:
        TypeError: if `model` or `tokenizer` is not one (a path, say), or
            `alpha` is not a number.
        ValueError: if the tokenizer and the model disagree on the
            vocabulary size, or a setting is out of range.

    Example:
    >>> translator = Translator(model, tokenizer)
    >>> translator.translate(tf.constant(["Hello world."]))["outputs"]
    """

    def __init__(
        self,
        model,
        tokenizer,
        beam_size: int = DEFAULT_BEAM_SIZE,
        alpha: float = DEFAULT_ALPHA,
        length_offset: int = DEFAULT_LENGTH_OFFSET,
        jit_compile: bool = False,
        parallel_searches: int = DEFAULT_PARALLEL_SEARCHES,
        name: str | None = None,
    ):
        super().__init__(name=name)
        # A path in place of either (both are files) would fail on a missing
        # attribute.
        for arg, value, kind, methods in (
            (
                "model",
                model,
                "keras_transformer.Transformer",
                ("config", "encode"),
            ),
            (
                "tokenizer",
                tokenizer,
                "data.tokenizer.SubwordTokenizer",
                ("vocab_size", "tokenize", "detokenize"),
            ),
        ):
            if not all(hasattr(value, method) for method in methods):
                raise TypeError(
                    f"`{arg}` must be a loaded {kind}, not a "
                    f"{type(value).__name__}: load the model with "
                    "keras.saving.load_model(PATH) and the tokenizer with "
                    "SubwordTokenizer.from_file(PATH), or get both from their "
                    "paths with keras_transformer.inference.load_translator. "
                    f"Received: {arg}={value!r}"
                )
        config = model.config
        if config.source_vocab_size not in (None, config.vocab_size):
            # One tokenizer makes the source ids too: they would index
            # another vocabulary's embeddings (or past its end).
            raise ValueError(
                "A Translator tokenizes source and target with one "
                "vocabulary, so the model must share it (as train.py's do); "
                "this one has its own source vocabulary. Received: "
                f"model.config.source_vocab_size={config.source_vocab_size}, "
                f"model.config.vocab_size={config.vocab_size}"
            )
        if tokenizer.vocab_size != config.vocab_size:
            raise ValueError(
                "The tokenizer and the model must share one vocabulary; pass "
                "the `.model` file the model was trained with. Received: "
                f"tokenizer.vocab_size={tokenizer.vocab_size}, "
                f"model.config.vocab_size={config.vocab_size}"
            )
        beam_size = check_positive_int("beam_size", beam_size)
        if beam_size > config.vocab_size:
            raise ValueError(
                "`beam_size` must be at most the vocabulary size: beam search "
                "takes the top K of the V next tokens. Lower `beam_size`. "
                f"Received: beam_size={beam_size}, "
                f"vocab_size={config.vocab_size}"
            )
        # No output is longer than max_length: limits saturate at it.
        alpha = check_alpha(alpha, config.max_length)
        if not is_integer(length_offset) or length_offset < 0:
            raise ValueError(
                "`length_offset` must be a non-negative integer. "
                f"Received: length_offset={length_offset!r}"
            )
        parallel_searches = check_parallel_searches(parallel_searches)
        self._holder = _Untracked(model)
        # The SavedModel tracks the weights and nothing else of the model.
        # The `tf.Variable`s under the Keras variables, not the Keras
        # variables: TF1-style loaders (TF Serving, `saved_model_cli run`)
        # find no value for a Keras variable (keras-team/keras#20095).
        self.model_weights = [weight.value for weight in model.weights]
        self.tokenizer = tokenizer
        self.beam_size = beam_size
        self.alpha = float(alpha)
        self.length_offset = int(length_offset)
        self.jit_compile = bool(jit_compile)
        self.parallel_searches = parallel_searches
        self.vocab_size = config.vocab_size
        self.max_length = config.max_length
        # The source needs one position for EOS.
        self.max_input_length = config.max_length - 1
        # The three entry points as `tf.function`s of this instance. As
        # methods decorated with `tf.function` they would hold it weakly, and
        # `Translator(model, tokenizer).translate(...)` would lose it during
        # the call.
        for method, signature in _SIGNATURES.items():
            function = tf.function(
                _checking_shapes(getattr(self, method), signature),
                input_signature=signature,
                autograph=False,
            )
            setattr(self, method, function)

    @property
    def model(self):
        return self._holder.model

    def translate(self, inputs):
        """Translates sentences with the default decoding settings.

        Args:
            inputs: `tf.string` [B] sentences.

        Returns:
            dict of `outputs` `tf.string` [B] (the best translation),
            `scores` float32 [B] (log P(Y) / length penalty), and the
            per-sentence flags `truncated`, `invalid_utf8` and
            `reached_length_limit` bool [B] (see `_translate_strings`).
        """
        results = self._translate_strings(
            inputs, self.alpha, self.length_offset, num_return=1
        )
        for key in _PER_HYPOTHESIS:
            results[key] = results[key][:, 0]
        return results

    def translate_with_options(
        self, inputs, alpha, length_offset, num_hypotheses
    ):
        """Translates with request-time decoding settings and n-best lists.

        Args:
            inputs: `tf.string` [B] sentences.
            alpha: float32 scalar >= 0, the length penalty strength, at
                most `beam_search.max_alpha` of the longest output (its
                length penalty overflows float32 beyond it).
            length_offset: int32 scalar >= 0, tokens allowed beyond the
                input length.
            num_hypotheses: N, int32 scalar in [1, beam_size].

        Returns:
            dict of `outputs` `tf.string` [B, N], `scores` float32 [B, N]
            and `reached_length_limit` bool [B, N], best first, and the
            flags `truncated` and `invalid_utf8` bool [B].

        Raises:
            InvalidArgumentError: if an option is out of range (the message
                names it and its value).
        """
        checks = [
            _check(
                tf.math.is_finite(alpha) & (alpha >= 0.0),
                "`alpha` must be a non-negative number.",
                "alpha",
                alpha,
            ),
            _check(
                length_offset >= 0,
                "`length_offset` must be non-negative.",
                "length_offset",
                length_offset,
            ),
            _check(
                (num_hypotheses >= 1) & (num_hypotheses <= self.beam_size),
                "`num_hypotheses` must be in [1, "
                f"{self.beam_size}] (the beam size).",
                "num_hypotheses",
                num_hypotheses,
            ),
        ]
        with tf.control_dependencies(checks):
            alpha = tf.identity(alpha)
        # K slots in the graph; the search stops once the request's N are
        # final (waiting for all K took ~40 % longer on the demo's model).
        results = self._translate_strings(
            inputs,
            alpha,
            length_offset,
            num_return=self.beam_size,
            num_needed=num_hypotheses,
        )
        for key in _PER_HYPOTHESIS:
            results[key] = results[key][:, :num_hypotheses]
        return results

    def translate_ids(self, source_ids):
        """Translates token ids, for clients that tokenize themselves.

        The source is built as `translate` builds it from text: subword ids
        then EOS, without BOS (BOS only starts the decoder's input). BOS and
        EOS ids in `source_ids` are dropped and one EOS is appended, so a
        leading BOS (which some tokenizers add) and a final EOS are optional.

        Args:
            source_ids: int32 [B, S] subword ids, 0 = padding; a leading
                BOS and a final EOS are optional.

        Returns:
            dict of `output_ids` int32 [B, L] (EOS included, 0 after it;
            only 0 for a row without subword ids), `scores` float32 [B]
            (0 for such a row), `lengths` int32 [B] (tokens, EOS included;
            0 for such a row), `truncated` bool [B] (the source was cut to
            `max_length - 1` tokens) and `reached_length_limit` bool [B]
            (the output has no EOS: it stopped at its length limit).
        """
        outside = (source_ids < 0) | (source_ids >= self.vocab_size)
        in_vocab = _check(
            ~tf.reduce_any(outside),
            f"`source_ids` must be subword ids in [0, {self.vocab_size}) "
            "(the vocabulary size); tokenize with the model's vocabulary.",
            "source_ids",
            tf.boolean_mask(source_ids, outside),  # The first one shows.
        )
        with tf.control_dependencies([in_vocab]):
            source_ids = tf.identity(source_ids)
        # Trained sources have no BOS; a kept one would change the output.
        keep = (
            (source_ids != PAD_ID)
            & (source_ids != BOS_ID)
            & (source_ids != EOS_ID)
        )
        pieces = tf.ragged.boolean_mask(source_ids, keep)  # [B, (S)]
        ids, scores, lengths, truncated = self._search(
            pieces, self.alpha, self.length_offset, num_return=1
        )
        # Nothing to translate (only padding, BOS or EOS): `translate`'s empty
        # translation, no token (as with a length limit of 0) and score 0,
        # not one decoded from a lone EOS.
        empty = tf.equal(pieces.row_lengths(), 0)
        return {
            "output_ids": tf.where(empty[:, None], PAD_ID, ids[:, 0]),
            "scores": tf.where(empty, 0.0, scores[:, 0]),
            "lengths": tf.where(empty, 0, lengths[:, 0]),
            "truncated": truncated,
            "reached_length_limit": _without_eos(ids, lengths)[:, 0] & ~empty,
        }

    def _translate_strings(
        self, inputs, alpha, length_offset, num_return, num_needed=None
    ):
        """Shared body of the string signatures: [B, N] outputs and flags.

        Flags: `truncated`, the source was longer than `max_length - 1`
        subword tokens and its first ones were translated; `invalid_utf8`,
        the input was decoded with U+FFFD replacements; and per hypothesis
        `reached_length_limit`, it ended at its length limit (input length
        + `length_offset`, at most `max_length`) before EOS, so it may be
        cut short. An input without any subword (empty, or whitespace)
        translates to "" with score 0.
        """
        text = tf.strings.unicode_transcode(
            inputs,
            input_encoding="UTF-8",
            output_encoding="UTF-8",
            errors="replace",
            replacement_char=0xFFFD,
        )
        invalid_utf8 = tf.not_equal(text, inputs)
        # One id past the longest source: whether it was truncated.
        pieces = self.tokenizer.tokenize_head(
            text, self.max_input_length + 1
        )  # [B, (S)]
        # Nothing to translate: no subword, e.g. only (Unicode) whitespace.
        empty = tf.equal(pieces.row_lengths(), 0)
        ids, scores, lengths, truncated = self._search(
            pieces, alpha, length_offset, num_return, num_needed
        )
        batch_size = tf.shape(ids)[0]
        flat = tf.reshape(ids, [batch_size * num_return, -1])  # [B*N, L]
        outputs = tf.reshape(
            self.tokenizer.detokenize_ids(flat), [batch_size, num_return]
        )
        return {
            "outputs": tf.where(empty[:, None], "", outputs),
            "scores": tf.where(empty[:, None], 0.0, scores),
            "reached_length_limit": _without_eos(ids, lengths)
            & ~empty[:, None],
            "truncated": truncated,
            "invalid_utf8": invalid_utf8,
        }

    def _search(
        self, pieces, alpha, length_offset, num_return, num_needed=None
    ):
        """Beam search from ragged source tokens (no EOS); `num_needed` as
        in `beam_search`.

        Returns:
            (ids int32 [B, N, L], scores [B, N], lengths [B, N],
            truncated bool [B]).
        """
        pieces = tf.cast(pieces, tf.int32)
        truncated = pieces.row_lengths() > self.max_input_length
        pieces = pieces[:, : self.max_input_length]
        num_tokens = tf.cast(pieces.row_lengths(), tf.int32)  # [B]
        eos = tf.fill([pieces.nrows(), 1], EOS_ID)
        source = tf.concat([pieces, tf.RaggedTensor.from_tensor(eos)], axis=1)
        source_ids = source.to_tensor(default_value=PAD_ID)  # [B, S]
        # Saturate the offset at max_length before adding: a huge request
        # value (e.g. 2**31 - 1) would overflow int32 in the sum and make
        # the limit negative (empty translations). int64 first, so neither
        # an int32 tensor nor a large Python int wraps in the cast.
        offset = tf.minimum(tf.cast(length_offset, tf.int64), self.max_length)
        limits = tf.minimum(
            num_tokens + tf.cast(offset, tf.int32), self.max_length
        )  # [B]
        # At least one cache slot, so an empty batch builds valid shapes.
        cache_length = tf.maximum(tf.reduce_max(limits), 1)
        if tf.is_tensor(alpha):
            # A request's alpha (`translate_with_options`), checked at this
            # batch's longest output; `__init__` checked the default one.
            # Here, not in the search: under XLA an assertion is a no-op.
            bound = max_alpha(cache_length)
            fits = _check(
                alpha <= bound,
                tf.strings.format(ALPHA_TOO_LARGE, [bound, cache_length]),
                "alpha",
                alpha,
            )
            with tf.control_dependencies([fits]):
                alpha = tf.identity(alpha)
        if not self.jit_compile:
            ids, scores, lengths = self._decode(
                source_ids, limits, cache_length, alpha, num_return, num_needed
            )
            return ids, scores, lengths, truncated

        # XLA compiles one program per input shape: pad the batch to a power
        # of two and the source and cache lengths to multiples of
        # `_LENGTH_BUCKET`, so a server compiles a few dozen programs, not
        # one per request. Padded rows have limit 0 and finish at once; the
        # cache length travels as the shape of `cache_slots`.
        batch_size = tf.shape(source_ids)[0]
        padded_batch = _next_power_of_two(batch_size)
        source_length = tf.shape(source_ids)[1]
        # Both within `max_length`: a learned position table has no rows
        # past it (sources and outputs fit it, their buckets need not).
        padded_source = tf.minimum(
            _round_up(source_length, _LENGTH_BUCKET), self.max_length
        )
        padded_cache = tf.minimum(
            _round_up(cache_length, _LENGTH_BUCKET), self.max_length
        )
        source_ids = tf.pad(
            source_ids,
            [
                [0, padded_batch - batch_size],
                [0, padded_source - source_length],
            ],
        )
        padded_limits = tf.pad(limits, [[0, padded_batch - batch_size]])
        ids, scores, lengths = self._xla_decode(
            source_ids,
            padded_limits,
            tf.zeros([padded_cache], tf.int8),
            tf.cast(alpha, tf.float32),
            num_return,
            num_needed,
        )
        ids = ids[:batch_size, :, :cache_length]
        return ids, scores[:batch_size], lengths[:batch_size], truncated

    def _decode(
        self,
        source_ids,
        limits,
        cache_length,
        alpha,
        num_return,
        num_needed=None,
        fixed_size=False,
    ):
        """Encoder + cached beam search over padded ids [B, S].

        Args:
            num_needed: as in `beam_search`.
            fixed_size: self-attention caches of `cache_length` positions
                that every step gathers (static shapes, for XLA) rather
                than in-place ones (see `transformer_beam_search`).

        Returns:
            (ids int32 [B, N, cache_length], scores [B, N], lengths [B, N]).
        """
        result = transformer_beam_search(
            self.model,
            source_ids,
            self.beam_size,
            limits,
            alpha=alpha,
            num_return=num_return,
            num_needed=num_needed,
            max_decode_steps=cache_length,
            fixed_size=fixed_size,
            parallel_searches=1 if fixed_size else self.parallel_searches,
        )
        return result.ids, result.scores, result.lengths

    @tf.function(jit_compile=True, autograph=False, reduce_retracing=True)
    def _xla_decode(
        self, source_ids, limits, cache_slots, alpha, num_return, num_needed
    ):
        """`_decode` as one XLA program; the cache length is the (static)
        shape of `cache_slots`."""
        return self._decode(
            source_ids,
            limits,
            tf.shape(cache_slots)[0],
            alpha,
            num_return,
            num_needed,
            fixed_size=True,
        )


def _round_up(value, multiple):
    return (value + multiple - 1) // multiple * multiple


def _next_power_of_two(value):
    """The smallest power of two >= `value` (an int32 scalar >= 1)."""
    bits = value - 1
    for shift in (1, 2, 4, 8, 16):
        bits = tf.bitwise.bitwise_or(bits, tf.bitwise.right_shift(bits, shift))
    return bits + 1
