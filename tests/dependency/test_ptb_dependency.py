"""Reader for NLTK's PTB dependency sample (word<TAB>tag<TAB>head)."""
from __future__ import annotations

import pytest

from structattn import settings
from structattn.dependency import ParseError, read_ptb_dependency
from structattn.dependency.ptb_dependency import PTB_TO_UPOS, ptb_to_upos

DEP_DIR = settings.data_dir_candidate() / "ptb_sample_nltk" / "dependency_treebank"

SAMPLE = "Pierre\tNNP\t2\nVinken\tNNP\t3\nsleeps\tVBZ\t0\n.\t.\t3\n\nIt\tPRP\t2\nrains\tVBZ\t0\n"


def test_reads_sentences_with_ids_and_upos(tmp_path):
    path = tmp_path / "wsj_9999.dp"
    path.write_text(SAMPLE, encoding="utf-8")
    first, second = read_ptb_dependency(path)
    assert first.sent_id == "wsj_9999.dp#1" and second.sent_id == "wsj_9999.dp#2"
    assert first.words == ("Pierre", "Vinken", "sleeps", ".")
    assert first.heads == (2, 3, 0, 3)
    assert first.upos == ("PROPN", "PROPN", "VERB", "PUNCT")
    assert first.deprels == ("", "", "", "")


def test_folder_reads_files_in_name_order(tmp_path):
    (tmp_path / "wsj_0002.dp").write_text("b\tNN\t0\n", encoding="utf-8")
    (tmp_path / "wsj_0001.dp").write_text("a\tNN\t0\n\n\n", encoding="utf-8")
    assert [p.sent_id for p in read_ptb_dependency(tmp_path)] == ["wsj_0001.dp#1", "wsj_0002.dp#1"]


@pytest.mark.parametrize("text, message", [
    ("a\tNN\t2\nb\tNN\t0\n\nc\tNN\t2\nd\tNN\t1\n", "wsj_0.dp#2"),         # no root (cycle)
    ("a\tNN\t0\nb\tNN\t0\n", "exactly one root"),
    ("a\tNN\t0\nb\tNN\t9\n", "out of range"),
    ("a\tNN\t0\nb\tNN\tx\n", "line 2"),
    ("a\tNN\t0\nb NN 1\n", "line 2"),
])
def test_errors_name_file_and_sentence(tmp_path, text, message):
    path = tmp_path / "wsj_0.dp"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ParseError, match=message) as info:
        read_ptb_dependency(path)
    assert "wsj_0.dp" in str(info.value)


def test_upos_table():
    assert ptb_to_upos("MD") == "AUX" and ptb_to_upos("PRP$") == "PRON" and ptb_to_upos("-LRB-") == "PUNCT"
    assert ptb_to_upos("NOT-A-TAG") == "X"
    assert set(PTB_TO_UPOS.values()) <= {"ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM",
                                         "PART", "PRON", "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X"}


def test_empty_folder(tmp_path):
    with pytest.raises(ParseError, match="no \\*.dp files"):
        read_ptb_dependency(tmp_path)


@pytest.mark.skipif(not DEP_DIR.exists(), reason=f"PTB dependency sample not found at {DEP_DIR} (set STRUCTATTN_DATA)")
def test_real_sample():
    parses = read_ptb_dependency(DEP_DIR)
    assert len(parses) == 3914
    assert sum(len(p) for p in parses) == 94084
    assert parses[0].sent_id == "wsj_0001.dp#1" and parses[0].words[:2] == ("Pierre", "Vinken")
    # every tag of the sample is in the table; only FW (4) and LS (13) map to X
    assert sum(u == "X" for p in parses for u in p.upos) == 17
