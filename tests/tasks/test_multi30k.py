"""Multi30k reading: splits, line-count checks, the training filter, and the real files' counts."""
from __future__ import annotations

import pytest
from tasks_testutil import needs, write

from structattn.errors import UserError
from structattn.tasks.multi30k import SPLITS, filter_training_pairs, read_parallel, read_split, split_paths


def test_different_line_counts_name_both_files(tmp_path):
    src = write(tmp_path, "a.en", "one\ntwo\nthree\n")
    tgt = write(tmp_path, "a.de", "eins\nzwei\n")
    with pytest.raises(UserError) as err:
        read_parallel(src, tgt)
    msg = str(err.value)
    assert "a.en has 3 lines" in msg and "a.de has 2" in msg


def test_bad_encoding_names_the_line(tmp_path):
    src = write(tmp_path, "b.en", b"fine\n\xff broken\n")
    with pytest.raises(UserError, match=r"b.en:2: not valid UTF-8"):
        read_parallel(src)


def test_filter_counts_empty_and_long_pairs_and_keeps_line_numbers(tmp_path):
    src = write(tmp_path, "c.en", "a b\n\nc d e f g h\ni\n")
    tgt = write(tmp_path, "c.de", "x\ny\nz\n \n")
    data = read_parallel(src, tgt)
    kept, counts = filter_training_pairs(data, lambda texts: [len(t.split()) + 1 for t in texts], max_tokens=4)
    assert kept.sources == ["a b"] and kept.line_numbers == [1]
    assert (counts.kept, counts.empty, counts.too_long) == (1, 2, 1)
    summary = counts.summary("train")
    assert "kept 1 pairs" in summary and "2 with an empty side" in summary and "1 longer" in summary
    assert "line 2 (empty source)" in summary


def test_nothing_left_after_the_filter_is_an_error(tmp_path):
    data = read_parallel(write(tmp_path, "d.en", "a b c\n"), write(tmp_path, "d.de", "x y z\n"))
    with pytest.raises(UserError, match="no training pair is left"):
        filter_training_pairs(data, lambda texts: [10] * len(texts), max_tokens=4)


def test_unknown_split_lists_the_valid_ones():
    with pytest.raises(UserError, match="valid splits: train, dev, test2016"):
        split_paths("test2019", "/nowhere")


@needs("multi30k/raw/train.en")
def test_real_split_sizes():
    sizes = {split: len(read_split(split)) for split in SPLITS}
    assert sizes == {"train": 29000, "dev": 1014, "test2016": 1000, "test2017": 1000, "test2018": 1071,
                     "mscoco2017": 461}
