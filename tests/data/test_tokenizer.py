"""Tests of BPE vocabulary training and the in-graph SubwordTokenizer."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
from absl.testing import parameterized
from sentencepiece import sentencepiece_model_pb2

from keras_transformer import tokens
from keras_transformer.data import tokenizer as tokenizer_lib
from tests import test_case
from tests.data import fixtures

# Normalised text (NFKC, single spaces): the round trip must be exact,
# including characters the training text never showed (byte fallback).
_NORMALISED = [
    "The cat sleeps on the sofa.",
    "Die Kinder spielen im Garten.",
    "Zoë's café serves 12 crêpes — naïve? ¡Sí! 日本語",
    "",
]


class TrainSubwordVocabTest(test_case.TestCase):
    def test_special_ids_and_pieces_match_tokens_module(self):
        processor = spm.SentencePieceProcessor(model_file=fixtures.model_path())
        self.assertEqual(processor.get_piece_size(), fixtures.VOCAB_SIZE)
        self.assertEqual(
            (
                processor.pad_id(),
                processor.unk_id(),
                processor.bos_id(),
                processor.eos_id(),
            ),
            (tokens.PAD_ID, tokens.UNK_ID, tokens.BOS_ID, tokens.EOS_ID),
        )
        self.assertEqual(
            [processor.id_to_piece(i) for i in range(4)],
            [
                tokens.PAD_PIECE,
                tokens.UNK_PIECE,
                tokens.BOS_PIECE,
                tokens.EOS_PIECE,
            ],
        )

    def test_training_is_deterministic(self):
        folder = fixtures.tempdir(self)
        first = tokenizer_lib.train_subword_vocab(
            fixtures.sentences(), 330, os.path.join(folder, "a")
        )
        second = tokenizer_lib.train_subword_vocab(
            iter(fixtures.sentences()), 330, os.path.join(folder, "b/c")
        )
        self.assertEqual(second, os.path.join(folder, "b/c.model"))
        # The files differ only in the recorded prefix; the pieces agree.
        pieces = [
            [
                (processor.id_to_piece(i), processor.get_score(i))
                for i in range(processor.get_piece_size())
            ]
            for processor in (
                spm.SentencePieceProcessor(model_file=first),
                spm.SentencePieceProcessor(model_file=second),
            )
        ]
        self.assertLen(pieces[0], 330)
        self.assertEqual(pieces[0], pieces[1])

    def learned_markers(self, max_sentences, seed=0):
        """The sentences a vocabulary was learned from, of 300 that each
        have a character of their own: the characters it has pieces for."""
        markers = [chr(0x4E00 + index) for index in range(300)]
        corpus = [
            " ".join(marker * n for n in range(1, 5)) for marker in markers
        ]
        path = tokenizer_lib.train_subword_vocab(
            corpus,
            600,
            os.path.join(fixtures.tempdir(self), "m"),
            max_sentences=max_sentences,
            seed=seed,
        )
        processor = spm.SentencePieceProcessor(model_file=path)
        return {
            character
            for index in range(processor.get_piece_size())
            for character in processor.id_to_piece(index)
            if character in markers
        }

    def test_learns_from_at_most_max_sentences(self):
        self.assertLen(self.learned_markers(max_sentences=101), 101)
        self.assertLen(self.learned_markers(max_sentences=300), 300)

    def test_the_seed_chooses_the_sample(self):
        # sentencepiece's own sampling ignored the seed, and drew another
        # sample in each process: workers learned different vocabularies.
        first = self.learned_markers(max_sentences=150, seed=0)
        self.assertEqual(self.learned_markers(max_sentences=150, seed=0), first)
        self.assertNotEqual(
            self.learned_markers(max_sentences=150, seed=1), first
        )

    def test_sample_is_uniform_seeded_and_skips_what_sentencepiece_would(self):
        corpus = [str(index) for index in range(1000)]
        sample, count = tokenizer_lib._sample_sentences(corpus, 100, seed=3)
        self.assertEqual(count, 1000)
        self.assertLen(set(sample), 100)
        self.assertContainsSubset(sample, corpus)
        self.assertEqual(
            tokenizer_lib._sample_sentences(corpus, 100, 3)[0], sample
        )
        self.assertNotEqual(
            tokenizer_lib._sample_sentences(corpus, 100, 4)[0], sample
        )
        # Not a prefix or a stride: drawn from the whole corpus alike.
        numbers = sorted(int(sentence) for sentence in sample)
        self.assertLess(numbers[0], 100)
        self.assertGreater(numbers[-1], 900)
        self.assertBetween(np.mean(numbers), 350, 650)
        # No more than asked for: all of them, in corpus order; those that
        # sentencepiece would skip are skipped, but counted.
        longest = "x" * tokenizer_lib._MAX_SENTENCE_BYTES
        skipped = [longest + "x", " ", "\u2585 a"]
        self.assertEqual(
            tokenizer_lib._sample_sentences(
                ["a", *skipped, longest], 5, seed=0
            ),
            (["a", longest], 5),
        )

    def test_sampling_arguments_are_checked(self):
        for name, value in (
            ("max_sentences", 0),
            ("seed", None),
            ("seed", 1.5),
        ):
            with (
                self.subTest(name, value=value),
                self.assertRaisesRegex(
                    ValueError, re.escape(f"`{name}` must be")
                ),
            ):
                tokenizer_lib.train_subword_vocab(
                    fixtures.sentences(), 330, "unused", **{name: value}
                )

    @pytest.mark.slow
    def test_two_processes_learn_the_same_sample(self):
        # As the workers of a multi-worker run do, each its own vocabulary.
        code = textwrap.dedent(
            """
            import hashlib, os, sys, tempfile
            from keras_transformer.data import tokenizer
            corpus = [f"s{i} " + " ".join(str(i * j % 97) for j in range(8))
                      for i in range(2000)]
            path = tokenizer.train_subword_vocab(
                corpus, 400, os.path.join(tempfile.mkdtemp(), "m"),
                max_sentences=300)
            print(hashlib.sha256(
                "\\n".join(tokenizer.vocabulary_pieces(path)).encode()).hexdigest())
            """
        )
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", code],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for _ in range(2)
        ]
        digests = [run.communicate(timeout=300)[0].strip() for run in runs]
        self.assertRegex(digests[0], "^[0-9a-f]{64}$")
        self.assertEqual(digests[0], digests[1])

    def test_vocab_larger_than_the_text_supports(self):
        with self.assertRaisesRegex(
            ValueError,
            "`vocab_size` is larger than 48 training sentences support: at "
            r"most \d+ pieces.*Received: vocab_size=37000",
        ):
            tokenizer_lib.train_subword_vocab(
                fixtures.sentences(),
                37000,
                os.path.join(fixtures.tempdir(self), "m"),
            )

    def test_vocab_too_small_for_the_characters(self):
        with self.assertRaisesRegex(
            ValueError,
            r"too small .* it needs at least \d+.*Received: vocab_size=270",
        ):
            tokenizer_lib.train_subword_vocab(
                fixtures.sentences(),
                270,
                os.path.join(fixtures.tempdir(self), "m"),
            )

    def test_vocab_size_below_the_reserved_pieces(self):
        with self.assertRaisesRegex(
            ValueError,
            "`vocab_size` must be an integer >= 262.*Received: vocab_size=100",
        ):
            tokenizer_lib.train_subword_vocab(fixtures.sentences(), 100, "m")

    def test_no_sentences(self):
        with self.assertRaisesRegex(
            ValueError, "`sentences` is empty.*Received: sentences="
        ):
            tokenizer_lib.train_subword_vocab(
                [], 300, os.path.join(fixtures.tempdir(self), "m")
            )

    def test_an_error_of_the_sentences_is_raised_as_it_is(self):
        # Not inside sentencepiece's "INTERNAL: ..." message with its frames.
        class DamagedCorpus(ValueError):
            pass

        def sentences():
            yield from fixtures.sentences()[:5]
            raise DamagedCorpus("the corpus file is damaged")

        with self.assertRaisesRegex(
            DamagedCorpus, "^the corpus file is damaged$"
        ):
            tokenizer_lib.train_subword_vocab(
                sentences(), 300, os.path.join(fixtures.tempdir(self), "m")
            )

    @parameterized.named_parameters(
        ("blank", ["", "  "] * 25),
        ("longer_than_4192_bytes", ["word " * 1000] * 20),
    )
    def test_no_usable_sentence(self, sentences):
        with self.assertRaisesRegex(
            ValueError,
            "`sentences` holds no usable training sentence: all "
            f"{len(sentences)} are blank or longer than 4192 bytes "
            "\\(sentencepiece's max_sentence_length\\).*"
            f"Received: sentences=<{len(sentences)} sentences>",
        ):
            tokenizer_lib.train_subword_vocab(
                sentences, 300, os.path.join(fixtures.tempdir(self), "m")
            )

    def test_same_input_and_seed_write_the_same_bytes(self):
        prefix = os.path.join(fixtures.tempdir(self), "vocab")
        contents = []
        for _ in range(2):
            path = tokenizer_lib.train_subword_vocab(
                fixtures.sentences(), 330, prefix
            )
            with open(path, "rb") as f:
                contents.append(f.read())
        self.assertEqual(contents[0], contents[1])
        # The model records the caller's prefix, not a temporary one.
        model = sentencepiece_model_pb2.ModelProto.FromString(contents[0])
        self.assertEqual(model.trainer_spec.model_prefix, prefix)

    def test_writes_to_tf_io_gfile_paths(self):
        # sentencepiece alone would write ram:// paths to ./ram:/ locally.
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(fixtures.tempdir(self))
        folder = f"ram://{self.id()}/run"
        self.addCleanup(tf.io.gfile.rmtree, folder)
        prefix = f"{folder}/vocab"
        path = tokenizer_lib.train_subword_vocab(
            fixtures.sentences(), 330, prefix
        )
        self.assertEqual(path, prefix + ".model")
        self.assertTrue(tf.io.gfile.exists(prefix + ".vocab"))
        self.assertEqual(
            sorted(tf.io.gfile.listdir(folder)), ["vocab.model", "vocab.vocab"]
        )
        self.assertEqual(
            tokenizer_lib.SubwordTokenizer.from_file(path).vocab_size, 330
        )
        self.assertEqual(os.listdir("."), [])


class SubwordTokenizerTest(test_case.TestCase):
    def test_round_trip_of_normalised_text(self):
        tokenizer = fixtures.tokenizer()
        ids = tokenizer.tokenize(tf.constant(_NORMALISED))
        self.assertIsInstance(ids, tf.RaggedTensor)
        self.assertEqual(ids.dtype, tf.int32)
        self.assertEqual(
            [s.decode() for s in tokenizer.detokenize(ids).numpy()],
            _NORMALISED,
        )

    def test_a_temporary_tokenizer_tokenizes(self):
        # Its tf.functions held it weakly: it was freed during the call
        # ("'NoneType' object has no attribute '_sentencepiece'").
        path = fixtures.model_path()
        ids = tokenizer_lib.SubwordTokenizer.from_file(path).tokenize(
            tf.constant(_NORMALISED)
        )
        self.assertAllEqual(
            ids, fixtures.tokenizer().tokenize(tf.constant(_NORMALISED))
        )
        self.assertAllEqual(
            tokenizer_lib.SubwordTokenizer.from_file(path).detokenize_ids(
                ids.to_tensor()
            ),
            [sentence.encode() for sentence in _NORMALISED],
        )

    def test_tokenize_adds_no_specials_and_stays_in_vocab(self):
        tokenizer = fixtures.tokenizer()
        ids = tokenizer.tokenize(tf.constant(_NORMALISED)).flat_values
        self.assertAllGreaterEqual(ids, tokens.NUM_SPECIAL_TOKENS)
        self.assertAllLess(ids, tokenizer.vocab_size)

    def test_detokenize_stops_at_eos_and_drops_pad_and_bos(self):
        tokenizer = fixtures.tokenizer()
        cat, garden = tokenizer.tokenize(tf.constant(_NORMALISED[:2]))
        cat, garden = list(cat.numpy()), list(garden.numpy())
        padded = max(len(cat), len(garden)) + 5
        rows = [
            [tokens.BOS_ID] + cat + [tokens.EOS_ID] + garden,
            garden + [tokens.EOS_ID],
        ]
        dense = tf.constant(
            [row + [tokens.PAD_ID] * (2 * padded - len(row)) for row in rows]
        )
        self.assertAllEqual(
            tokenizer.detokenize(dense),
            [_NORMALISED[0].encode(), _NORMALISED[1].encode()],
        )
        ragged = tf.ragged.constant(rows, dtype=tf.int64)
        self.assertAllEqual(
            tokenizer.detokenize(ragged), tokenizer.detokenize(dense)
        )

    def test_tokenize_head_is_the_first_ids_of_the_whole_text(self):
        """`tokenize_head` cuts a long text before a space and tokenizes
        that part: its ids must be those of the whole text, and where the
        part holds too few (long words, no spaces, invalid UTF-8 near the
        cut) the whole text is tokenized."""
        tokenizer = fixtures.tokenizer()
        words = " ".join(fixtures.sentences()).split()
        prose = " ".join(words[i % len(words)] for i in range(3000))
        texts = [
            "",
            "The cat sleeps.",
            prose,
            prose[:1999] + "x" * 5000,  # A long word across the cut.
            "x" * 5000,  # No space at all.
            " " * 3000 + prose,  # Spaces only, at first.
            "\t".join(prose.split(" ")),  # Tabs, not spaces.
            ("Grüße 日本語のテキスト " * 300),  # Multi-byte characters.
            prose.encode()[:1500] + b"\xff\xfe" + prose.encode(),
            prose.encode()[:-1] + b"\xc3",  # A truncated character, at the end.
        ]
        for num_tokens in (1, 7, 31, 128):
            whole = tokenizer.tokenize(tf.constant(texts))
            head = tokenizer.tokenize_head(tf.constant(texts), num_tokens)
            self.assertAllEqual(head, whole[:, :num_tokens], num_tokens)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def in_graph(strings):
            return tokenizer.tokenize_head(strings, 31)

        self.assertAllEqual(in_graph(tf.constant(texts)), whole[:, :31])
        # Of a long text, only the beginning is tokenized: cut between
        # characters (not bytes, which would split a multi-byte one and
        # leave invalid UTF-8, tokenized whole) before the last space
        # within 64 characters per id.
        text = "Grüße schön 日本語 " * 2000
        calls = []
        tokenize = tokenizer.tokenize

        def recording(strings):
            calls.append(strings)
            return tokenize(strings)

        tokenizer.tokenize = recording
        head = tokenizer.tokenize_head(tf.constant([text]), 31)
        self.assertLen(calls, 1)
        (cut,) = calls[0].numpy().tolist()
        self.assertEqual(cut.decode(), text[: 64 * 31].rsplit(" ", 1)[0])
        self.assertAllEqual(head, tokenize(tf.constant([text]))[:, :31])

    def test_works_inside_tf_function(self):
        tokenizer = fixtures.tokenizer()

        @tf.function
        def round_trip(strings):
            ids = tokenizer.tokenize(strings).to_tensor()  # [B, L]
            return tokenizer.detokenize(ids)

        self.assertAllEqual(
            round_trip(tf.constant(_NORMALISED)),
            [s.encode() for s in _NORMALISED],
        )

    def test_save_and_from_file(self):
        path = os.path.join(fixtures.tempdir(self), "copy.model")
        fixtures.tokenizer().save(path)
        with open(path, "rb") as copy, open(fixtures.model_path(), "rb") as f:
            self.assertEqual(copy.read(), f.read())
        self.assertEqual(
            tokenizer_lib.SubwordTokenizer.from_file(path).vocab_size,
            fixtures.VOCAB_SIZE,
        )

    @parameterized.parameters(
        ("vocab.vocab", "<pad>\t0\n"), ("vocab.model", "")
    )
    def test_a_file_that_is_not_a_model_is_named(self, name, content):
        path = fixtures.write(
            os.path.join(fixtures.tempdir(self), name), content
        )
        with self.assertRaisesRegex(
            ValueError, f"not a sentencepiece model.*Received: path={path}"
        ):
            tokenizer_lib.SubwordTokenizer.from_file(path)

    def test_missing_model_file(self):
        path = os.path.join(fixtures.tempdir(self), "vocab.model")
        with self.assertRaisesRegex(
            FileNotFoundError,
            f"Sentencepiece model file {path} does not exist. Pass the "
            f"`.model` file written by training.*Received: path={path}$",
        ):
            tokenizer_lib.SubwordTokenizer.from_file(path)

    def test_directory_is_named_not_a_traceback(self):
        folder = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            ValueError,
            f"Sentencepiece model file {folder} is a directory, not a file. "
            f"Pass the `.model` file.*Received: path={folder}$",
        ):
            tokenizer_lib.SubwordTokenizer.from_file(folder)

    def test_rejects_a_model_with_other_special_ids(self):
        prefix = os.path.join(fixtures.tempdir(self), "default_ids")
        # sentencepiece's defaults: <unk>=0, <s>=1, </s>=2, no <pad>.
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(fixtures.sentences()),
            model_prefix=prefix,
            vocab_size=100,
            minloglevel=2,
        )
        with self.assertRaisesRegex(
            ValueError,
            "ids 0-3 must be .*'<pad>', '<unk>', '<s>', '</s>'.*"
            "train_subword_vocab.*Received: specials=",
        ):
            tokenizer_lib.SubwordTokenizer.from_file(prefix + ".model")

    @pytest.mark.slow
    def test_saved_model_runs_in_a_fresh_process(self):
        folder = fixtures.tempdir(self)
        model_file = os.path.join(folder, "bpe.model")
        fixtures.tokenizer().save(model_file)
        module = tf.Module()
        module.tokenizer = tokenizer_lib.SubwordTokenizer.from_file(model_file)
        export_dir = os.path.join(folder, "saved")
        tf.saved_model.save(module, export_dir)
        # The vocabulary must travel inside the SavedModel, not beside it.
        os.remove(model_file)
        script = textwrap.dedent(
            f"""
            import sys
            import tensorflow as tf
            import tensorflow_text  # noqa: F401 (registers the ops)
            loaded = tf.saved_model.load({export_dir!r})
            strings = tf.constant({_NORMALISED!r})
            ids = loaded.tokenizer.tokenize(strings).to_tensor()
            text = loaded.tokenizer.detokenize_ids(ids)
            assert "keras_transformer" not in sys.modules
            print("|".join(s.decode() for s in text.numpy()))
            """
        )
        result = subprocess.run(
            [sys.executable, "-c", script],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
            cwd=folder,
        )
        self.assertEqual(result.returncode, 0, msg=result.stderr)
        self.assertEqual(
            result.stdout.strip().split("\n")[-1], "|".join(_NORMALISED)
        )


class SampleSentencesTest(test_case.TestCase):
    def test_sample_is_uniform_over_the_usable_sentences(self):
        # Blank lines (sentencepiece skips them) between the sentences: the
        # sample is still drawn from all usable sentences alike.
        corpus = [
            line for index in range(1000) for line in ("", str(index), " ")
        ]
        sample, count = tokenizer_lib._sample_sentences(corpus, 100, seed=3)
        self.assertEqual(count, 3000)
        numbers = [int(sentence) for sentence in sample]
        self.assertLen(set(numbers), 100)
        self.assertBetween(np.mean(numbers), 350, 650)
        # As many from the second half as from the first, roughly.
        self.assertBetween(sum(number >= 500 for number in numbers), 35, 65)

    def test_the_byte_limit_counts_utf8_bytes_not_characters(self):
        # sentencepiece skips sentences over 4192 bytes: a sentence of
        # 2-byte characters is skipped from 2097 characters on.
        limit = tokenizer_lib._MAX_SENTENCE_BYTES
        fits, too_long = "ü" * (limit // 2), "ü" * (limit // 2 + 1)
        self.assertEqual(
            tokenizer_lib._sample_sentences(["a", too_long, fits], 5, seed=0),
            (["a", fits], 3),
        )
