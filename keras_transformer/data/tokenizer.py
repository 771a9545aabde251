"""The shared source-target BPE vocabulary and in-graph (de)tokenization.

Special ids agree with `keras_transformer.tokens`: PAD 0 "<pad>", UNK 1
"<unk>", BOS 2 "<s>", EOS 3 "</s>". Pieces the vocabulary lacks fall back to
UTF-8 byte pieces, so unknown characters survive a round trip.
"""

import os
import random
import re
import tempfile
from collections.abc import Iterable

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text
from sentencepiece import sentencepiece_model_pb2

from keras_transformer import files, tokens
from keras_transformer.checks import check_positive_int, is_integer
from keras_transformer.data import text_files

_SPECIAL_PIECES = (
    tokens.PAD_PIECE,
    tokens.UNK_PIECE,
    tokens.BOS_PIECE,
    tokens.EOS_PIECE,
)
# Longer training sentences are skipped (sentencepiece's default).
_MAX_SENTENCE_BYTES = 4192
# `tokenize_head` reads this many characters per id it keeps before it cuts
# a text: ordinary text has 3-8 characters per id of a BPE vocabulary of this
# project's sizes, so the cut text almost always holds enough ids.
_HEAD_CHARACTERS_PER_ID = 64
# sentencepiece's built-in normalizations, whose rules map no sequence that
# holds a space.
_BUILT_IN_NORMALIZERS = (
    "nmt_nfkc",
    "nfkc",
    "nmt_nfkc_cf",
    "nfkc_cf",
    "identity",
)


def check_vocab_size(vocab_size) -> int:
    """Returns `vocab_size` as an int; raises a ValueError unless it is an
    integer of at least `tokens.MIN_VOCAB_SIZE`."""
    if not is_integer(vocab_size) or vocab_size < tokens.MIN_VOCAB_SIZE:
        raise ValueError(
            f"`vocab_size` must be an integer >= {tokens.MIN_VOCAB_SIZE} "
            f"({tokens.NUM_SPECIAL_TOKENS} special ids, "
            f"{tokens.NUM_BYTE_PIECES} byte pieces and at least one "
            f"character). Received: vocab_size={vocab_size!r}"
        )
    return int(vocab_size)


def train_subword_vocab(
    sentences: Iterable[str],
    vocab_size: int,
    model_prefix: str,
    *,
    character_coverage: float = 0.9999,
    max_sentences: int = 2_000_000,
    seed: int = 0,
) -> str:
    """Learns a BPE vocabulary (section 5.1) with sentencepiece.

    Pass both sides of the training corpus to get the paper's shared
    source-target vocabulary. Training is quiet and deterministic for a
    given input and seed.

    Args:
        sentences: training sentences (both languages).
        vocab_size: number of pieces including the 4 special ids and the 256
            byte-fallback pieces; the paper uses 37000 (en-de) and 32000
            (en-fr).
        model_prefix: output path without extension, on any filesystem
            `tf.io.gfile` writes (e.g. gs://); writes `model_prefix.vocab`,
            then `model_prefix.model`, which appears whole or not at all.
        character_coverage: share of characters that get their own piece;
            the rarest rest is spelled with byte pieces.
        max_sentences: at most this many sentences are used to learn the
            merges: all of them when there are no more, else a uniform
            sample drawn with `seed`. Sentences longer than 4192 UTF-8 bytes
            are skipped (before sampling).
        seed: seed of that sampling.

    Returns:
        The path of the model file, `model_prefix + ".model"`.

    Raises:
        ValueError: if `vocab_size` is too small for the special, byte and
            character pieces, or larger than the text supports (the message
            gives the limit), or if `sentences` is empty or holds no usable
            sentence (all blank or longer than 4192 bytes); if
            `max_sentences` is not a positive integer or `seed` not an
            integer. A vocabulary is never silently smaller than asked.
    """
    vocab_size = check_vocab_size(vocab_size)
    max_sentences = check_positive_int("max_sentences", max_sentences)
    if not is_integer(seed):
        # random.Random(None) would seed from the OS: another sample in
        # each process.
        raise ValueError(f"`seed` must be an integer. Received: seed={seed!r}")
    sample, num_sentences = _sample_sentences(sentences, max_sentences, seed)
    # sentencepiece writes with C++ file APIs that know only local paths:
    # train into a local folder, then copy with tf.io.gfile.
    with tempfile.TemporaryDirectory() as local_folder:
        local_prefix = os.path.join(local_folder, "vocab")
        try:
            spm.SentencePieceTrainer.train(
                # Each sentence freed once sentencepiece has its copy: the
                # sample is not held twice.
                sentence_iterator=_drain(sample),
                model_prefix=local_prefix,
                model_type="bpe",
                vocab_size=vocab_size,
                character_coverage=character_coverage,
                byte_fallback=True,
                # The sample, whole: sentencepiece's own sampling ignores
                # its seed (`set_random_generator_seed`, sentencepiece 0.2),
                # so a corpus larger than it learned another vocabulary in
                # each process (each worker of a multi-worker run).
                input_sentence_size=0,
                shuffle_input_sentence=False,
                max_sentence_length=_MAX_SENTENCE_BYTES,
                pad_id=tokens.PAD_ID,
                unk_id=tokens.UNK_ID,
                bos_id=tokens.BOS_ID,
                eos_id=tokens.EOS_ID,
                pad_piece=tokens.PAD_PIECE,
                unk_piece=tokens.UNK_PIECE,
                bos_piece=tokens.BOS_PIECE,
                eos_piece=tokens.EOS_PIECE,
                minloglevel=2,
            )
        except RuntimeError as error:
            raise _training_error(error, vocab_size, num_sentences) from error
        with open(local_prefix + ".model", "rb") as f:
            model = sentencepiece_model_pb2.ModelProto.FromString(f.read())
        # The model records its prefix: the caller's, not the temporary
        # one, keeps the file the same for the same input and seed.
        model.trainer_spec.model_prefix = model_prefix
        folder = os.path.dirname(model_prefix)
        # Not for a bare scheme, such as the "ram:" of "ram://vocab".
        if folder and not folder.endswith(":"):
            tf.io.gfile.makedirs(folder)
        tf.io.gfile.copy(
            local_prefix + ".vocab", model_prefix + ".vocab", overwrite=True
        )
    path = model_prefix + ".model"
    _write_model_file(path, model.SerializeToString())
    return path


def _write_model_file(path: str, model_proto: bytes) -> None:
    # A `.model` file is never half written, and no other `*.model` file
    # appears beside it meanwhile (an export looks for a run's one).
    files.write_whole(path, model_proto, keep_suffix=False)


def _sample_sentences(sentences, max_sentences, seed):
    """`(sample, count)`: at most `max_sentences` of the `count` sentences
    read, of those sentencepiece would not skip; all of them in corpus order
    when they are no more, else a uniform sample drawn with `seed`
    (reservoir sampling, Knuth's Algorithm R), which holds only the sample
    in memory."""
    rng = random.Random(seed)
    sample = []
    usable = count = 0
    for sentence in sentences:
        count += 1
        if not _learnable(sentence):
            continue
        usable += 1
        if len(sample) < max_sentences:
            sample.append(sentence)
        else:
            index = rng.randrange(usable)
            if index < max_sentences:
                sample[index] = sentence
    return sample, count


def _learnable(sentence):
    """Whether sentencepiece's trainer keeps `sentence`: not blank, at most
    `_MAX_SENTENCE_BYTES` long, without the U+2585 it reserves."""
    return (
        bool(sentence.strip())
        and "\u2585" not in sentence
        and len(sentence.encode("utf-8")) <= _MAX_SENTENCE_BYTES
    )


def _drain(sentences):
    """Yields the items of the list `sentences` in order, emptying it."""
    sentences.reverse()
    while sentences:
        yield sentences.pop()


def vocabulary_pieces(path: str) -> list[str]:
    """The pieces of the sentencepiece model at `path`, in id order: what
    two vocabularies share when they tokenize alike (the file also records
    the options and paths it was learned with).

    Raises:
        OSError, tf.errors.OpError: if `path` cannot be read.
        RuntimeError: if it is not a sentencepiece model.
    """
    with tf.io.gfile.GFile(path, "rb") as f:
        processor = spm.SentencePieceProcessor(model_proto=f.read())
    return [processor.id_to_piece(i) for i in range(processor.get_piece_size())]


def _training_error(error, vocab_size, num_sentences):
    message = str(error)
    if num_sentences == 0:
        return ValueError(
            "`sentences` is empty; the vocabulary is learned from the "
            "training text. Received: sentences=<0 sentences>"
        )
    if "!sentences_.empty()" in message or "all_chars_count" in message:
        return ValueError(
            f"`sentences` holds no usable training sentence: all "
            f"{num_sentences} are blank or longer than {_MAX_SENTENCE_BYTES} "
            "bytes (sentencepiece's max_sentence_length). Pass the corpus "
            "text, one sentence per line. "
            f"Received: sentences=<{num_sentences} sentences>"
        )
    too_high = re.search(r"value <= (\d+)", message)
    if too_high:
        return ValueError(
            f"`vocab_size` is larger than {num_sentences} training sentences "
            f"support: at most {too_high.group(1)} pieces. Lower vocab_size "
            f"or add text. Received: vocab_size={vocab_size}"
        )
    too_low = re.search(r"required_chars\. \d+ vs (\d+)", message)
    if too_low:
        return ValueError(
            "`vocab_size` is too small for the special, byte and character "
            f"pieces of this text: it needs at least {too_low.group(1)}. "
            f"Raise vocab_size. Received: vocab_size={vocab_size}"
        )
    return ValueError(f"sentencepiece training failed: {message}")


class SubwordTokenizer(tf.Module):
    """Tokenizes and detokenizes in the TensorFlow graph (tensorflow-text).

    The sentencepiece model travels inside the TensorFlow resource, so a
    SavedModel that tracks this module carries its vocabulary and runs in a
    fresh process that imports only `tensorflow` and `tensorflow_text`.
    Detokenization inverts tokenization for normalised text (NFKC, single
    spaces, no leading or trailing space). Seed (`tf.random.set_seed`,
    `keras.utils.set_random_seed`) before creating it: seeding clears the
    eager kernel cache, which owns the sentencepiece resource, and the
    tokenizer then fails (tensorflow/text#570).

    Args:
        model_proto: the bytes of a sentencepiece model trained by
            `train_subword_vocab` (its special ids must match
            `keras_transformer.tokens`).
        name: name of the module.

    Raises:
        ValueError: if the model's special pieces are not PAD 0, UNK 1,
            BOS 2, EOS 3.

    Example:

    >>> tokenizer = SubwordTokenizer.from_file("vocab/bpe.model")
    >>> ids = tokenizer.tokenize(tf.constant(["Hello world."]))
    >>> tokenizer.detokenize(ids)  # [b"Hello world."]
    """

    def __init__(self, model_proto: bytes, name: str | None = None):
        super().__init__(name=name)
        processor = spm.SentencePieceProcessor(model_proto=model_proto)
        size = processor.get_piece_size()
        specials = tuple(processor.id_to_piece(i) for i in range(min(size, 4)))
        if specials != _SPECIAL_PIECES:
            raise ValueError(
                "The sentencepiece model's ids 0-3 must be "
                f"{_SPECIAL_PIECES} to agree with the model; retrain it with "
                f"`train_subword_vocab`. Received: specials={specials}"
            )
        self._model_proto = bytes(model_proto)
        self._vocab_size = size
        spec = sentencepiece_model_pb2.ModelProto.FromString(self._model_proto)
        # No piece spans a space (`train_subword_vocab`'s models): the ids of
        # a text cut before a space are the first ids of the whole text.
        self._splits_at_spaces = (
            spec.trainer_spec.split_by_whitespace
            and not spec.trainer_spec.treat_whitespace_as_suffix
            and spec.normalizer_spec.name in _BUILT_IN_NORMALIZERS
        )
        self._sentencepiece = tf_text.SentencepieceTokenizer(
            model=self._model_proto, out_type=tf.int32
        )
        # The instance's own `tf.function`s: as methods decorated with
        # `tf.function` they would hold it weakly, and
        # `SubwordTokenizer.from_file(path).tokenize(...)` would lose it
        # during the call.
        self.tokenize = tf.function(
            self.tokenize, input_signature=[tf.TensorSpec([None], tf.string)]
        )
        self.detokenize_ids = tf.function(
            self.detokenize_ids,
            input_signature=[tf.TensorSpec([None, None], tf.int32)],
        )

    @property
    def vocab_size(self) -> int:
        """Number of ids, V, specials and byte pieces included."""
        return self._vocab_size

    @classmethod
    def from_file(cls, path: str) -> "SubwordTokenizer":
        """Loads a `.model` file written by `train_subword_vocab`/`save`.

        Raises:
            FileNotFoundError: if `path` does not exist.
            ValueError: if `path` is a directory, cannot be read, or is not
                a sentencepiece model with this project's special ids.
        """
        proto = text_files.read_file(
            path,
            "Sentencepiece model file",
            "Pass the `.model` file written by training (e.g. "
            "MODEL_DIR/vocab.model).",
        )
        not_a_model = ValueError(
            "The file is not a sentencepiece model; pass the `.model` file "
            "written by training (not the `.vocab` text file). "
            f"Received: path={path}"
        )
        # Empty, sentencepiece would load it as a model without pieces.
        if not proto:
            raise not_a_model
        try:
            return cls(proto)
        except RuntimeError:  # sentencepiece cannot parse the bytes
            raise not_a_model from None

    def save(self, path: str) -> None:
        """Writes the sentencepiece model file, e.g. beside the model."""
        _write_model_file(path, self._model_proto)

    def tokenize(self, strings):
        """Splits sentences into subword ids, without BOS or EOS.

        Args:
            strings: `tf.string` [B] sentences.

        Returns:
            `tf.RaggedTensor` int32 [B, (L)] of ids.
        """
        return self._sentencepiece.tokenize(strings)

    def tokenize_head(self, strings, num_tokens: int):
        """The first `num_tokens` ids of each sentence, as
        `tokenize(strings)[:, :num_tokens]`, without tokenizing all of a
        long text.

        A text longer than 64 characters per id wanted is cut before its
        last space within them, and only that part is tokenized:
        sentencepiece segments the words between spaces on their own, so
        its ids begin as the whole text's. Where that part gives fewer than
        `num_tokens` ids (long words; no spaces, as in Chinese; a model that
        does not split at spaces), the whole text is tokenized. A request
        of one 10 MB sentence to the demo's export took 0.24 s so, against
        8.5 s when all of it was tokenized.

        Args:
            strings: `tf.string` [B] sentences.
            num_tokens: how many ids to keep, a positive int.

        Returns:
            `tf.RaggedTensor` int32 [B, (L)] of ids, L <= `num_tokens`.
        """
        strings = tf.convert_to_tensor(strings, tf.string)
        if not self._splits_at_spaces:
            return self.tokenize(strings)[:, :num_tokens]
        head = tf.strings.substr(
            strings, 0, _HEAD_CHARACTERS_PER_ID * num_tokens, unit="UTF8_CHAR"
        )
        cut = tf.strings.length(head) < tf.strings.length(strings)
        # RE2 matches no invalid UTF-8: such a head counts as unspaced.
        spaced = tf.strings.regex_full_match(head, "(?s).* .*")
        shortened = tf.where(
            cut, tf.strings.regex_replace(head, " [^ ]*$", ""), strings
        )
        ids = self.tokenize(shortened)
        enough = ~cut | (spaced & (ids.row_lengths() >= num_tokens))
        ids = tf.cond(
            tf.reduce_all(enough),
            lambda: ids,
            lambda: self.tokenize(tf.where(enough, shortened, strings)),
        )
        return ids[:, :num_tokens]

    def detokenize(self, ids):
        """Joins ids back into sentences, stopping at the first EOS.

        PAD and BOS ids are dropped, so model inputs, labels and decoder
        outputs can be passed as they are.

        Args:
            ids: int [B, L] ids, dense or ragged.

        Returns:
            `tf.string` [B] sentences.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=tokens.PAD_ID)
        return self.detokenize_ids(tf.cast(ids, tf.int32))

    def detokenize_ids(self, ids):
        """`detokenize` for dense int32 [B, L] ids (the saved signature)."""
        seen_eos = tf.cumsum(tf.cast(ids == tokens.EOS_ID, tf.int32), axis=1)
        keep = (seen_eos == 0) & (ids != tokens.PAD_ID) & (ids != tokens.BOS_ID)
        pieces = tf.ragged.boolean_mask(ids, keep)  # [B, (L)]
        return self._sentencepiece.detokenize(pieces)

    def id_to_piece(self, ids) -> list[str]:
        """The subword pieces of `ids` (e.g. "▁Haus", "</s>"), for display."""
        pieces = self._sentencepiece.id_to_string(tf.constant(ids, tf.int32))
        return [piece.decode("utf-8") for piece in pieces.numpy()]
