"""Installs keras_transformer (distribution name `keras-transformer-nmt`).

The PyPI name `keras-transformer` belongs to an unrelated project, so the
distribution is called `keras-transformer-nmt`; the import name stays
`keras_transformer`.
"""

import pathlib

import setuptools

# Attention plots only (`plot_attention`), so an extra: installed, matplotlib
# is imported by every process that imports TensorFlow (Keras imports pyplot
# when it can): ~28 MiB and ~1 s more in each training, translating or
# serving process.
PLOT_REQUIRES = ["matplotlib>=3.8,<4"]

setuptools.setup(
    name="keras-transformer-nmt",
    version="0.1.0",
    description=(
        'The Transformer of "Attention Is All You Need" as Keras 3 layers, '
        "with training, beam search and a TF Serving export."
    ),
    long_description=(pathlib.Path(__file__).parent / "README.md").read_text(
        encoding="utf-8"
    ),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    packages=setuptools.find_packages(include=["keras_transformer*"]),
    install_requires=[
        "tensorflow>=2.21,<2.22",
        # One minor release: the model's step and the training backup use
        # Keras internals (`Model._loss_tracker`, `_symbolic_build`,
        # `BackupAndRestore._save_model`) that a minor release may change.
        "keras>=3.15,<3.16",
        "tensorflow-text>=2.21,<2.22",
        "tensorflow-datasets>=4.9,<5",
        "sentencepiece>=0.2,<0.3",
        "sacrebleu>=2.4,<3",
        "sacremoses>=0.1,<1",
        "absl-py>=2.1,<3",
        "h5py>=3.10,<4",
        "tensorboard>=2.21,<2.22",
        # The export's TF Serving warmup requests (PredictionLog protos).
        "tensorflow-serving-api>=2.21,<2.22",
        "numpy>=1.26,<3",
    ],
    # The commands, also as `python -m keras_transformer.<module>`.
    entry_points={
        "console_scripts": [
            "keras-transformer-train = keras_transformer.train:run",
            "keras-transformer-export = keras_transformer.export_model:run",
            "keras-transformer-translate = keras_transformer.translate:run",
            "keras-transformer-evaluate = keras_transformer.evaluate:run",
            "keras-transformer-average-checkpoints = "
            "keras_transformer.average_checkpoints:run",
            "keras-transformer-demo = keras_transformer.demo:run",
            "keras-transformer-plot-attention = "
            "keras_transformer.plot_attention:run",
        ],
    },
    extras_require={
        "plot": PLOT_REQUIRES,
        "test": [
            *PLOT_REQUIRES,
            # pytest 9.2's node ids drop pytest-xdist 3.8's loadgroup suffix,
            # so its xdist_group marks are silently ignored
            # (pytest-dev/pytest-xdist#1386): tests/conftest.py checks.
            "pytest>=8,<9.2",
            "pytest-timeout>=2.3,<3",
            "pytest-xdist>=3.5,<4",
            "ruff>=0.6",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    license="Apache-2.0",
    license_files=["LICENSE"],
)
