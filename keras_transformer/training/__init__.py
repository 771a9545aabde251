"""Training pieces: schedule, optimizer, loss and metrics."""

from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedTokenAccuracy, Perplexity
from keras_transformer.training.optimizer import (
    FusedAdam,
    transformer_optimizer,
)
from keras_transformer.training.schedule import TransformerSchedule
