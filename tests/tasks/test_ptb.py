"""Penn Treebank reader: parsing, bad input, cleaning, the fixed split, spans and escapes."""
from __future__ import annotations

import re

import pytest

from structattn.errors import UserError
from structattn.tasks import ptb
from structattn.tasks.ptb import Tree, TreebankError
from tasks_testutil import DATA, needs, write


def P(tag: str, word: str) -> Tree:
    return Tree(tag, [], word)


RAW = """( (S
    (NP-SBJ-1 (NNP Vinken) )
    (VP (VBD was)
      (VP (VBN named)
        (NP (-NONE- *-1) )
        (NP=2 (DT a) (NN director) )))
    (. .) ))
((S (NP (PRP It)) (VP (VBD ended))))
"""


# --------------------------------------------------------------------------------------------- reading
def test_parse_trees_any_layout_and_outer_bracket():
    first, second = ptb.parse_trees(RAW)
    assert first.label == "" and len(first.children) == 1 and first.children[0].label == "S"
    assert first.leaves() == ["Vinken", "was", "named", "*-1", "a", "director", "."]
    assert first.tags() == ["NNP", "VBD", "VBN", "-NONE-", "DT", "NN", "."]
    assert second == Tree("", [Tree("S", [Tree("NP", [P("PRP", "It")]), Tree("VP", [P("VBD", "ended")])])])
    # to_string is one line and reads back to the same tree
    line = first.to_string()
    assert "\n" not in line and line.startswith("( (S (NP-SBJ-1 (NNP Vinken)) (VP")
    assert ptb.parse_trees(line) == [first]


def test_plain_tree_without_outer_bracket():
    (t,) = ptb.parse_trees("(S (NP (DT The) (NN cat)) (VP (VBD sat)))")
    assert t.to_string() == "(S (NP (DT The) (NN cat)) (VP (VBD sat)))"
    assert not t.is_preterminal() and t.children[0].children[0].is_preterminal()


# (content, line in the message, regex the message must match)
BAD = [
    ("(S (NP (DT the) (NN cat))\n(VP (VBD sat))))", 2, r"'\)' without a matching '\('"),
    ("(S (NP (DT the)\n  (NN cat))\n", 1, r"'\(' never closed \(unbalanced brackets, 1 open"),
    ("(S (NP (DT a)))\n\n( )\n", 3, r"empty tree '\( \)'"),
    ("(S (NP (DT a)))\n()\n", 2, r"empty tree"),
    ("(S\n (NP (DT the) cat))", 2, r"word 'cat' without a POS tag beside bracketed siblings"),
    ("(S (NP (DT the) (NN cat)))\nstray (S (VB go))", 2, r"text 'stray' outside any bracket"),
    ("(S (NP (DT the cat)))", 1, r"two words 'the' 'cat' under one tag \(DT"),
    ("(S (NP (NN)))", 1, r"\(NN\) has neither a word nor children"),
    ("(S (NP ( (NN cat))))", 1, r"bracket without a label inside a tree"),
    ("(S (NN cat (DT x)))", 1, r"'\(' after the word 'cat'"),
]


@pytest.mark.parametrize("content,line,pattern", BAD, ids=[f"bad-{i}" for i in range(len(BAD))])
def test_bad_tree_file_names_file_and_line(tmp_path, content, line, pattern):
    path = write(tmp_path, "bad.mrg", content)
    with pytest.raises(TreebankError) as info:
        ptb.read_tree_file(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert re.search(pattern, message), message
    assert isinstance(info.value, UserError)


def test_empty_and_non_utf8_files(tmp_path):
    with pytest.raises(UserError, match=r"file is empty"):
        ptb.read_tree_file(write(tmp_path, "empty.mrg", "\n  \n"))
    with pytest.raises(UserError, match=r"latin\.mrg:2: not valid UTF-8"):
        ptb.read_tree_file(write(tmp_path, "latin.mrg", b"(S (NN a))\n(S (NN caf\xe9))\n"))
    with pytest.raises(UserError, match=r"file not found"):
        ptb.read_tree_file(tmp_path / "missing.mrg")


# -------------------------------------------------------------------------------------------- cleaning
@pytest.mark.parametrize("label,stripped", [
    ("NP-SBJ-1", "NP"), ("NP=2", "NP"), ("PP-LOC-CLR", "PP"), ("S-TPC-1", "S"), ("NP", "NP"),
    ("PP-LOC=2", "PP"), ("-NONE-", "-NONE-"), ("-LRB-", "-LRB-"), ("-RRB-", "-RRB-"), ("-LCB-", "-LCB-")])
def test_strip_label(label, stripped):
    assert ptb.strip_label(label) == stripped


def test_clean_tree_removes_traces_empty_constituents_and_function_tags():
    raw = ptb.parse_trees(
        "( (S (NP-SBJ (-NONE- *-1)) (VP (VBD reported) (SBAR (-NONE- 0) (S (-NONE- *T*-2))) "
        "(PRN (-LRB- -LRB-) (NP=2 (NN x)) (-RRB- -RRB-))) (. .)) )")[0]
    expected = Tree("S", [Tree("VP", [P("VBD", "reported"),
                                      Tree("PRN", [P("-LRB-", "-LRB-"), Tree("NP", [P("NN", "x")]),
                                                   P("-RRB-", "-RRB-")])]),
                          P(".", ".")])
    assert ptb.clean_tree(raw) == expected
    assert raw.children[0].children[0].label == "NP-SBJ"  # the input is not modified


def test_clean_tree_outer_bracket_with_several_children_becomes_top():
    raw = ptb.parse_trees("( (NP (NN a)) (. .) )")[0]
    assert ptb.clean_tree(raw) == Tree("TOP", [Tree("NP", [P("NN", "a")]), P(".", ".")])


def test_clean_tree_of_traces_only_raises():
    with pytest.raises(ValueError, match="no words besides empty elements"):
        ptb.clean_tree(ptb.parse_trees("( (S (NP (-NONE- *))) )")[0])


# ----------------------------------------------------------------------------------------------- spans
def test_tree_to_spans_collapses_unary_chains():
    t = ptb.parse_trees("(S (NP (PRP We)) (VP (VBD won) (NP (NP (CD two)))) (. .))")[0]
    words, tags, spans = ptb.tree_to_spans(t)
    assert words == ["We", "won", "two", "."] and tags == ["PRP", "VBD", "CD", "."]
    # S(0,4); NP over "We" (preterminal below it is not a span); VP(1,3); NP->NP chain over "two"
    assert spans == [(0, 4, "S"), (0, 1, "NP"), (1, 3, "VP"), (2, 3, "NP::NP")]
    assert ptb.spans_to_tree(words, tags, spans) == t
    assert ptb.spans_to_tree(words, tags, list(reversed(spans))) == t  # order does not matter


def test_root_unary_chain():
    t = ptb.parse_trees("(S (VP (VB Go) (. !)))")[0]
    assert ptb.tree_to_spans(t)[2] == [(0, 2, "S::VP")]
    assert ptb.spans_to_tree(*ptb.tree_to_spans(t)) == t


def test_spans_to_tree_hangs_uncovered_words_and_adds_top():
    words, tags = ["a", "b", "c"], ["X", "Y", "Z"]
    assert ptb.spans_to_tree(words, tags, [(0, 2, "NP")]) == Tree(
        "TOP", [Tree("NP", [P("X", "a"), P("Y", "b")]), P("Z", "c")])
    assert ptb.spans_to_tree(words, tags, []) == Tree("TOP", [P("X", "a"), P("Y", "b"), P("Z", "c")])
    assert ptb.spans_to_tree(words, tags, [(0, 3, "S"), (1, 2, "VP")]) == Tree(
        "S", [P("X", "a"), Tree("VP", [P("Y", "b")]), P("Z", "c")])


@pytest.mark.parametrize("spans,pattern", [
    ([(0, 3, "S"), (0, 2, "A"), (1, 3, "B")], r"crosses"),
    ([(0, 3, "S"), (1, 1, "A")], r"outside 0..3 or empty"),
    ([(0, 4, "S")], r"outside"),
    ([(0, 3, "S"), (0, 2, "A"), (0, 2, "B")], r"given twice"),
    ([(0, 3, "")], r"empty label"),
    ([(0, 3, "S::")], r"empty label"),
])
def test_spans_to_tree_rejects_bad_spans(spans, pattern):
    with pytest.raises(ValueError, match=pattern):
        ptb.spans_to_tree(["a", "b", "c"], ["X", "Y", "Z"], spans)


# --------------------------------------------------------------------------------------------- escapes
def test_escapes_round_trip():
    for token in ["-LRB-", "-RRB-", "-LCB-", "-RCB-", "-LSB-", "-RSB-", "1\\/2", "\\*", "cat", "Macmillan\\/McGraw"]:
        assert ptb.escape_word(ptb.unescape_word(token)) == token
    assert ptb.unescape_word("``") == '"' and ptb.unescape_word("''") == '"'
    assert ptb.unescape_word("3\\/4") == "3/4"
    assert ptb.escape_word("(") == "-LRB-" and ptb.escape_word("f(x)") == "f-LRB-x-RRB-"
    assert ptb.escape_word('"') == '"'


# ------------------------------------------------------------------------------------------------ data
def test_unknown_split_and_missing_data(tmp_path):
    with pytest.raises(UserError, match=r"unknown PTB split 'valid'; expected one of train, dev, test"):
        ptb.split_files("valid", tmp_path)
    with pytest.raises(UserError, match=r"Penn Treebank sample not found.*STRUCTATTN_DATA"):
        ptb.read_split("dev", tmp_path)
    (tmp_path / ptb.PTB_SUBDIR).mkdir(parents=True)
    write(tmp_path, str(ptb.PTB_SUBDIR / "wsj_0140.mrg"), "(S (NN a))")
    with pytest.raises(UserError, match=r"19 file\(s\) of the dev split missing \(wsj_0141.mrg"):
        ptb.read_split("dev", tmp_path)


@needs(str(ptb.PTB_SUBDIR / "wsj_0199.mrg"))
def test_split_sizes_cleaning_and_span_round_trip():
    assert len(sorted((DATA / ptb.PTB_SUBDIR).glob("wsj_*.mrg"))) == 199
    sizes = {}
    for split in ("train", "dev", "test"):
        raw = ptb.read_split(split, DATA, clean=False)
        cleaned = [ptb.clean_tree(r) for r in raw]
        if split == "dev":
            assert ptb.read_split(split, DATA) == cleaned
        sizes[split] = (len(raw), len(cleaned))
        assert len(ptb.split_files(split, DATA)) == ptb.PTB_SPLIT[split][1] - ptb.PTB_SPLIT[split][0] + 1
        for c in cleaned:
            assert "-NONE-" not in c.tags() and c.label != ""
            assert ptb.spans_to_tree(*ptb.tree_to_spans(c)) == c
    # every tree survives cleaning: none consists of empty elements only
    assert sizes == {"train": (3068, 3068), "dev": (328, 328), "test": (518, 518)}
    assert sum(n for n, _ in sizes.values()) == 3914
    assert {k: v[0] for k, v in sizes.items()} == ptb.PTB_SPLIT_SIZES


@needs(str(ptb.PTB_SUBDIR / "wsj_0001.mrg"))
def test_first_tree_of_the_treebank():
    (first, second) = ptb.read_tree_file(DATA / ptb.PTB_SUBDIR / "wsj_0001.mrg")
    assert first.leaves()[:4] == ["Pierre", "Vinken", ",", "61"]
    assert ptb.clean_tree(second).to_string() == (
        "(S (NP (NNP Mr.) (NNP Vinken)) (VP (VBZ is) (NP (NP (NN chairman)) (PP (IN of) (NP (NP (NNP Elsevier) "
        "(NNP N.V.)) (, ,) (NP (DT the) (NNP Dutch) (VBG publishing) (NN group)))))) (. .))")
