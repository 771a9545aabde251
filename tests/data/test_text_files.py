"""Tests of the validating plain-text corpus readers."""

import bz2
import gzip
import lzma
import os
import time

from absl.testing import parameterized

from keras_transformer.data import text_files
from tests import test_case
from tests.data import fixtures


class TextFilesTest(test_case.TestCase):
    def write(self, name, content):
        path = os.path.join(fixtures.tempdir(self), name)
        return fixtures.write(path, content)

    def test_read_lines_strips_line_ends_and_keeps_unicode_separators(self):
        # U+2028 and form feeds are not line ends in a corpus: splitting on
        # them (as str.splitlines does) would misalign parallel files.
        path = self.write("a.en", "one\r\ntwo\u2028half\n\x0cthree \n")
        self.assertEqual(
            text_files.read_lines(path), ["one", "two\u2028half", "three"]
        )

    def test_read_lines_without_final_newline(self):
        path = self.write("a.en", "one\ntwo")
        self.assertEqual(text_files.read_lines(path), ["one", "two"])

    def test_read_lines_keeps_blank_lines_for_counting(self):
        path = self.write("a.en", "one\n\nthree\n")
        self.assertEqual(text_files.read_lines(path), ["one", "", "three"])
        # A blank last line (e.g. an empty translation) too, as stdin and TSV.
        text = "one\ntwo\n\n"
        path = self.write("b.en", text)
        self.assertEqual(text_files.read_lines(path), ["one", "two", ""])
        self.assertEqual(
            text_files.split_lines(text.encode(), "standard input"),
            ["one", "two", ""],
        )

    def test_read_parallel_files(self):
        source = self.write("train.en", "Hello .\nGood night .\n")
        target = self.write("train.de", "Hallo .\nGute Nacht .\n")
        sources, targets = text_files.read_parallel_files(source, target)
        self.assertEqual(sources, ["Hello .", "Good night ."])
        self.assertEqual(targets, ["Hallo .", "Gute Nacht ."])

    def test_different_line_counts_name_both_files(self):
        source = self.write("train.en", "a\nb\nc\n")
        target = self.write("train.de", "a\nb\n")
        with self.assertRaisesRegex(
            ValueError,
            "train.de has 2 lines but train.en has 3 lines; parallel files "
            "must be line-aligned.*Received: source_path=",
        ):
            text_files.read_parallel_files(source, target)

    def test_empty_file(self):
        path = self.write("train.de", "\n  \n")
        with self.assertRaisesRegex(
            ValueError, f"Text corpus file {path} is empty.*Received: path="
        ):
            text_files.read_lines(path)

    def test_invalid_utf8_names_file_and_line(self):
        path = self.write("train.de", "gut\nschön\n".encode() + b"sch\xf6n\n")
        with self.assertRaisesRegex(
            ValueError,
            f"invalid UTF-8 in {path} line 3: "
            "byte .*iconv.*Received: path=.*line=3",
        ):
            text_files.read_lines(path)

    def test_split_lines_reads_bytes_as_files_are_read(self):
        # Standard input: split on "\n" only (U+2028 and form feeds stay),
        # stripped, checked UTF-8; no data is no lines.
        data = "one\u2028two\nthree\x0cfour\n  five \r\n".encode()
        self.assertEqual(
            text_files.split_lines(data, "standard input"),
            ["one\u2028two", "three\x0cfour", "five"],
        )
        self.assertEqual(text_files.split_lines(b"", "standard input"), [])
        self.assertEqual(text_files.split_lines(b"\n", "standard input"), [""])
        with self.assertRaisesRegex(
            ValueError,
            "invalid UTF-8 in standard input line 2: .*"
            "Received: input=standard input, line=2",
        ):
            text_files.split_lines(b"a\nHi \xff\n", "standard input")

    def test_old_mac_line_ends_are_an_error_not_one_line(self):
        # Split on "\n" alone, both files would be one joined pair.
        source = self.write("train.en", "Hello .\rBye .\r")
        target = self.write("train.de", "Hallo .\rTschüss .\r")
        with self.assertRaisesRegex(
            ValueError,
            f"{source} line 1 holds a carriage return \\(\\\\r\\) that does "
            r"not end a \\r\\n line.*old Mac line ends.*tr '\\r' '\\n'.*"
            f"Received: path={source}, line=1",
        ):
            text_files.read_parallel_files(source, target)

    def test_stray_carriage_return_inside_a_line_names_the_line(self):
        path = self.write("train.de", "eins\nzwei\rdrei\nvier\n")
        with self.assertRaisesRegex(
            ValueError, f"{path} line 2 holds a carriage return.*line=2"
        ):
            text_files.read_lines(path)
        path = self.write("train.tsv", "a\tb\nc\td\re\n")
        with self.assertRaisesRegex(
            ValueError, f"{path} line 2 holds a carriage return.*line=2"
        ):
            text_files.read_tsv(path)
        with self.assertRaisesRegex(
            ValueError,
            "standard input line 1 holds a carriage return.*"
            "Received: input=standard input, line=1",
        ):
            text_files.split_lines(b"one\rtwo\n", "standard input")

    def test_carriage_returns_that_end_a_line_are_line_ends(self):
        # "\r\r\n" is what converting a "\r\n" file twice leaves.
        path = self.write("a.en", "one\r\ntwo\r\r\n\r\nfour")
        self.assertEqual(
            text_files.read_lines(path), ["one", "two", "", "four"]
        )

    def test_utf8_byte_order_mark_is_dropped(self):
        # Kept, it would make the first reference differ from its hypothesis.
        source = self.write("train.en", "\ufeffHello .\nBye .\n")
        target = self.write("train.de", "\ufeffHallo .\nTschüss .\n")
        self.assertEqual(
            text_files.read_parallel_files(source, target),
            (["Hello .", "Bye ."], ["Hallo .", "Tschüss ."]),
        )
        path = self.write("train.tsv", "\ufeffHello .\tHallo .\n")
        self.assertEqual(text_files.read_tsv(path), (["Hello ."], ["Hallo ."]))
        # Each field's surrounding spaces go, as a text corpus's lines' do.
        path = self.write("spaces.tsv", " Hello . \t Hallo . \n")
        self.assertEqual(text_files.read_tsv(path), (["Hello ."], ["Hallo ."]))
        self.assertEqual(
            text_files.split_lines("\ufeffone\n".encode(), "standard input"),
            ["one"],
        )
        # Only the leading mark: U+FEFF later in the text is text.
        self.assertEqual(
            text_files.split_lines("\ufeff\ufeffa".encode(), "standard input"),
            ["\ufeffa"],
        )

    def test_byte_order_mark_alone_is_an_empty_file(self):
        path = self.write("train.de", "\ufeff\n")
        with self.assertRaisesRegex(
            ValueError, f"Text corpus file {path} is empty.*Received: path="
        ):
            text_files.read_lines(path)
        # A command's file of sentences too (it read as no sentence).
        path = self.write("input.en", "\ufeff")
        with self.assertRaisesRegex(
            ValueError, f"The --src file {path} is empty.*Received: src={path}"
        ):
            text_files.read_sentences(path, "src")

    def test_a_commands_file_of_sentences_is_named_by_its_flag(self):
        path = self.write("src.en", b"gut\nsch\xf6n\n")
        with self.assertRaisesRegex(
            ValueError,
            f"invalid UTF-8 in {path} line 2.*Received: src={path}, line=2",
        ):
            text_files.read_sentences(path, "src")

    def test_invalid_utf8_after_a_byte_order_mark_names_the_line(self):
        path = self.write("train.de", "\ufeffgut\n".encode() + b"sch\xf6n\n")
        with self.assertRaisesRegex(
            ValueError, f"invalid UTF-8 in {path} line 2: byte b'\\\\xf6'"
        ):
            text_files.read_lines(path)

    @parameterized.parameters(
        ("utf-16", "UTF-16", b""),
        ("utf-16-be", "UTF-16", b"\xfe\xff"),
        # The UTF-32-LE mark starts with the UTF-16-LE one.
        ("utf-32", "UTF-32", b""),
        ("utf-32-be", "UTF-32", b"\x00\x00\xfe\xff"),
    )
    def test_utf16_and_utf32_are_named_with_the_conversion(
        self, encoding, name, mark
    ):
        path = self.write("train.en", mark + "Hello .\n".encode(encoding))
        with self.assertRaisesRegex(
            ValueError,
            f"{path} is {name} .*not UTF-8.*iconv -f {name} -t UTF-8.*"
            f"Received: path={path}$",
        ):
            text_files.read_lines(path)

    @parameterized.parameters("utf-16-le", "utf-16-be", "utf-32-le")
    def test_utf16_and_utf32_without_a_mark_are_errors(self, encoding):
        # ASCII in these is valid UTF-8 with zero bytes between the
        # characters: it used to load as sentences of NULs, plus a line.
        path = self.write("train.en", "Hello .\nGood day .\n".encode(encoding))
        with self.assertRaisesRegex(
            ValueError,
            f"{path} line 1 holds a zero byte.*UTF-16 or UTF-32 without a "
            f"byte-order mark.*iconv -f UTF-16LE -t UTF-8.*Received: "
            f"path={path}, line=1$",
        ):
            text_files.read_lines(path)
        # Standard input (the translate command) alike, at the NUL's line.
        with self.assertRaisesRegex(
            ValueError, "standard input line 2 holds a zero"
        ):
            text_files.split_lines(b"one\ntw\x00o\n", "standard input")

    def test_directory_is_named_not_a_traceback(self):
        folder = fixtures.tempdir(self)
        with self.assertRaisesRegex(
            ValueError,
            f"Text corpus file {folder} is a directory, not a file.*"
            f"tsv:PATH/train.tsv.*Received: path={folder}$",
        ):
            text_files.read_tsv(folder)

    def test_unreadable_path_gives_the_reason(self):
        # A filesystem TensorFlow lacks: the read fails with an OpError.
        path = "nosuchfs://bucket/train.en"
        with self.assertRaisesRegex(
            ValueError,
            f"Text corpus file {path} cannot be read \\(.*nosuchfs.*not "
            f"implemented.*\\).*Received: path={path}$",
        ):
            text_files.read_lines(path)

    def test_missing_file(self):
        path = os.path.join(fixtures.tempdir(self), "train.fr")
        with self.assertRaisesRegex(
            FileNotFoundError,
            f"Text corpus file {path} does not exist.*"
            "PREFIX.SRC_LANG.*Received: path=",
        ):
            text_files.read_parallel_files(path, path)

    @parameterized.parameters(
        (gzip.compress, ".gz", "gzip", "gunzip"),
        (bz2.compress, ".bz2", "bzip2", "bunzip2"),
        (lzma.compress, ".xz", "xz", "unxz"),
    )
    def test_compressed_files_are_named_with_the_tool(
        self, compress, extension, compression, tool
    ):
        # Their bytes are invalid UTF-8 (the advice was another encoding) or,
        # by chance, valid UTF-8 garbage.
        text = b"Hello .\nGood day .\n"
        path = self.write("train.en" + extension, compress(text))
        with self.assertRaisesRegex(
            ValueError,
            f"^{path} is {compression}-compressed, not text; decompress it "
            f"first \\(e.g. `{tool} -k {path}`\\). Received: path={path}$",
        ):
            text_files.read_lines(path)
        # `text:PREFIX` names the decompressed file: the compressed one is
        # pointed out.
        plain = path.removesuffix(extension)
        with self.assertRaisesRegex(
            FileNotFoundError,
            f"{plain} does not exist. {path} exists: decompress it first",
        ):
            text_files.read_parallel_files(plain, plain)

    def test_read_tsv_keeps_an_empty_target_field(self):
        path = self.write("train.tsv", "Hello .\tHallo .\r\nBye .\t\n")
        self.assertEqual(
            text_files.read_tsv(path), (["Hello .", "Bye ."], ["Hallo .", ""])
        )

    def test_blank_tsv_lines_are_empty_pairs(self):
        path = self.write(
            "train.tsv", "Hello .\tHallo .\n \nBye .\tTschüss .\n\n"
        )
        self.assertEqual(
            text_files.read_tsv(path),
            (["Hello .", "", "Bye .", ""], ["Hallo .", "", "Tschüss .", ""]),
        )

    def test_tsv_line_with_wrong_field_count(self):
        path = self.write("train.tsv", "a\tb\nc\td\te\n")
        with self.assertRaisesRegex(
            ValueError,
            f"{path} line 2 has 3 tab-separated field\\(s\\) but a TSV corpus "
            "line needs exactly 2.*Received: path=.*line=2",
        ):
            text_files.read_tsv(path)

    def test_reading_is_fast(self):
        # Tens of thousands of lines read in milliseconds; the bound is loose
        # so that a busy shared machine cannot make the test flaky.
        lines = "".join(f"sentence number {i} .\n" for i in range(50000))
        source = self.write("big.en", lines)
        target = self.write("big.de", lines)
        start = time.perf_counter()
        sources, targets = text_files.read_parallel_files(source, target)
        self.assertLess(time.perf_counter() - start, 2.0)
        self.assertLen(sources, 50000)
        self.assertEqual(targets[-1], "sentence number 49999 .")


# The first bytes of a zstd frame (magic number, frame header).
_ZSTD = b"\x28\xb5\x2f\xfd\x24\x13\x99\x00\x00"


class CompressionSignatureTest(test_case.TestCase):
    def write(self, name, content):
        path = os.path.join(fixtures.tempdir(self), name)
        return fixtures.write(path, content)

    def test_zstd_is_named_with_its_tool(self):
        path = self.write("train.en.zst", _ZSTD + b"Hello .\n")
        with self.assertRaisesRegex(
            ValueError,
            f"^{path} is zstd-compressed, not text; decompress it first "
            f"\\(e.g. `unzstd -k {path}`\\). Received: path={path}$",
        ):
            text_files.read_lines(path)

    def test_text_that_starts_like_a_signature_is_text(self):
        # "BZh" alone is no bzip2 signature (it goes on "1AY&SY" after the
        # block size): a sentence may start so.
        path = self.write("train.en", "BZh9 is a code .\nHello .\n")
        self.assertEqual(
            text_files.read_lines(path), ["BZh9 is a code .", "Hello ."]
        )
