"""Trains a Transformer; see `keras_transformer/train.py` for the flags.

python train.py --preset=tiny --data=demo --model_dir=runs/tiny
"""

from absl import app, flags

from keras_transformer import train

if __name__ == "__main__":
    train.define_flags()
    # --help and --helpshort list the main module's key flags: the training
    # flags are keras_transformer.train's, so make them this one's too.
    flags.adopt_module_key_flags(train)
    app.run(train.main)
