"""BLEU and chrF with sacreBLEU, and the paper's tokenized BLEU (Table 2)."""

import dataclasses
import functools
import re
from collections.abc import Sequence

import sacrebleu


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
            `tokenized_bleu`); not comparable across tokenizations. None for
            targets written without spaces between words (Chinese,
            Japanese, Korean), which the Moses tokenizer does not segment.
        num_sentences: number of segments scored.
    """

    bleu: float
    bleu_signature: str
    chrf: float
    chrf_signature: str
    tokenized_bleu: float | None
    num_sentences: int

    def to_json_dict(self) -> dict:
        return {
            "bleu": round(self.bleu, 2),
            "chrf": round(self.chrf, 2),
            "tokenized_bleu": (
                None if self.tokenized_bleu is None else round(self.tokenized_bleu, 2)
            ),
            "signature": self.bleu_signature,
            "chrf_signature": self.chrf_signature,
            "num_sentences": self.num_sentences,
        }


def _bleu(target_lang: str) -> sacrebleu.metrics.BLEU:
    """sacreBLEU's BLEU with its tokenizer for `target_lang`.

    As sacreBLEU chooses for its own test sets: `zh`, `ja-mecab` and
    `ko-mecab` for Chinese, Japanese and Korean targets (13a would leave
    their unspaced sentences whole words), 13a for every other language.

    Raises:
        ValueError: if the tokenizer needs packages that are not installed.
    """
    try:
        return sacrebleu.metrics.BLEU(trg_lang=target_lang)
    except RuntimeError:
        # sacreBLEU's message for a missing MeCab (ja, ko) spans five lines.
        raise ValueError(
            f"BLEU for target language {target_lang} needs an optional "
            "sacreBLEU tokenizer that is not installed; install it with "
            f"pip install 'sacrebleu[{target_lang}]'. "
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


def score(
    hypotheses: Sequence[str], references: Sequence[str], target_lang="de"
) -> Scores:
    """Scores detokenized hypotheses against one reference each.

    BLEU tokenizes as sacreBLEU does for `target_lang` (13a, or its Chinese,
    Japanese and Korean tokenizers; see the signature); chrF works on
    characters and needs no tokenizer.

    Raises:
        ValueError: when the two lists differ in length or are empty, or
            when BLEU for `target_lang` needs packages that are missing.
    """
    hypotheses, references = list(hypotheses), list(references)
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
            tokenized_bleu(hypotheses, references, target_lang) if spaced else None
        ),
        num_sentences=len(hypotheses),
    )


_COMPOUND_HYPHEN = re.compile(r"(\S)-(\S)")


@functools.cache
def _moses_tokenizer(lang: str):
    """One Moses tokenizer per language: building one takes ~0.5 ms."""
    import sacremoses

    return sacremoses.MosesTokenizer(lang=lang)


def paper_tokenize(text: str, lang: str = "de") -> str:
    """The tokenization behind the paper's Table 2 BLEU.

    tensor2tensor's `get_ende_bleu.sh` ran the Moses tokenizer
    (`tokenizer.perl -l de`) and then split hyphenated compounds
    (`s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g`) before `multi-bleu.perl`;
    sacremoses is the Python port of that tokenizer.
    """
    tokens = _moses_tokenizer(lang).tokenize(text, return_str=True, escape=False)
    return _COMPOUND_HYPHEN.sub(r"\1 ##AT##-##AT## \2", tokens)


def tokenized_bleu(
    hypotheses: Sequence[str], references: Sequence[str], lang: str = "de"
) -> float:
    """Case-sensitive BLEU on `paper_tokenize`d text, like multi-bleu.perl.

    As multi-bleu.perl: split on spaces only, and no smoothing, so a corpus
    without a matching 4-gram scores 0.
    """
    bleu = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True)
    return bleu.corpus_score(
        [paper_tokenize(h, lang) for h in hypotheses],
        [[paper_tokenize(r, lang) for r in references]],
    ).score
