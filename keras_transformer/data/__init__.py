"""Data: corpus sources, the shared subword tokenizer and token batching."""

from keras_transformer.data.batching import (
    bucket_lengths,
    distributed_dataset_fn,
    padding_efficiency,
    token_batches,
)
from keras_transformer.data.pipeline import (
    DataStats,
    TrainingBatches,
    filter_by_length,
    load_or_train_tokenizer,
    load_training_batches,
    make_eval_dataset,
    make_training_dataset,
    tokenize_pairs,
)
from keras_transformer.data.sources import (
    SPEC_FORMS,
    DataSpec,
    default_vocab_size,
    load_pairs,
    load_split,
    parse_data_spec,
)
from keras_transformer.data.text_files import (
    read_lines,
    read_parallel_files,
    read_tsv,
)
from keras_transformer.data.tfds_source import load_tfds_split
from keras_transformer.data.tokenizer import (
    SubwordTokenizer,
    train_subword_vocab,
)

__all__ = [
    "SPEC_FORMS",
    "DataSpec",
    "DataStats",
    "SubwordTokenizer",
    "bucket_lengths",
    "default_vocab_size",
    "distributed_dataset_fn",
    "filter_by_length",
    "load_or_train_tokenizer",
    "load_pairs",
    "load_split",
    "load_tfds_split",
    "TrainingBatches",
    "load_training_batches",
    "make_eval_dataset",
    "make_training_dataset",
    "padding_efficiency",
    "parse_data_spec",
    "read_lines",
    "read_parallel_files",
    "read_tsv",
    "token_batches",
    "tokenize_pairs",
    "train_subword_vocab",
]
