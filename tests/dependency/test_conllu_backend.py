"""CoNLL-U reader: multiword tokens and empty nodes skipped, sentence ids, errors naming file/sentence/line."""
from __future__ import annotations

import pytest

from structattn import settings
from structattn.errors import UserError
from structattn.dependency import ParseError, parse_conllu_string, read_conllu

EWT_DEV = settings.data_dir_candidate() / "ud_english_ewt" / "en_ewt-ud-dev.conllu"

MWT_AND_EMPTY = """\
# sent_id = mwt-1
# text = I don't know.
1	I	I	PRON	PRP	_	3	nsubj	_	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	know	know	VERB	VB	_	0	root	_	SpaceAfter=No
5	.	.	PUNCT	.	_	4	punct	_	_

# text = no sent_id here
1	Sue	Sue	PROPN	NNP	_	2	nsubj	_	_
2	likes	like	VERB	VBZ	_	0	root	_	_
3	coffee	coffee	NOUN	NN	_	2	obj	_	_
3.1	likes	like	VERB	VBZ	_	_	_	2:conj	_
4	and	and	CCONJ	CC	_	5	cc	_	_
5	Bill	Bill	PROPN	NNP	_	3	conj	_	_
6	tea	tea	NOUN	NN	_	5	orphan	_	_
"""


def test_multiword_tokens_and_empty_nodes_are_skipped():
    first, second = parse_conllu_string(MWT_AND_EMPTY)
    assert first.sent_id == "mwt-1"
    assert first.words == ("I", "do", "n't", "know", ".")
    # heads refer to integer ids; the 2-3 line does not shift them
    assert first.heads == (3, 4, 4, 0, 4)
    assert first.deprels == ("nsubj", "aux", "advmod", "root", "punct")
    assert first.upos == ("PRON", "AUX", "PART", "VERB", "PUNCT")
    # no sent_id comment: the running number; the 3.1 empty node is not a word
    assert second.sent_id == "2"
    assert second.words == ("Sue", "likes", "coffee", "and", "Bill", "tea")
    assert second.heads == (2, 0, 2, 5, 3, 5)


def _sentence(sent_id: str, rows: list[tuple[str, str]]) -> str:
    lines = [f"# sent_id = {sent_id}"]
    for k, (form, head) in enumerate(rows, start=1):
        lines.append(f"{k}\t{form}\t_\tX\t_\t_\t{head}\tdep\t_\t_")
    return "\n".join(lines) + "\n\n"


GOOD = _sentence("good-1", [("A", "2"), ("b", "0")])


@pytest.mark.parametrize("rows, message", [
    ([("a", "2"), ("b", "3"), ("c", "1")], "exactly one root"),  # a cycle with no root left
    ([("a", "0"), ("b", "3"), ("c", "2")], "cycle"),
    ([("a", "0"), ("b", "0")], "exactly one root"),
    ([("a", "0"), ("b", "7")], "out of range"),
    ([("a", "0"), ("b", "_")], "has no head"),
])
def test_bad_trees_name_source_sentence_and_line(rows, message):
    text = GOOD + _sentence("bad-2", rows)
    with pytest.raises(ParseError, match=message) as info:
        parse_conllu_string(text, source="tiny.conllu")
    msg = str(info.value)
    assert "tiny.conllu" in msg and "bad-2" in msg and "line 5" in msg  # the bad sentence starts on line 5


def test_missing_head_names_the_token_line():
    text = GOOD + _sentence("bad-2", [("a", "0"), ("b", "_")])
    with pytest.raises(ParseError, match="line 7"):  # comment on 5, word 1 on 6, word 2 on 7
        parse_conllu_string(text)


def test_malformed_line_is_a_parse_error():
    text = GOOD + "# sent_id = bad-2\n1\tword\t_\tX\t_\t_\tzero\tdep\t_\t_\n\n"
    with pytest.raises(ParseError, match="line 5"):
        parse_conllu_string(text, source="x.conllu")


def test_read_conllu_from_file_and_blank_lines(tmp_path):
    path = tmp_path / "two.conllu"
    path.write_text("\n\n" + GOOD + "\n\n" + _sentence("s2", [("x", "0")]), encoding="utf-8")
    parses = read_conllu(path)
    assert [p.sent_id for p in parses] == ["good-1", "s2"]
    bad = tmp_path / "bad.conllu"
    bad.write_text(GOOD + _sentence("s2", [("x", "1")]), encoding="utf-8")
    with pytest.raises(ParseError, match=str(bad)):
        read_conllu(bad)


@pytest.mark.skipif(not EWT_DEV.exists(), reason=f"UD English EWT not found at {EWT_DEV} (set STRUCTATTN_DATA)")
def test_real_ewt_dev():
    parses = read_conllu(EWT_DEV)
    assert len(parses) == 2001
    assert sum(len(p) for p in parses) == 25147  # words, without the 359 multiword tokens and 4 empty nodes
    assert len({p.sent_id for p in parses}) == 2001
    assert parses[0].sent_id.startswith("weblog-")


# --- malformed files: every one is a ParseError (a UserError) naming the file and the line ---------------
def _write(tmp_path, name: str, content: bytes):
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_non_utf8_file_names_file_and_line(tmp_path):
    # line 3 holds the Latin-1 byte 0xe9 (é); the lines before it are fine
    path = _write(tmp_path, "latin1.conllu", b"# sent_id = a\n# text = x\n1\tcaf\xe9\t_\tX\t_\t_\t0\troot\t_\t_\n\n")
    with pytest.raises(ParseError, match=r"latin1\.conllu: line 3: not UTF-8") as info:
        read_conllu(path)
    assert "0xe9" in str(info.value)


def test_non_utf8_far_into_a_large_file_names_the_exact_line(tmp_path):
    good = "".join(_sentence(f"s{i}", [("a", "0"), ("b", "1")]) for i in range(2000))  # 8,000 lines
    path = _write(tmp_path, "big.conllu", good.encode() + b"1\t\xff\t_\tX\t_\t_\t0\troot\t_\t_\n")
    with pytest.raises(ParseError, match=r"big\.conllu: line 8001: not UTF-8"):
        read_conllu(path)


@pytest.mark.parametrize("line, columns", [
    ("1\tThe\tthe\tDET", 4),
    ("1\tThe\tthe\tDET\tDT\t_\t0\troot\t_", 9),       # one short: would read as a plausible tree
    ("1\tThe\tthe\tDET\tDT\t_\t0\troot\t_\t_\textra", 11),
])
def test_wrong_number_of_columns_names_file_and_line(tmp_path, line, columns):
    path = _write(tmp_path, "cols.conllu", (GOOD + "# sent_id = c\n" + line + "\n\n").encode())
    with pytest.raises(ParseError, match=rf"cols\.conllu: line 6: {columns} columns") as info:
        read_conllu(path)
    assert "10" in str(info.value)


def test_line_without_any_separator_names_the_line():
    with pytest.raises(ParseError, match=r"x\.conllu: line 5: 1 column,"):
        parse_conllu_string(GOOD + "justoneword\n\n", source="x.conllu")


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_file_without_sentences_is_an_error(tmp_path, content):
    path = _write(tmp_path, "empty.conllu", content)
    with pytest.raises(ParseError, match=r"empty\.conllu: no sentences"):
        read_conllu(path)


def test_block_of_comments_only_is_an_error():
    with pytest.raises(ParseError, match=r"x\.conllu: .*line 5.*no words"):
        parse_conllu_string(GOOD + "# sent_id = lonely\n\n", source="x.conllu")


def test_missing_file_and_folder_are_user_errors(tmp_path):
    with pytest.raises(UserError, match=r"nope\.conllu: no such file"):
        read_conllu(tmp_path / "nope.conllu")
    with pytest.raises(UserError, match=rf"{tmp_path.name}: cannot read"):
        read_conllu(tmp_path)


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    path = _write(tmp_path, "bom.conllu", b"\xef\xbb\xbf" + GOOD.encode())
    assert read_conllu(path)[0].sent_id == "good-1"
