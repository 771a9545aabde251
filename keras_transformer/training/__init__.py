"""Training pieces: schedule, optimizer, loss and metrics."""

from keras_transformer.training.losses import LabelSmoothedCrossEntropy
from keras_transformer.training.metrics import MaskedTokenAccuracy
from keras_transformer.training.metrics import Perplexity
from keras_transformer.training.schedule import TransformerSchedule
from keras_transformer.training.schedule import transformer_optimizer
