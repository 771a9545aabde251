"""Keras layers of the Transformer."""

from keras_transformer.layers.attention import (
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from keras_transformer.layers.attention_cache import cache_shape_invariants
from keras_transformer.layers.decoder_layer import TransformerDecoderLayer
from keras_transformer.layers.dropout import Dropout
from keras_transformer.layers.embedding import ScaledEmbedding
from keras_transformer.layers.encoder_layer import TransformerEncoderLayer
from keras_transformer.layers.feed_forward import PositionwiseFeedForward
from keras_transformer.layers.layer_norm import LayerNormalization
from keras_transformer.layers.masks import (
    PaddingMask,
    causal_mask,
    padding_mask,
)
from keras_transformer.layers.positional_encoding import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
)
from keras_transformer.layers.projection import Dense
from keras_transformer.layers.residual import ResidualConnection
from keras_transformer.layers.stacks import (
    TransformerDecoder,
    TransformerEncoder,
)
from keras_transformer.layers.transformer_layer import TransformerLayer
