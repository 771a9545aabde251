"""BLEU and chrF with sacreBLEU, the paper's tokenized BLEU (Table 2), and
per-token perplexity (Table 3)."""

import dataclasses
import functools
import math
import re
from collections.abc import Sequence

import numpy as np
import sacrebleu
import tensorflow as tf

from keras_transformer import tokens
from keras_transformer.data import batching, pipeline
from keras_transformer.training import losses


@dataclasses.dataclass(frozen=True)
class Scores:
    """Corpus scores of a set of hypotheses against references.

    Attributes:
        bleu: sacreBLEU on detokenized text (the number to report).
        bleu_signature: sacreBLEU's signature line, which makes `bleu`
            reproducible.
        chrf: chrF (sacreBLEU defaults).
        chrf_signature: its signature.
        tokenized_bleu: BLEU as the paper's Table 2 computed it (see
            `tokenized_bleu`; hyphenated compounds split for German targets
            only); not comparable across tokenizations. None for targets
            written without spaces between words (Chinese, Japanese,
            Korean), which the Moses tokenizer does not segment.
        tokenized_bleu_signature: what `tokenized_bleu` computed (see
            `tokenized_bleu_signature`), or None with it.
        num_sentences: number of segments scored.
    """

    bleu: float
    bleu_signature: str
    chrf: float
    chrf_signature: str
    tokenized_bleu: float | None
    tokenized_bleu_signature: str | None
    num_sentences: int

    def to_json_dict(self) -> dict:
        return {
            "bleu": round(self.bleu, 2),
            "chrf": round(self.chrf, 2),
            "tokenized_bleu": (
                None
                if self.tokenized_bleu is None
                else round(self.tokenized_bleu, 2)
            ),
            "signature": self.bleu_signature,
            "chrf_signature": self.chrf_signature,
            "tokenized_bleu_signature": self.tokenized_bleu_signature,
            "num_sentences": self.num_sentences,
        }


_SUBTAG_SEPARATOR = re.compile(r"[-_]")


def primary_language(lang: str) -> str:
    """The primary language subtag of `lang`, lowercased.

    Every choice of tokenizer here (sacreBLEU's, the Moses one, compound
    splitting) depends on the language alone: sacreBLEU and sacremoses
    match codes exactly, so "zh-TW" or "ZH" silently got the tokenizers of
    a language with spaces between words. BCP 47 tags are case-insensitive
    and begin with the language (`zh-TW`, `de-CH`), as POSIX locales do
    (`pt_BR`).

    Args:
        lang: a language code, e.g. "de", "zh-TW" or "pt_BR".

    Returns:
        E.g. "de", "zh" or "pt".
    """
    return _SUBTAG_SEPARATOR.split(lang, maxsplit=1)[0].lower()


def _bleu(target_lang: str) -> sacrebleu.metrics.BLEU:
    """sacreBLEU's BLEU with its tokenizer for `target_lang`.

    As sacreBLEU chooses for its own test sets: `zh`, `ja-mecab` and
    `ko-mecab` for Chinese, Japanese and Korean targets (13a would leave
    their unspaced sentences whole words), 13a for every other language;
    by the primary language subtag (`primary_language`).

    Raises:
        ValueError: if the tokenizer needs packages that are not installed.
    """
    lang = primary_language(target_lang)
    try:
        return sacrebleu.metrics.BLEU(trg_lang=lang)
    except RuntimeError:
        # sacreBLEU's message for a missing MeCab (ja, ko) spans five lines.
        raise ValueError(
            f"BLEU for target language {target_lang} needs an optional "
            "sacreBLEU tokenizer that is not installed; install it with "
            f"pip install 'sacrebleu[{lang}]'. "
            f"Received: target_lang={target_lang}"
        ) from None


def check_target_language(target_lang: str) -> None:
    """Fails unless `score` can score translations into `target_lang`.

    Call it before translating or training, so a missing tokenizer package
    fails at once and not after the work.

    Raises:
        ValueError: as `score` would, naming the packages to install.
    """
    _bleu(target_lang)


def _sentences(sentences: Sequence[str], name: str) -> list[str]:
    """`sentences` as a list, checked to be strings.

    Raises:
        TypeError: if `sentences` is one string (which would be scored as
            one sentence per character) or an item is not a string.
    """
    if isinstance(sentences, (str, bytes)):
        raise TypeError(
            f"`{name}` must be a list of sentences, not one string; wrap it "
            f"in a list. Received: {name}={sentences!r:.60}"
        )
    sentences = list(sentences)
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(
                f"`{name}` must hold strings (decode bytes as UTF-8). "
                f"Received: {name}[{index}]={sentence!r:.60} "
                f"({type(sentence).__name__})"
            )
    return sentences


def score(
    hypotheses: Sequence[str], references: Sequence[str], target_lang="de"
) -> Scores:
    """Scores detokenized hypotheses against one reference each.

    BLEU tokenizes as sacreBLEU does for `target_lang` (13a, or its Chinese,
    Japanese and Korean tokenizers; see the signature); chrF works on
    characters and needs no tokenizer. The paper's tokenized BLEU
    (`tokenized_bleu`) splits hyphenated compounds for German targets only.
    Only the primary subtag of `target_lang` counts, case-insensitively:
    "zh-TW" and "ZH" are scored as "zh", "de-CH" as "de".

    Args:
        hypotheses: detokenized translations, one per segment.
        references: one detokenized reference for each.
        target_lang: the language of both, e.g. "de", "fr" or "zh-TW".

    Returns:
        The `Scores` of the corpus.

    Raises:
        TypeError: when either is one string rather than a list of them,
            or holds something other than strings (e.g. bytes).
        ValueError: when the two lists differ in length or are empty, or
            when BLEU for `target_lang` needs packages that are missing.
    """
    hypotheses = _sentences(hypotheses, "hypotheses")
    references = _sentences(references, "references")
    if len(hypotheses) != len(references):
        raise ValueError(
            "Every hypothesis needs exactly one reference. Received: "
            f"{len(hypotheses)} hypotheses and {len(references)} references"
        )
    if not hypotheses:
        raise ValueError("Nothing to score: the hypothesis list is empty.")
    bleu = _bleu(target_lang)
    bleu_score = bleu.corpus_score(hypotheses, [references])
    # Where sacreBLEU segments words itself (not 13a), Moses tokens would be
    # whole sentences: the paper's tokenized BLEU would mean nothing.
    spaced = bleu.tokenizer.signature() == "13a"
    chrf = sacrebleu.metrics.CHRF()
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return Scores(
        bleu=bleu_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf=chrf_score.score,
        chrf_signature=str(chrf.get_signature()),
        tokenized_bleu=(
            tokenized_bleu(hypotheses, references, target_lang)
            if spaced
            else None
        ),
        tokenized_bleu_signature=(
            tokenized_bleu_signature(target_lang) if spaced else None
        ),
        num_sentences=len(hypotheses),
    )


_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")

# Hyphenated compounds are split for German targets only. tensor2tensor's one
# BLEU script, utils/get_ende_bleu.sh, does it after `tokenizer.perl -l de`
# to be "comparable to papers like GNMT, ConvS2S" on en-de (Stanford's en-de
# data split them "for historical reasons"); it has no En-Fr counterpart,
# and fairseq's authors advise against it for En-Fr
# (facebookresearch/fairseq#2009). Elsewhere each `c'est-à-dire` or `e-mail`
# would add matched `##AT##-##AT##` n-grams and inflate BLEU.
_COMPOUND_SPLIT_LANGS = frozenset({"de"})


@functools.cache
def _moses_tokenizer(lang: str):
    """One Moses tokenizer per language: building one takes ~0.5 ms."""
    import sacremoses

    return sacremoses.MosesTokenizer(lang=lang)


def paper_tokenize(text: str, lang: str) -> str:
    """The tokenization behind the paper's Table 2 BLEU.

    The Moses tokenizer for `lang` (sacremoses, the Python port of
    `tokenizer.perl -l <lang>`); for German (`lang="de"`) then
    tensor2tensor's `get_ende_bleu.sh` compound splitting,
    `s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g`. Other languages keep their
    hyphenated words whole, as plain `multi-bleu.perl` scoring does.

    Args:
        text: a detokenized sentence.
        lang: its language code, e.g. "de", "fr" or "de-CH"; only its
            primary subtag counts, case-insensitively.

    Returns:
        The tokens joined by single spaces.
    """
    lang = primary_language(lang)
    tokens = _moses_tokenizer(lang).tokenize(
        text, return_str=True, escape=False
    )
    if lang not in _COMPOUND_SPLIT_LANGS:
        return tokens
    return _COMPOUND_HYPHEN.sub(r"\1 ##AT##-##AT## \2", tokens)


def tokenized_bleu_signature(lang: str) -> str:
    """What `tokenized_bleu` computes for `lang`, to print beside it.

    Returns:
        E.g. "moses-de+compound-split|multi-bleu" for German (also for
        "de-CH": it names the tokenizer used), "moses-fr|multi-bleu" for
        French.
    """
    lang = primary_language(lang)
    split = "+compound-split" if lang in _COMPOUND_SPLIT_LANGS else ""
    return f"moses-{lang}{split}|multi-bleu"


def tokenized_bleu(
    hypotheses: Sequence[str], references: Sequence[str], lang: str
) -> float:
    """Case-sensitive BLEU on `paper_tokenize`d text, like multi-bleu.perl.

    As multi-bleu.perl: split on spaces only, and no smoothing, so a corpus
    without a matching 4-gram scores 0.

    Args:
        hypotheses: detokenized translations.
        references: one detokenized reference for each.
        lang: the target language (German alone gets compounds split).

    Returns:
        BLEU in [0, 100].

    Raises:
        TypeError: as `score`.
    """
    hypotheses = _sentences(hypotheses, "hypotheses")
    references = _sentences(references, "references")
    bleu = sacrebleu.metrics.BLEU(
        tokenize="none", smooth_method="none", force=True
    )
    return bleu.corpus_score(
        [paper_tokenize(h, lang) for h in hypotheses],
        [[paper_tokenize(r, lang) for r in references]],
    ).score


@dataclasses.dataclass(frozen=True)
class Perplexity:
    """Perplexity of references under a model, per subword token.

    Attributes:
        perplexity: exp of the mean negative log-likelihood of the scored
            target tokens (EOS included, no label smoothing): Table 3's
            "PPL (dev)", per wordpiece.
        num_tokens: target tokens scored, EOS included.
        stats: which pairs were scored (`data.pipeline.DataStats`): pairs
            with an empty side, or a side longer than the model's
            `max_length` - 1 tokens, are left out and counted there.
    """

    perplexity: float
    num_tokens: int
    stats: pipeline.DataStats


def perplexity(
    model,
    tokenizer,
    sources: Sequence[str],
    references: Sequence[str],
    batch_tokens: int = 4096,
) -> Perplexity:
    """The per-token perplexity of `references` given `sources`.

    Teacher-forced, as in training: the batches are the training
    pipeline's (`batching.token_batches`, in order), and each target token
    is predicted from the source and the reference tokens before it.

    Args:
        model: a `keras_transformer.Transformer`.
        tokenizer: its `SubwordTokenizer`.
        sources: source sentences.
        references: their reference translations, as many.
        batch_tokens: padded tokens per batch and side (the logits of a
            batch are `batch_tokens` x the vocabulary size floats), raised
            to the model's `max_length` if below it, so that the longest
            pair fits in a batch.

    Returns:
        A `Perplexity`.

    Raises:
        ValueError: if the lists differ in length, or no pair can be scored.
    """
    return PerplexityScorer(
        model, tokenizer, sources, references, batch_tokens
    )()


class PerplexityScorer:
    """`perplexity` of fixed pairs, again and again as the weights change
    (a dev set during training): the pairs are tokenized and batched once,
    and the model's loss is traced once, at the first call.

    Args:
        As `perplexity`'s.

    Attributes:
        stats: which pairs are scored (`Perplexity.stats`).

    Call returns:
        A `Perplexity` under the model's current weights.

    Raises:
        ValueError: as `perplexity`, when constructed.
    """

    def __init__(
        self,
        model,
        tokenizer,
        sources: Sequence[str],
        references: Sequence[str],
        batch_tokens: int = 4096,
    ):
        if len(sources) != len(references):
            raise ValueError(
                "Perplexity needs as many references as sources. Received: "
                f"len(sources)={len(sources)}, "
                f"len(references)={len(references)}"
            )
        max_length = model.config.max_length
        source_ids, target_ids = pipeline.tokenize_pairs(
            tf.data.Dataset.from_tensor_slices(
                (list(sources), list(references))
            ),
            tokenizer,
        )
        source_ids, target_ids, self.stats = pipeline.filter_by_length(
            source_ids, target_ids, max_length
        )
        if not self.stats.num_examples:
            raise ValueError(
                "No pair can be scored for perplexity: each has an empty side "
                "or one longer than max_length - 1 tokens. "
                f"{self.stats.describe()}"
            )
        self._batches = batching.token_batches(
            batching.PairsInMemory(source_ids, target_ids),
            max(batch_tokens, max_length),
            max_length,
            shuffle=False,
            deterministic=True,
        )

        # Every batch's shape: traced once.
        @tf.function(input_signature=list(self._batches.element_spec))
        def summed_loss(features, labels):
            logits = model(features, training=False)
            per_token = losses.smoothed_token_losses(labels, logits, 0.0)
            real = tf.cast(labels != tokens.PAD_ID, tf.float64)
            return tf.reduce_sum(tf.cast(per_token, tf.float64) * real)

        self._summed_loss = summed_loss

    def __call__(self) -> Perplexity:
        total = math.fsum(
            float(self._summed_loss(features, labels))
            for features, labels in self._batches
        )
        # Each kept target is scored with its EOS.
        num_tokens = self.stats.target_tokens + self.stats.num_examples
        return Perplexity(
            perplexity=float(np.exp(total / num_tokens)),
            num_tokens=num_tokens,
            stats=self.stats,
        )
