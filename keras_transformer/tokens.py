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
