"""``structattn score evalb`` through its own argparse parser (the command is registered in cli.py by the lead)."""
from __future__ import annotations

import argparse
import json

import pytest

from structattn.commands import score
from structattn.errors import UserError

GOLD_A = "( (S (NP-SBJ (NNP John)) (VP (VBD ran)) (. .)) )\n( (S (NP-SBJ (PRP We)) (VP (VBD won))) )\n"
GOLD_B = "( (S (VP (VB Go) (PRT (RP away))) (. !)) )\n"
# 1: S NP VP of 3; 2: S only of 3; 3: S VP ADVP(=PRT) of 3 -> matched 3 + 1 + 3 = 7, gold 9, test 7
PRED = ("(S (NP (NNP John)) (VP (VBD ran)) (. .))\n"
        "(S (PRP We) (VBD won))   (S (VP (VB Go)\n (ADVP (RP away))) (. !))\n")


def run(argv, capsys):
    parser = argparse.ArgumentParser(prog="structattn")
    score.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    code = args.func(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def files(tmp_path):
    gold = tmp_path / "gold"
    gold.mkdir()
    (gold / "wsj_0002.mrg").write_text(GOLD_B)
    (gold / "wsj_0001.mrg").write_text(GOLD_A)  # sorted order: 0001 first
    (gold / "notes.txt").write_text("not a tree")
    pred = tmp_path / "pred.trees"
    pred.write_text(PRED)
    return gold, pred


def test_summary_from_a_folder(files, capsys):
    gold, pred = files
    code, out, _ = run(["score", "evalb", str(gold), str(pred)], capsys)
    assert code == 0
    assert "-- All --" in out and "-- len<=40 --" in out
    assert "Number of sentence        =      3" in out
    assert "Number of Error sentence  =      0" in out
    # recall 7/9 = 77.78, precision 7/7 = 100, F1 = 2 * 77.78 * 100 / 177.78 = 87.50
    assert "Bracketing Recall         =  77.78" in out
    assert "Bracketing Precision      = 100.00" in out
    assert "Bracketing FMeasure       =  87.50" in out
    assert "Complete match            =  66.67" in out  # sentences 1 and 3


def test_json_and_glob(files, capsys):
    gold, pred = files
    code, out, _ = run(["score", "evalb", str(gold / "wsj_*.mrg"), str(pred), "--json"], capsys)
    d = json.loads(out)
    assert code == 0
    assert (d["recall"], d["precision"], d["f1"], d["complete_match"]) == (77.78, 100.0, 87.5, 66.67)
    assert (d["sentences"], d["error_sentences"], d["matched"], d["gold_brackets"]) == (3, 0, 7, 9)
    assert d["le40"]["f1"] == 87.5
    assert d["gold"] == [str(gold / "wsj_0001.mrg"), str(gold / "wsj_0002.mrg")]


def test_single_gold_file_and_per_sentence_table(files, capsys):
    gold, pred = files
    pred.write_text("(S (NP (NNP John)) (VP (VBD ran)) (. .)) (S (NP (PRP We)) (VP (VBD won)))")
    code, out, _ = run(["score", "evalb", str(gold / "wsj_0001.mrg"), str(pred), "--per-sentence"], capsys)
    assert "   1    3    0  100.00 100.00     3      3    3      0      2     2   100.00" in out
    assert "Bracketing FMeasure       = 100.00" in out


def test_different_tree_counts_name_both_files(files, capsys):
    gold, pred = files
    with pytest.raises(UserError) as info:
        run(["score", "evalb", str(gold / "wsj_0001.mrg"), str(pred)], capsys)
    message = str(info.value)
    assert "2 gold trees in" in message and "3 trees in" in message
    assert str(gold / "wsj_0001.mrg") in message and str(pred) in message


def test_error_sentences_are_printed_and_counted(files, capsys):
    gold, pred = files
    pred.write_text(PRED.replace("(VBD ran)", "(VBD walked)"))
    code, out, err = run(["score", "evalb", str(gold), str(pred), "--json"], capsys)
    d = json.loads(out)
    assert d["error_sentences"] == 1 and d["errors"] == [{"sentence": 1, "error": "Words unmatch (ran|walked)"}]
    assert "sentence 1: Words unmatch (ran|walked)" in err
    assert "1 error and 0 skip sentence(s) not scored (of 3)" in err


@pytest.mark.parametrize("what,pattern", [
    ("missing", r"missing: file not found"),
    ("empty_dir", r"folder holds no \*\.mrg file"),
    ("glob", r"the pattern matches no file"),
])
def test_bad_gold_argument(tmp_path, files, capsys, what, pattern):
    _, pred = files
    (tmp_path / "empty_dir").mkdir()
    arg = {"missing": tmp_path / "missing", "empty_dir": tmp_path / "empty_dir", "glob": tmp_path / "x*.mrg"}[what]
    with pytest.raises(UserError, match=pattern):
        run(["score", "evalb", str(arg), str(pred)], capsys)


def test_malformed_prediction_names_file_and_line(files, capsys):
    gold, pred = files
    pred.write_text("(S (NN a))\n(S (NN b)\n")
    with pytest.raises(UserError, match=rf"^{pred}:2: '\(' never closed"):
        run(["score", "evalb", str(gold), str(pred)], capsys)


def test_score_needs_a_scorer(capsys):
    parser = argparse.ArgumentParser(prog="structattn")
    score.add_parser(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):
        parser.parse_args(["score"])
