"""Trains a Transformer; see `keras_transformer/train.py` for the flags.

python train.py --preset=tiny --data=demo --model_dir=runs/tiny
"""

from keras_transformer import train

if __name__ == "__main__":
    train.run()
