"""Decoding: beam search and greedy search over a logits function."""

from keras_transformer.decoding.beam_search import (
    BeamSearchResult,
    beam_search,
    length_penalty,
    max_alpha,
)
from keras_transformer.decoding.greedy import GreedyResult, greedy_search

__all__ = [
    "BeamSearchResult",
    "GreedyResult",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "max_alpha",
]
