"""Exports a trained Transformer for TF Serving; see
`keras_transformer/export_model.py` for the flags (`python -m
keras_transformer.export_model` is the same command, also from an installed
package).

python export/export_model.py --model_dir=runs/demo --export_dir=/models
"""

import os
import sys

# Runs as a script from any directory: the package is the repository root.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_transformer import export_model

if __name__ == "__main__":
    export_model.run()
