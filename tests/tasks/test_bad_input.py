"""Bad input: every reader raises UserError naming the file and line, and writes nothing."""
from __future__ import annotations

import re

import pytest

from structattn.errors import UserError
from structattn.tasks import get_task
from tasks_testutil import write

SST = "sst2/train.tsv"
STS = "glue_other/STS-B/dev.tsv"
STS_HEAD = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
STS_ROW = "0\tg\tf\t2012\t1\tnone\tnone\tA b.\tA c.\t{}\n"
NER = "conll2003/train.txt"
FCE = "fce/multiged2023_bea_split/en_fce_dev.tsv"
UD = "ud_english_ewt/en_ewt-ud-test.conllu"
UD_OK = "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n"
LATIN1 = "caf\u00e9".encode("latin-1")  # b"caf\xe9": not UTF-8

# (task, split, file, content, line in the message or None, regex the message must match)
CASES = [
    # GLUE tsv
    ("sst2", "train", SST, "sentence\tlabel\ngood\t1\na good film\n", 3, r"missing column\(s\): 1 tab-separated fields, expected 2"),
    ("sst2", "train", SST, "sentence\tlabel\ngood\t1\tx\n", 2, r"too many columns"),
    ("sst2", "train", SST, "sentence\tlabels\ngood\t1\n", 1, r"header lacks column\(s\) 'label'"),
    ("sst2", "train", SST, "good\t1\nbad\t0\n", 1, r"header lacks column\(s\) 'sentence', 'label'"),
    ("sst2", "train", SST, "sentence\tlabel\ngood\t1\nbad\tpositive\n", 3, r"unknown label 'positive' in column 'label' \(expected one of '0', '1'\)"),
    ("sst2", "train", SST, "sentence\tlabel\ngood\t1\n\nbad\t0\n", 3, r"empty line inside the file"),
    ("sst2", "train", SST, "sentence\tlabel\ngood\t1\n  \t\nbad\t0\n", 3, r"empty line inside the file"),
    ("sst2", "train", SST, "sentence\tlabel\n \t1\n", 2, r"column 'sentence' is empty"),
    ("sst2", "train", SST, b"sentence\tlabel\ngood\t1\n" + LATIN1 + b"\t0\n", 3, r"not valid UTF-8 \(byte 0xe9"),
    ("sst2", "train", SST, "sentence\tlabel\n", None, r"no examples"),
    ("sst2", "train", SST, "", None, r"file is empty"),
    ("cola", "train", "cola/train.tsv", "gj04\t1\t\tFine.\ngj04\t1\tOops no mark.\n", 2, r"missing column\(s\): 3 tab-separated fields, expected 4"),
    ("cola", "dev", "cola/dev.tsv", "gj04\t1\t\tFine.\ngj04\t*\t\tBad label.\n", 2, r"unknown label '\*'"),
    ("mrpc", "dev", "glue_other/MRPC/dev.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\n1\t1\t2\ta\n", 1, r"header lacks column\(s\) '#2 String'"),
    ("rte", "train", "glue_other/RTE/train.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tneutral\n", 2, r"unknown label 'neutral'.*'entailment', 'not_entailment'"),
    ("stsb", "dev", STS, STS_HEAD + STS_ROW.format("high"), 2, r"column 'score': 'high' is not a number"),
    ("stsb", "dev", STS, STS_HEAD + STS_ROW.format("5.000") + STS_ROW.format("7.5"), 3, r"score '7.5' is outside \[0, 5\]"),
    ("qnli", "dev", "glue_other/QNLI/dev.tsv", "index\tquestion\tsentence\n0\tq?\ts.\n", 1, r"header lacks column\(s\) 'label'"),
    # CoNLL-2003
    ("conll2003", "train", NER, "EU NNP B-NP B-ORG\nrejects VBZ O\n", 2, r"missing column\(s\): 3 fields, expected 4"),
    ("conll2003", "train", NER, "EU NNP B-NP B-ORG\n\nMonday NNP B-NP B-DATE\n", 3, r"unknown NER tag 'B-DATE'"),
    ("conll2003", "train", NER, b"EU NNP B-NP B-ORG\n\n" + LATIN1 + b" NN B-NP O\n", 3, r"not valid UTF-8"),
    # FCE
    ("fce", "dev", FCE, "I\tc\nam\n", 2, r"missing column: 1 tab-separated fields, expected 2"),
    ("fce", "dev", FCE, "I\tc\n\nam\tx\n", 3, r"unknown label 'x' \(expected one of c, i\)"),
    ("fce", "dev", FCE, "I\tc\n\tc\n", 2, r"empty token"),
    ("fce", "dev", FCE, "I\tc\nam\ti\tc\n", 2, r"too many columns"),
    # UD CoNLL-U
    ("ud_pos", "test", UD, "# c\n" + UD_OK + "2\tthere\tthere\tADV\tRB\t_\t1\tadvmod\t_\n", 3, r"missing column\(s\): 9 tab-separated fields, expected 10"),
    ("ud_pos", "test", UD, UD_OK + "\n" + UD_OK.replace("INTJ", "NOUNX"), 3, r"unknown UPOS tag 'NOUNX'"),
    ("ud_pos", "test", UD, UD_OK + UD_OK, 2, r"word id 1 out of order \(expected 2\)"),
    ("ud_pos", "test", UD, UD_OK + UD_OK.replace("1\t", "x\t", 1), 2, r"bad token id 'x'"),
    ("ud_pos", "test", UD, UD_OK + "\n# only a comment\n", 3, r"sentence has no words"),
    ("ud_pos", "test", UD, UD_OK.encode() + b"\n2\t" + LATIN1 + b"\t_\tNOUN\t_\t_\t0\troot\t_\t_\n", 3, r"not valid UTF-8"),
]


@pytest.mark.parametrize("task,split,relative,content,line,pattern", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_bad_input_names_file_and_line(tmp_path, task, split, relative, content, line, pattern):
    path = write(tmp_path, relative, content)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(UserError) as info:
        get_task(task).read(split, data_dir=tmp_path)
    message = str(info.value)
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    assert message.startswith(where), message
    assert re.search(pattern, message), message
    # nothing was written next to the input (readers only read)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_missing_file_says_where_data_is_looked_for(tmp_path):
    with pytest.raises(UserError, match=r"dev\.tsv: file not found.*STRUCTATTN_DATA"):
        get_task("rte").read("dev", data_dir=tmp_path)


def test_folder_instead_of_file(tmp_path):
    (tmp_path / "sst2" / "dev.tsv").mkdir(parents=True)
    with pytest.raises(UserError, match="is not a file"):
        get_task("sst2").read("dev", data_dir=tmp_path)


def test_mixed_encoding_reports_the_bad_line(tmp_path):
    # a UTF-8 file with one line saved as cp1252 further down: the message names that line and byte
    good = "sentence\tlabel\n" + "".join(f"caf\u00e9 {i}\t1\n" for i in range(5))
    bad = "na\u00efve \u201cquote\u201d\t0\n".encode("cp1252")
    path = write(tmp_path, SST, good.encode("utf-8") + bad)
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}:7: not valid UTF-8 \(byte 0xef at byte 3 of the line\)"):
        get_task("sst2").read("train", data_dir=tmp_path)


def test_utf16_file_is_rejected_at_line_1(tmp_path):
    path = write(tmp_path, SST, "sentence\tlabel\ngood\t1\n".encode("utf-16"))
    with pytest.raises(UserError, match=rf"^{re.escape(str(path))}:1: not valid UTF-8"):
        get_task("sst2").read("train", data_dir=tmp_path)


def test_trailing_blank_lines_are_tolerated(tmp_path):
    write(tmp_path, SST, "sentence\tlabel\ngood\t1\n\n\n")
    assert len(get_task("sst2").read("train", data_dir=tmp_path)) == 1
