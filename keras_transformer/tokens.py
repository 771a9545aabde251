"""Special token ids shared by the tokenizer, the model and decoding.

The ids are fixed so that a model, its vocabulary and an exported SavedModel
always agree: padding is 0 (the model builds its masks from `ids != PAD_ID`),
and the decoder input starts with BOS and the labels end with EOS.
"""

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

PAD_PIECE = "<pad>"
UNK_PIECE = "<unk>"
BOS_PIECE = "<s>"
EOS_PIECE = "</s>"

NUM_SPECIAL_TOKENS = 4
# Byte pieces <0x00>..<0xFF> that the tokenizer's `byte_fallback` reserves.
NUM_BYTE_PIECES = 256
# The smallest vocabulary the tokenizer learns: the special ids, the byte
# pieces, sentencepiece's word marker "▁" and one character (a text needs
# one piece per character it covers on top; at 261 sentencepiece fails,
# after reading the whole corpus).
MIN_VOCAB_SIZE = NUM_SPECIAL_TOKENS + NUM_BYTE_PIECES + 2
