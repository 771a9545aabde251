r"""Translation throughput of a trained model: Python vs its TF Serving export.

  python benchmarks/translate_export.py --model=runs/demo [--batch_sizes=1,8,32]

Where `decode.py` times a fixed-length search on token ids, this times the
real thing on raw text: tokenizer, encoder, beam search (beam 4, alpha 0.6,
EOS on) and detokenizer, through `Translator.translate` in Python and
through the `serving_default` signature of the exported SavedModel
(`<model>/export/transformer`, written by the demo), on the demo corpus's
test sentences. One JSON line per path and batch size, then one line that
says whether both paths gave the same translations.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app, flags

from keras_transformer.commands import define_threads_flag

flags.DEFINE_string("model", "runs/demo", "Training directory of the demo.")
flags.DEFINE_string(
    "export", None, "SavedModel (default: <model>/export/transformer)."
)
flags.DEFINE_list("batch_sizes", ["1", "8", "32"], "Sentences per call.")
flags.DEFINE_integer("num_sentences", 128, "Test sentences translated.")
# As the translate command (keras_transformer/translate.py).
define_threads_flag()
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from keras_transformer import inference
    from keras_transformer.data import sources

    export = FLAGS.export or os.path.join(FLAGS.model, "export", "transformer")
    # As the translate command: before TensorFlow's first op.
    threads = inference.set_decoding_threads(export, FLAGS.intra_op_threads)
    sentences, _ = sources.load_pairs("demo", "test", "en", "de")
    sentences = sentences[: FLAGS.num_sentences]
    paths = {
        "python": inference.load_translator(FLAGS.model),
        "saved_model": inference.load_translator(export),
    }
    outputs = {}
    for batch in map(int, FLAGS.batch_sizes):
        for path, translator in paths.items():
            translator.translate(sentences[:batch], batch)  # Trace once.
            start = time.perf_counter()
            outputs[path, batch] = translator.translate(sentences, batch)
            seconds = time.perf_counter() - start
            words = sum(len(line.split()) for line in outputs[path, batch])
            print(
                json.dumps(
                    {
                        "benchmark": "translate_export",
                        "path": path,
                        "batch": batch,
                        "beam": 4,
                        "intra_op_threads": threads,
                        "sentences": len(sentences),
                        "seconds": round(seconds, 3),
                        "sentences_per_s": round(len(sentences) / seconds, 2),
                        "output_words_per_s": round(words / seconds, 1),
                    }
                ),
                flush=True,
            )
    reference = next(iter(outputs.values()))
    print(
        json.dumps(
            {
                "benchmark": "translate_export",
                "all_paths_identical": all(
                    v == reference for v in outputs.values()
                ),
            }
        )
    )


if __name__ == "__main__":
    app.run(main)
