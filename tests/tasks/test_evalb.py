"""EVALB (COLLINS.prm) on hand-worked cases, on output recorded from the C program, and on the treebank."""
from __future__ import annotations

import json

import pytest

from structattn.errors import UserError
from structattn.tasks import evalb as ev
from structattn.tasks import ptb
from tasks_testutil import needs, write


def trees(text: str) -> list[ptb.Tree]:
    return ptb.parse_trees(text)


def score(gold: str, test: str) -> ev.EvalbResult:
    return ev.evalb(trees(gold), trees(test))


def counts(r: ev.EvalbResult) -> tuple[int, int, int]:
    return r.matched, r.gold_brackets, r.test_brackets


# ------------------------------------------------------------------------------------ hand-worked sentences
def test_identical_trees_score_100():
    t = "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))"
    r = score(t, t)
    # brackets S(0,3) NP(0,2) VP(2,3): 3 of 3; the root counts, preterminals do not
    assert counts(r) == (3, 3, 3)
    assert (r.recall, r.precision, r.f1, r.complete_match) == (100.0, 100.0, 100.0, 100.0)
    assert r.words == 3 and r.correct_tags == 3  # "." deleted: 3 tagged words, not 4


def test_punctuation_attachment_is_not_counted():
    # the test tree attaches "." inside VP and has an extra ",": both are deleted in their own tree, so the
    # kept words are "The cat sat" on both sides and the brackets are counted over them:
    # gold S(0,3) NP(0,2) VP(2,3); test S(0,3) NP(0,2) VP(2,3) -> 3 of 3
    gold = "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))"
    test = "(S (NP (DT The) (NN cat) (, ,)) (VP (VBD sat) (. .)))"
    r = score(gold, test)
    assert r.error_sentences == 0
    assert counts(r) == (3, 3, 3) and r.f1 == 100.0


def test_punctuation_only_constituent_disappears():
    # gold (PRN (, ,)) spans no kept word -> zero element, deleted; test has no such bracket
    gold = "(S (NP (NNP John)) (PRN (: --)) (VP (VBD left)))"
    test = "(S (NP (NNP John)) (VP (VBD left) (: --)))"
    r = score(gold, test)
    # gold: S(0,2) NP(0,1) VP(1,2) (PRN deleted); test: S(0,2) NP(0,1) VP(1,2) -> 3 / 3 / 3
    assert counts(r) == (3, 3, 3)


def test_unary_chain_counts_each_node():
    # gold S(0,1) and VP(0,1): 2 brackets; test only S(0,1): 1 bracket; matched 1
    r = score("(S (VP (VB Go)))", "(S (VB Go))")
    assert counts(r) == (1, 2, 1)
    assert r.recall == 50.0 and r.precision == 100.0
    assert r.f1 == pytest.approx(2 * 50 * 100 / 150)  # 66.666...
    assert r.to_dict()["f1"] == 66.67
    assert r.complete_match == 0.0


def test_duplicate_brackets_match_as_a_multiset():
    # gold NP(0,2) twice; test NP(0,2) three times: min(2, 3) = 2 matched (README 7.5: P = n/m, R = 100)
    r = score("(NP (NP (DT the) (NN man)))", "(NP (NP (NP (DT the) (NN man))))")
    assert counts(r) == (2, 2, 3)
    assert r.recall == 100.0 and r.precision == pytest.approx(200 / 3)
    # the other way round: R = 2/3
    r = score("(NP (NP (NP (DT the) (NN man))))", "(NP (NP (DT the) (NN man)))")
    assert counts(r) == (2, 3, 2)


def test_advp_equals_prt():
    # VP(0,2) and ADVP(1,2) = PRT(1,2): 2 of 2
    r = score("(VP (VB give) (PRT (RP up)))", "(VP (VB give) (ADVP (RP up)))")
    assert counts(r) == (2, 2, 2)
    # but ADVP is not ADJP: 1 of 2
    r = score("(VP (VB give) (PRT (RP up)))", "(VP (VB give) (ADJP (RP up)))")
    assert counts(r) == (1, 2, 2)


def test_function_tags_and_indices_are_stripped_on_both_sides():
    gold = "( (S (NP-SBJ-1 (PRP He)) (VP (VBD left) (NP=2 (NN home))) (. .)) )"
    test = "(S (NP (PRP He)) (VP-TMP (VBD left) (NP (NN home))) (. .))"
    # gold: "" root deleted like TOP; S(0,3) NP(0,1) VP(1,3) NP(2,3); test the same 4 -> 4 of 4
    r = score(gold, test)
    assert counts(r) == (4, 4, 4)


def test_traces_and_constituents_left_empty():
    # README 7.1's example. Kept gold words: "reported", "yesterday" ("." deleted, -NONE- deleted).
    gold = ("( (S (NP-SBJ (-NONE- *-1)) (VP (VBD reported) (SBAR (-NONE- 0) (S (-NONE- *T*-2))) "
            "(NP-TMP (NN yesterday))) (. .)) )")
    # gold brackets: S(0,2) VP(0,2) NP-TMP(1,2); NP-SBJ(0,0) SBAR(1,1) S(1,1) are zero elements -> 3
    test = "(S (VP (VBD reported) (NP (NN yesterday))) (. .))"
    r = score(gold, test)
    assert counts(r) == (3, 3, 3)
    # length for the cut-off: every preterminal but -NONE-: reported yesterday . = 3
    assert r.per_sentence[0].length == 3


def test_top_is_deleted():
    # TOP(0,2) deleted; S(0,2) NP(0,1) VP(1,2) on both sides
    r = score("(S (NP (PRP I)) (VP (VBP am)))", "(TOP (S (NP (PRP I)) (VP (VBP am))))")
    assert counts(r) == (3, 3, 3)


def test_crossing_brackets_counted_over_test_brackets():
    gold = "(S (NP (DT a) (NN b)) (VP (VB c) (NN d)))"   # S(0,4) NP(0,2) VP(2,4)
    test = "(S (DT a) (X (NN b) (VB c)) (NN d))"        # S(0,4) X(1,3): X crosses NP and VP -> 1 crossing
    r = score(gold, test)
    assert counts(r) == (1, 3, 2)
    assert r.crossing == 1 and r.average_crossing == 1.0
    assert r.no_crossing == 0.0 and r.two_or_less_crossing == 100.0
    assert r.recall == pytest.approx(100 / 3) and r.precision == 50.0
    assert r.f1 == pytest.approx(40.0)  # 2 * 33.33 * 50 / 83.33
    # the mirror case: the test bracket X(0,2) starts before the gold NP(1,3) and ends inside it
    r = score("(S (DT a) (NP (NN b) (VB c)) (NN d))", "(S (X (DT a) (NN b)) (VB c) (NN d))")
    assert counts(r) == (1, 2, 2) and r.crossing == 1
    # nested or disjoint brackets never cross: X(0,1) and NP(1,3)
    r = score("(S (DT a) (NP (NN b) (VB c)) (NN d))", "(S (X (DT a)) (NN b) (VB c) (NN d))")
    assert r.crossing == 0


def test_tagging_accuracy_skips_deleted_words():
    # kept words: John ran (the "." is deleted); tags NNP/NN wrong on "ran": 1 of 2
    r = score("(S (NP (NNP John)) (VP (VBD ran)) (. .))", "(S (NP (NNP John)) (VP (NN ran)) (. .))")
    assert (r.words, r.correct_tags, r.tagging_accuracy) == (2, 1, 50.0)


def test_length_mismatch_makes_an_error_sentence():
    # sentence 1: the test tree tags "." as NN, so the test tree keeps 3 words, the gold one 2 -> error
    # sentence 2: valid, S(0,2) NP(0,1) VP(1,2) vs S(0,2) only -> 1 of 3
    gold = "(S (NP (NNP John)) (VP (VBD ran)) (. .))\n(S (NP (PRP We)) (VP (VBD won)))"
    test = "(S (NP (NNP John)) (VP (VBD ran) (NN .)))\n(S (PRP We) (VBD won))"
    r = score(gold, test)
    assert (r.sentences, r.error_sentences, r.skipped_sentences, r.valid_sentences) == (2, 1, 0, 1)
    assert r.errors == [(1, "Length unmatch (2|3)")]
    assert counts(r) == (1, 3, 1)  # the error sentence adds nothing
    assert r.words == 2 and r.complete_match == 0.0
    assert r.le40.error_sentences == 1 and r.le40.sentences == 2


def test_word_mismatch_and_skip_sentences():
    gold = "(S (NP (NNP John)) (VP (VBD ran)))\n(S (NP (NNP Ann)) (VP (VBD sang)) (. .))\n(S (VB Go))"
    test = "(S (NP (NNP Jon)) (VP (VBD ran)))\n(S (. .))\n(S (VB Go))"
    r = score(gold, test)
    # 1: words differ -> error; 2: test keeps no word -> skip; 3: valid, S(0,1) 1 of 1
    assert [s.status for s in r.per_sentence] == [1, 2, 0]
    assert r.errors[0] == (1, "Words unmatch (John|Jon)")
    assert (r.sentences, r.error_sentences, r.skipped_sentences, r.valid_sentences) == (3, 1, 1, 1)
    assert counts(r) == (1, 1, 1) and r.complete_match == 100.0


def test_le40_cutoff_counts_punctuation_but_not_traces():
    def sent(n, extra=""):
        return "(S (NP " + " ".join(f"(NN w{i})" for i in range(n)) + f"){extra})"

    # sentence 1: 40 words + a trace -> length 40 (in the <=40 block)
    # sentence 2: 40 words + "." -> length 41 (out of it)
    gold = sent(40, " (NP (-NONE- *))") + "\n" + sent(40, " (. .)")
    # test 1: S(0,40) only -> 1 of 2 (gold S, NP); test 2: the gold tree -> 2 of 2
    test = "(S " + " ".join(f"(NN w{i})" for i in range(40)) + ")\n" + sent(40, " (. .)")
    r = score(gold, test)
    assert [s.length for s in r.per_sentence] == [40, 41]
    assert counts(r) == (3, 4, 3)
    assert counts(r.le40) == (1, 2, 1) and r.le40.sentences == 1
    assert r.le40.recall == 50.0 and r.le40.precision == 100.0
    assert r.to_dict()["le40"]["sentences"] == 1


def test_no_brackets_gives_zero_not_nan():
    # only preterminals under TOP: no brackets on either side -> R = P = 0 (C prints nan for F), complete match
    r = score("(TOP (NN hello))", "(TOP (NN hello))")
    assert (r.recall, r.precision, r.f1) == (0.0, 0.0, 0.0)
    assert r.complete_match == 100.0


def test_label_scores_by_hand():
    # kept words The(0) cat(1) sat(2) on(3) mats(4); gold S(0,5) NP(0,2) VP(2,5) PP(3,5) NP(4,5)
    gold = "(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (NNS mats)))) (. .))"
    # test S(0,5) NP(0,3) NP(0,2) PRT(2,3) PP(3,5) NP(4,5): no VP, an extra NP, PRT scored as ADVP
    test = "(S (NP (NP (DT The) (NN cat)) (PRT (RP sat))) (PP (IN on) (NP (NNS mats))) (. .))"
    r = score(gold, test)
    # gold: S(0,5) NP(0,2) VP(2,5) PP(3,5) NP(4,5); matched: S, NP(0,2), PP(3,5), NP(4,5) = 4 of 5 gold, 6 test
    assert counts(r) == (4, 5, 6)
    by = {s.label: s for s in r.label_scores()}
    assert [s.label for s in r.label_scores()] == ["NP", "PP", "S", "VP", "ADVP"]  # gold count, then name
    assert (by["NP"].gold_brackets, by["NP"].test_brackets, by["NP"].matched) == (2, 3, 2)
    assert (by["NP"].recall, round(by["NP"].precision, 2), by["NP"].f1) == (100.0, 66.67, 80.0)
    assert (by["VP"].gold_brackets, by["VP"].test_brackets, by["VP"].matched) == (1, 0, 0) and by["VP"].f1 == 0.0
    assert (by["ADVP"].gold_brackets, by["ADVP"].test_brackets) == (0, 1)  # PRT is scored as ADVP
    assert sum(s.matched for s in r.label_scores()) == r.matched
    group = r.label_scores({"NP+PP": ("NP", "PP"), "SBARQ/SQ": ("SBARQ", "SQ")})
    assert [(g.label, g.gold_brackets, g.test_brackets, g.matched) for g in group] == [
        ("NP+PP", 3, 4, 3), ("SBARQ/SQ", 0, 0, 0)]


def test_label_scores_skip_error_sentences():
    r = score("(S (NP (NN a)) (VP (VB b)))\n(S (NP (NN c)))", "(S (NP (NN a)) (VP (VB b)))\n(S (NP (NN d)))")
    assert r.error_sentences == 1
    assert {s.label: s.gold_brackets for s in r.label_scores()} == {"NP": 1, "S": 1, "VP": 1}


def test_different_tree_counts_raise():
    with pytest.raises(UserError, match="2 gold trees but 1 test trees"):
        score("(S (VB a))\n(S (VB b))", "(S (VB a))")


def test_summary_and_dict_look_like_evalb():
    r = score("(S (VP (VB Go)))", "(S (VB Go))")
    text = r.summary()
    assert "-- All --" in text and "-- len<=40 --" in text
    assert "Bracketing Recall         =  50.00" in text
    assert "Bracketing Precision      = 100.00" in text
    assert "Bracketing FMeasure       =  66.67" in text
    d = json.loads(json.dumps(r.to_dict()))
    assert {"recall", "precision", "f1", "complete_match", "sentences", "error_sentences", "le40"} <= set(d)
    assert d["recall"] == 50.0 and d["le40"]["f1"] == 66.67
    line = "   1    1    0   50.00 100.00     1      2    1      0      1     1   100.00"
    assert r.per_sentence[0].table_line() == line


# ------------------------------------------------------------------- recorded from the C program (evalb.c)
# 14 dev-split trees (as found) and perturbed copies (relabelled, flattened, regrouped nodes, TOP wrappers,
# retagged punctuation, a punctuation-only test tree). Scored once with the C program evalb.c (2006 version)
# and COLLINS.prm, one tree per line, as written below except that every unlabelled outer bracket "( (S"
# was written "(TOP (S" (evalb.py's documented deviation); its per-sentence table, summary and error lines
# are pasted below as the expected output.
C_GOLD = """
( (S (NP-SBJ-1 (NNS Arraignments)) (VP (VBP are) (VP (VBN scheduled) (NP (-NONE- *-1)) (PP-TMP-CLR (IN for) (NP (NNP Nov.) (CD 14))))) (. .)))
( (S (NP-SBJ (PRP It)) (VP (VBZ uses) (NP (NP (DT a) (NN base)) (PP (IN of) (NP (CD 100))) (PP-TMP (IN in) (NP (CD 1985))))) (. .)))
( (S (-LRB- -LRB-) (NP-SBJ (JJR Fewer)) (VP (VBD said) (SBAR (-NONE- 0) (S (NP-SBJ (NNS conditions)) (VP (MD wo) (RB n't) (VP (VB change)))))) (. .) (-RRB- -RRB-)))
( (S (ADVP-TMP (RB Meanwhile)) (, ,) (NP-SBJ (NNP Treasury) (NNS bonds)) (VP (VBD ended) (ADVP-CLR (RB modestly) (JJR higher)) (PP-LOC (IN in) (NP (JJ quiet) (NN trading)))) (. .)))
( (S (NP-SBJ (JJ Total) (NN return)) (VP (VBZ measures) (NP (NP (NN price) (NNS changes)) (CC and) (NP (NN interest) (NN income)))) (. .)))
( (S (NP-SBJ (NN Junk) (NNS bonds)) (VP (VBD trailed) (NP (DT the) (NN group)) (ADVP-TMP (RB again))) (. .)))
( (S (NP-SBJ (NNP Michelin) (NNP Tyre)) (VP (VBZ is) (NP-PRD (NP (DT a) (NN unit)) (PP (IN of) (NP (NP (NNP France) (POS 's)) (NNP Michelin) (NNP S.A))))) (. .)))
( (S (NP-SBJ (NP (NNP UAL) (POS 's)) (NN announcement)) (VP (VBD came) (SBAR-TMP (IN after) (S (NP-SBJ (DT the) (NN market)) (VP (VBD closed) (NP-TMP (NN yesterday)))))) (. .)))
( (S (NP-SBJ (NNP Reliance)) (VP (VP (VBD confirmed) (NP (DT the) (NN filing))) (CC but) (VP (MD would) (RB n't) (VP (VB elaborate)))) (. .)))
( (S (NP-SBJ (DT The) (NNS financial-services) (NN company)) (VP (MD will) (VP (VB pay) (NP (CD 0.82) (NN share)) (PP-CLR (IN for) (NP (DT each) (NNP Williams) (NN share))))) (. .)))
( (S (NP-SBJ (NNP Primerica)) (VP (VBD closed) (PP-CLR (IN at) (NP ($ $) (CD 28.25) (-NONE- *U*))) (, ,) (ADVP-CLR (RB down) (NP (CD 50) (NNS cents)))) (. .)))
( (S (NP-SBJ-1 (NNS Terms)) (VP (VBD were) (RB n't) (VP (VBN disclosed) (NP (-NONE- *-1)))) (. .)))
( (S (NP-SBJ (NP (NNP Telerate) (POS 's)) (CD two) (JJ independent) (NNS directors)) (VP (VBP have) (VP (VBN rejected) (NP (DT the) (NN offer)) (PP-CLR (IN as) (ADJP (JJ inadequate))))) (. .)))
( (S (NP-SBJ (NNP Telerate)) (VP (VBZ provides) (NP (DT an) (JJ electronic) (JJ financial) (NN information) (NN network))) (. .)))
"""
C_TEST = """
( (S (NP-SBJ-1 (NNS Arraignments)) (VP (VBP are) (VP (VBN scheduled) (NP (-NONE- *-1)) (PP-TMP-CLR (IN for) (NP (NNP Nov.) (JJ 14))))) (. .)))
( (S (NP-SBJ (PRP It)) (VP (VBZ uses) (NP (NP (DT a) (NN base)) (PP (IN of) (NP (CD 100))) (PP-TMP (IN in) (NP (CD 1985))))) (. .)))
( (QP (S (-LRB- -LRB-) (NP-SBJ (NN (NN Fewer))) (VP (VBD said) (SBAR (-NONE- 0) (S (NP-SBJ (NNS conditions)) (VP (MD wo) (RB n't) (VP (VB change)))))) (. .) (-RRB- -RRB-))))
( (S (ADJP (RB Meanwhile)) (, ,) (NP-SBJ (NNP Treasury) (NNS bonds)) (VP (VBD ended) (RB modestly) (JJR higher) (PP-LOC (X (IN in)) (ADVP (JJ quiet) (VB trading)))) (. .)))
( (PRT (NP-SBJ (JJ Total) (NN return))) (VP (VBZ measures) (NP (NP (NN price) (NNS changes)) (CC and) (NP (NN interest) (NN income)))) (ADJP (. .)))
(S (. .))
(TOP (TOP (S (NP-SBJ (NNP Michelin) (NNP Tyre)) (VP (, is) (NP-PRD (DT a) (NN unit) (PP (IN of) (NP (NP (NNP France) (POS 's)) (NNP Michelin) (NNP S.A))))) (. .))))
( (S (NP (NNP UAL) (POS 's)) (NN announcement) (VP (VBD came) (SBAR-TMP (IN after) (S (NP-SBJ (DT the) (NN market)) (VP (VBD closed) (NP-TMP (NN yesterday)))))) (. .)))
( (S (NP-SBJ (NNP Reliance)) (VP (VP (. confirmed) (NP (DT the) (NN filing))) (CC but) (VP (NP (MD would)) (TOP (RB n't)) (TOP (VB elaborate)))) (. .)))
( (S (NP-SBJ (DT The) (NNS financial-services) (NN company)) (VP (PP (MD will)) (VP (VB pay) (NP (CD 0.82) (NN share)) (PP-CLR (IN for) (NP (DT each) (NNP Williams) (NN share))))) (. .)))
( (S (NP-SBJ (NNP Primerica)) (VP (VBD closed) (PP-CLR (: at) (NP ($ $) (CD 28.25) (-NONE- *U*))) (, ,) (ADVP-CLR (NN down) (NP (CD 50) (NNS cents)))) (`` .)))
(TOP (TOP (S (NP-SBJ-1 (NNS Terms)) (VP (PP (VBD were) (RB n't) (VBN disclosed)) (NP (-NONE- *-1))) (. .))))
( (S (NP-SBJ (NP (NNP Telerate) (POS 's)) (CD two) (JJ independent) (NNS directors)) (VP (VBP have) (VP (VBN rejected) (NP (DT the) (NN offer)) (PP-CLR (IN as) (ADJP (JJ inadequate))))) (. .)))
(TOP (TOP (S (NP-SBJ (NNP Telerate)) (VP (VBZ provides) (NP (DT an) (JJ electronic) (JJ financial) (NN information) (NN network))) (. .))))
"""
C_TABLE = """
   1    7    0  100.00 100.00     6      6    6      0      6     5    83.33
   2    9    0  100.00 100.00     9      9    9      0      8     8   100.00
   3    9    0  100.00  80.00     8      8   10      0      8     7    87.50
   4   11    0   57.14  57.14     4      7    7      0      9     8    88.89
   5    9    0   83.33  83.33     5      6    6      0      8     8   100.00
   6    7    2    0.00   0.00     0      0    0      0      0     0     0.00
   7   11    1    0.00   0.00     0      0    0      0      0     0     0.00
   8   10    0   88.89 100.00     8      9    8      0      9     9   100.00
   9    9    1    0.00   0.00     0      0    0      0      0     0     0.00
  10   12    0  100.00  87.50     7      7    8      0     11    11   100.00
  11   10    1    0.00   0.00     0      0    0      0      0     0     0.00
  12    5    0   75.00  75.00     3      4    4      0      4     4   100.00
  13   12    0  100.00 100.00     8      8    8      0     11    11   100.00
  14    8    0  100.00 100.00     4      4    4      0      7     7   100.00
"""
C_BLOCK = """
Number of sentence        =     14
Number of Error sentence  =      3
Number of Skip  sentence  =      1
Number of Valid sentence  =     10
Bracketing Recall         =  91.18
Bracketing Precision      =  88.57
Bracketing FMeasure       =  89.86
Complete match            =  40.00
Average crossing          =   0.00
No crossing               = 100.00
2 or less crossing        = 100.00
Tagging accuracy          =  96.30
"""
C_ERRORS = [(7, "Length unmatch (10|9)"), (9, "Length unmatch (8|7)"), (11, "Length unmatch (8|7)")]


def test_equals_the_c_program_on_recorded_output():
    r = ev.evalb(trees(C_GOLD), trees(C_TEST))
    assert [s.table_line() for s in r.per_sentence] == C_TABLE.strip("\n").split("\n")
    block = C_BLOCK.strip("\n")
    assert r.summary() == f"=== Summary ===\n\n-- All --\n{block}\n\n-- len<=40 --\n{block}"
    assert [e for e in r.errors if e[1].startswith("Length")] == C_ERRORS


def test_evalb_files_reads_several_gold_files_in_order(tmp_path):
    lines = C_GOLD.strip().split("\n")
    a = write(tmp_path, "a.mrg", "\n".join(lines[:5]))
    b = write(tmp_path, "b.mrg", "\n\n".join(lines[5:]))  # any layout
    pred = write(tmp_path, "pred.trees", C_TEST)
    r = ev.evalb_files([a, b], pred)
    assert r.to_dict()["f1"] == 89.86 and r.sentences == 14
    with pytest.raises(UserError) as info:
        ev.evalb_files([a], pred)
    assert "5 gold trees" in str(info.value) and "14 trees" in str(info.value)
    assert str(a) in str(info.value) and str(pred) in str(info.value)


# ----------------------------------------------------------------------------------------------- data
@needs(str(ptb.PTB_SUBDIR / "wsj_0199.mrg"))
def test_gold_test_files_against_their_own_cleaned_trees_score_100():
    from tasks_testutil import DATA

    for path in ptb.split_files("test", DATA):
        raw = ptb.read_tree_file(path)
        r = ev.evalb(raw, [ptb.clean_tree(t) for t in raw])
        assert (r.f1, r.complete_match, r.error_sentences, r.skipped_sentences) == (100.0, 100.0, 0, 0), path
        assert r.tagging_accuracy == 100.0 and (r.le40.f1 == 100.0 or r.le40.sentences == 0)
    raw = ptb.read_split("test", DATA, clean=False)
    r = ev.evalb(raw, [ptb.clean_tree(t) for t in raw])
    assert r.sentences == 518 and r.gold_brackets == r.matched
