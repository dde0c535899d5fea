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
    code, out, _ = run(["score", "evalb", "--gold", str(gold), "--predictions", str(pred)], capsys)
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
    code, out, _ = run(["score", "evalb", "--gold", str(gold / "wsj_*.mrg"), "--predictions", str(pred), "--json"], capsys)
    d = json.loads(out)
    assert code == 0
    assert (d["recall"], d["precision"], d["f1"], d["complete_match"]) == (77.78, 100.0, 87.5, 66.67)
    assert (d["sentences"], d["error_sentences"], d["matched"], d["gold_brackets"]) == (3, 0, 7, 9)
    assert d["le40"]["f1"] == 87.5
    assert d["gold"] == [str(gold / "wsj_0001.mrg"), str(gold / "wsj_0002.mrg")]


def test_single_gold_file_and_per_sentence_table(files, capsys):
    gold, pred = files
    pred.write_text("(S (NP (NNP John)) (VP (VBD ran)) (. .)) (S (NP (PRP We)) (VP (VBD won)))")
    code, out, _ = run(["score", "evalb", "--gold", str(gold / "wsj_0001.mrg"), "--predictions", str(pred), "--per-sentence"], capsys)
    assert "   1    3    0  100.00 100.00     3      3    3      0      2     2   100.00" in out
    assert "Bracketing FMeasure       = 100.00" in out


def test_different_tree_counts_name_both_files(files, capsys):
    gold, pred = files
    with pytest.raises(UserError) as info:
        run(["score", "evalb", "--gold", str(gold / "wsj_0001.mrg"), "--predictions", str(pred)], capsys)
    message = str(info.value)
    assert "2 gold trees in" in message and "3 trees in" in message
    assert str(gold / "wsj_0001.mrg") in message and str(pred) in message


def test_error_sentences_are_printed_and_counted(files, capsys):
    gold, pred = files
    pred.write_text(PRED.replace("(VBD ran)", "(VBD walked)"))
    code, out, err = run(["score", "evalb", "--gold", str(gold), "--predictions", str(pred), "--json"], capsys)
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
        run(["score", "evalb", "--gold", str(arg), "--predictions", str(pred)], capsys)


def test_malformed_prediction_names_file_and_line(files, capsys):
    gold, pred = files
    pred.write_text("(S (NN a))\n(S (NN b)\n")
    with pytest.raises(UserError, match=rf"^{pred}:2: '\(' never closed"):
        run(["score", "evalb", "--gold", str(gold), "--predictions", str(pred)], capsys)


def _stdin(monkeypatch, data: bytes) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


def test_dash_reads_the_predictions_from_standard_input(files, capsys, monkeypatch):
    gold, pred = files
    _, from_file, _ = run(["score", "evalb", "--gold", str(gold), "--predictions", str(pred), "--json"], capsys)
    _stdin(monkeypatch, PRED.encode("utf-8"))
    code, from_stdin, _ = run(["score", "evalb", "--gold", str(gold), "--predictions", "-", "--json"], capsys)
    assert code == 0
    assert {**json.loads(from_stdin), "pred": None} == {**json.loads(from_file), "pred": None}
    assert json.loads(from_stdin)["pred"] == "<stdin>" and json.loads(from_stdin)["f1"] == 87.5
    _stdin(monkeypatch, PRED.encode("utf-8"))
    code, out, _ = run(["score", "evalb", "--gold", str(gold), "--predictions", "-"], capsys)
    assert code == 0 and "pred: <stdin>" in out and "Bracketing FMeasure       =  87.50" in out


@pytest.mark.parametrize("data, pattern", [
    (b"", r"^<stdin>: no bracketed tree on standard input; pipe in the predicted trees"),
    (b"(S (NN a))\n(S (NN b)\n", r"^<stdin>:2: '\(' never closed"),
    (b"(S (NN a))\n(S (NN caf\xe9))\n", r"^<stdin>:2: not valid UTF-8"),
    (b"(S (NN a))\n", r"^3 gold trees in 2 files .* but 1 trees in <stdin>; the test file must hold one tree per gold tree"),
])
def test_bad_standard_input_is_named(files, capsys, monkeypatch, data, pattern):
    gold, _ = files
    _stdin(monkeypatch, data)
    with pytest.raises(UserError, match=pattern):
        run(["score", "evalb", "--gold", str(gold), "--predictions", "-"], capsys)


def test_gold_cannot_be_standard_input(files, capsys):
    _, pred = files
    with pytest.raises(UserError, match=r"--gold cannot be standard input \('-'\): give the gold tree file"):
        run(["score", "evalb", "--gold", "-", "--predictions", str(pred)], capsys)


def test_score_needs_a_scorer(capsys):
    parser = argparse.ArgumentParser(prog="structattn")
    score.add_parser(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):
        parser.parse_args(["score"])


# ------------------------------------------------------------------------------------------------ squad
SQUAD = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": "Paris in 1889.", "qas": [
    {"id": "q1", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 0}], "is_impossible": False},
    {"id": "q2", "question": "When?", "answers": [{"text": "1889", "answer_start": 9}], "is_impossible": False},
    {"id": "q3", "question": "Who?", "answers": [], "is_impossible": True}]}]}]}


@pytest.fixture
def squad_files(tmp_path):
    def put(name, obj):
        path = tmp_path / name
        path.write_text(json.dumps(obj))
        return str(path)

    return put


def test_squad_prints_the_official_json(squad_files, capsys, tmp_path):
    data = squad_files("data.json", SQUAD)
    pred = squad_files("pred.json", {"q1": "Paris", "q2": "in 1889", "q3": "Paris", "extra": "x"})
    na = squad_files("na.json", {"q1": 0.1, "q2": 0.5, "q3": 0.7})
    out_file = tmp_path / "eval.json"
    code, out, err = run(["score", "squad", "--gold", data, "--predictions", pred, "--na-prob", na,
                          "--na-prob-thresh", "0.6", "--output", str(out_file)], capsys)
    d = json.loads(out)
    assert code == 0 and out.startswith('{\n  "exact": ')  # indent 2, the script's key order
    # q3's na 0.7 > 0.6: no answer, right. EM 1, 0, 1 -> 66.67; F1 1, 2/3 (in 1889 vs 1889), 1 -> 88.89
    assert d["exact"] == pytest.approx(200 / 3) and d["f1"] == pytest.approx(100 * (2 + 2 / 3) / 3)
    assert (d["HasAns_total"], d["NoAns_total"], d["NoAns_exact"]) == (2, 1, 100.0)
    # sweep from 1: q1 +1 -> 2 (.1); q2 +2/3 -> 2.67 (.5); q3 answered "Paris" -1 -> 1.67  => 88.89 at 0.5
    assert d["best_f1"] == pytest.approx(100 * (2 + 2 / 3) / 3) and d["best_f1_thresh"] == 0.5
    assert (d["best_exact"], d["best_exact_thresh"]) == (pytest.approx(200 / 3), 0.1)
    assert list(d)[-4:] == ["best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"]
    assert json.loads(out_file.read_text()) == d
    assert "1 prediction(s) for question ids not in" in err


def test_squad_without_na_prob(squad_files, capsys):
    data = squad_files("data.json", SQUAD)
    pred = squad_files("pred.json", {"q1": "Paris", "q2": "", "q3": ""})
    code, out, err = run(["score", "squad", "--gold", data, "--predictions", pred], capsys)
    d = json.loads(out)
    assert list(d) == ["exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
                       "NoAns_exact", "NoAns_f1", "NoAns_total"]
    assert d["exact"] == pytest.approx(200 / 3) and d["total"] == 3 and err == ""


def test_squad_missing_predictions_count_as_wrong_and_are_reported(squad_files, tmp_path, capsys):
    data = squad_files("data.json", SQUAD)
    path = tmp_path / "pred.json"
    path.write_text(json.dumps({"q1": "Paris"}))
    code, out, err = run(["score", "squad", "--gold", data, "--predictions", str(path)], capsys)
    assert code == 0 and "2 question(s) of" in err and "count as wrong (first: 'q2', 'q3')" in err
    assert json.loads(out)["total"] == 3


@pytest.mark.parametrize("pred,pattern", [
    (["Paris"], r"expected a JSON object mapping question id -> answer text, got list"),
    ("not json", r"pred\.json:1:1: not valid JSON"),
])
def test_squad_bad_predictions(squad_files, tmp_path, capsys, pred, pattern):
    data = squad_files("data.json", SQUAD)
    path = tmp_path / "pred.json"
    path.write_text(pred if isinstance(pred, str) else json.dumps(pred))
    with pytest.raises(UserError, match=pattern):
        run(["score", "squad", "--gold", data, "--predictions", str(path)], capsys)


def test_squad_bad_data_names_the_question(squad_files, capsys):
    bad = json.loads(json.dumps(SQUAD))
    bad["data"][0]["paragraphs"][0]["qas"][2]["answers"] = [{"text": "Paris", "answer_start": 0}]
    data = squad_files("data.json", bad)
    pred = squad_files("pred.json", {"q1": "", "q2": "", "q3": ""})
    with pytest.raises(UserError, match=r"article 0 \('T'\), paragraph 0, question 2 \(id 'q3'\): is_impossible is true"):
        run(["score", "squad", "--gold", data, "--predictions", pred], capsys)
    with pytest.raises(UserError, match=r"--na-prob: input file \S*missing\.json does not exist"):
        run(["score", "squad", "--gold", squad_files("ok.json", SQUAD), "--predictions", pred,
             "--na-prob", data.replace("data.json", "missing.json")], capsys)


# ---------------------------------------------------------------------------------------------- bleu


def test_score_bleu_prints_sacrebleu_of_the_file(tmp_path, capsys):
    from structattn.cli import main

    refs = tmp_path / "ref.de"
    refs.write_text("Ein Hund läuft im Park.\nZwei Männer sitzen auf einer Bank.\n", encoding="utf-8")
    hyps = tmp_path / "hyp.de"
    hyps.write_text("Ein Hund läuft im Park.\nZwei Männer sitzen auf der Bank.\n", encoding="utf-8")
    assert main(["score", "bleu", "--gold", str(refs), "--predictions", str(hyps), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    import sacrebleu

    want = sacrebleu.corpus_bleu(hyps.read_text(encoding="utf-8").splitlines(),
                                 [refs.read_text(encoding="utf-8").splitlines()]).score
    assert out["bleu"] == round(want, 2) and "tok:13a" in out["signature"] and "case:mixed" in out["signature"]


def test_score_bleu_refuses_a_line_count_mismatch(tmp_path, capsys):
    from structattn.cli import main

    refs = tmp_path / "ref.de"
    refs.write_text("a\nb\n", encoding="utf-8")
    hyps = tmp_path / "hyp.de"
    hyps.write_text("a\n", encoding="utf-8")
    assert main(["score", "bleu", "--gold", str(refs), "--predictions", str(hyps)]) == 2
    assert "1 hypotheses for 2 references" in capsys.readouterr().err


def test_the_positional_spelling_is_refused(files, capsys):
    """`score evalb GOLD PRED` (the spelling of 0.2.0) is an unknown argument: --gold and --predictions say which
    file is which."""
    gold, pred = files
    with pytest.raises(SystemExit) as exc:
        run(["score", "evalb", str(gold), str(pred), "--json"], capsys)
    assert exc.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
