"""Tests of the validating plain-text corpus readers."""

import os
import time

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
        self.assertEqual(text_files.read_lines(path), ["one", "two\u2028half", "three"])

    def test_read_lines_without_final_newline(self):
        path = self.write("a.en", "one\ntwo")
        self.assertEqual(text_files.read_lines(path), ["one", "two"])

    def test_read_lines_keeps_blank_lines_for_counting(self):
        path = self.write("a.en", "one\n\nthree\n")
        self.assertEqual(text_files.read_lines(path), ["one", "", "three"])

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
            f"invalid UTF-8 in {path} line 3: byte .*iconv.*Received: path=.*line=3",
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

    def test_missing_file(self):
        path = os.path.join(fixtures.tempdir(self), "train.fr")
        with self.assertRaisesRegex(
            FileNotFoundError,
            f"Text corpus file {path} does not exist.*PREFIX.SRC_LANG.*Received: path=",
        ):
            text_files.read_parallel_files(path, path)

    def test_read_tsv_keeps_an_empty_target_field(self):
        path = self.write("train.tsv", "Hello .\tHallo .\r\nBye .\t\n")
        self.assertEqual(
            text_files.read_tsv(path), (["Hello .", "Bye ."], ["Hallo .", ""])
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
