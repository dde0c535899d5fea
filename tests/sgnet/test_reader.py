"""The reader a user loads (structattn.sgnet.reader), its packed form (structattn.sgnet.reader_packing) and the
commands `structattn answer` and `structattn pack-reader`, on a tiny SG-Net reader trained here through the real
trainer (tiny random BERT, hidden 32, 2 layers; windows of 64 tokens sharing at most 16). Parses are real (spaCy,
offline), cached in tmp."""
from __future__ import annotations

import io
import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from fixtures import point_at, train_tiny_reader
from structattn.cli import main as cli_main
from structattn.errors import UserError
from structattn.models import trained
from structattn.tasks.squad import read_squad
from structattn.sgnet.reader import Reader
from structattn.sgnet.reader_packing import pack_reader, packing_cost

LONG = " ".join(f"In year {1900 + i} the  river\tflowed past the city of Town{i} , built by Romans ."
               for i in range(12))  # a passage of several windows, with irregular spacing


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("reader")
    data = train_tiny_reader(root, root / "runs" / "qa")
    return {"root": root, "data": data, "cache": root / "cache", "best": root / "runs" / "qa" / "best",
            "dev": data / "squad11" / "dev-v1.1.reconstructed-from-explorer.json"}


@pytest.fixture
def env(tiny, monkeypatch):
    return point_at(tiny, monkeypatch)


@pytest.fixture
def reader(env):
    return Reader.from_pretrained(env["best"])


def with_threshold(env, tmp_path, value) -> Path:
    """A copy of the tiny run's best/ whose saved no-answer threshold is ``value``."""
    folder = tmp_path / "best"
    shutil.copytree(env["best"], folder)
    (folder / "span_qa.json").write_text(json.dumps({"na_threshold": value, "max_answer_length": 30, "n_best": 20}))
    return folder


def squad_file(path: Path, paragraphs: list[tuple[str, list[str]]]) -> Path:
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": c, "qas": [{"id": f"p{i}-{k}", "question": q, "answers": [{"text": c.split()[0],
                                                                             "answer_start": 0}]}
                               for k, q in enumerate(qs)]} for i, (c, qs) in enumerate(paragraphs)]}]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ the API
def test_answers_carry_offsets_into_the_context_as_given(reader):
    context = "  The river\u00a0flows   north past a café built by  Romans ,\tin 43 AD ."
    reading = reader(question="Who built the café ?", context=context, top_k=4)
    assert len(reading.answers) == 4 and reading.windows == 1 and reading.has_answer  # squad11: always answers
    scores = [a.score for a in reading.answers]
    assert scores == sorted(scores, reverse=True) and len({a.text for a in reading.answers}) == 4
    for a in reading.answers:
        assert context[a.start:a.end] == a.text and a.text == a.text.strip() and 0 < a.probability <= 1
    assert reading.answer == reading.answers[0] and math.isinf(reading.threshold)
    record = reading.to_dict()
    assert record["answer"] == context[record["start"]:record["end"]] and record["threshold"] is None


def test_the_reader_gives_what_predict_gives_long_passages_in_windows(env, reader, tmp_path):
    """Same model, same windows, same decoding as `structattn predict --data`: a passage of several windows
    included."""
    data = json.loads(env["dev"].read_text())
    data["data"][0]["paragraphs"].append({"context": LONG, "qas": [
        {"id": "long-1", "question": "Which city did the river flow past in 1909 ?",
         "answers": [{"text": "Town9", "answer_start": LONG.index("Town9")}]}]})
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "pred.json"
    assert cli_main(["predict", "--model", str(env["best"]), "--input", str(path), "--output", str(out)]) == 0
    predicted = json.loads(out.read_text())
    nbest = json.loads(out.with_name("pred.nbest.json").read_text())
    readings = reader.read_questions(read_squad(path), top_k=3)
    assert [r.qid for r in readings] == list(predicted)
    assert [r.answer.text for r in readings] == list(predicted.values())
    for r in readings:
        assert [a.text for a in r.answers] == [e["text"] for e in nbest[r.qid][:3]]
        assert r.answers[0].score == pytest.approx(nbest[r.qid][0]["start_logit"] + nbest[r.qid][0]["end_logit"])
    long = readings[-1]
    assert long.windows > 1
    assert all(LONG[a.start:a.end] == a.text for a in long.answers)
    # read alone, the long passage gives the same answers as among the others
    alone = reader(question="Which city did the river flow past in 1909 ?", context=LONG, top_k=3)
    assert alone.answers == long.answers and alone.windows == long.windows


def test_evaluate_scores_what_predict_answers(env, reader, tmp_path):
    """The reader's own evaluate gives what the SQuAD scorer gives on `structattn predict`'s answers."""
    from structattn.tasks.squad_eval import evaluate

    out = tmp_path / "pred.json"
    assert cli_main(["predict", "--model", str(env["best"]), "--input", str(env["dev"]), "--output", str(out)]) == 0
    dataset = json.loads(env["dev"].read_text())
    expected = evaluate(dataset, json.loads(out.read_text()))
    assert reader.evaluate(env["dev"]) == expected == reader.evaluate(dataset)
    assert expected["total"] == len(read_squad(env["dev"]))


def test_no_answer_at_the_threshold_saved_with_the_run(env, tmp_path):
    folder = with_threshold(env, tmp_path, -1e6)  # every null score beats every span by more than this
    reading = Reader.from_pretrained(folder)(question="Who built it ?", context="Romans built it .", top_k=2)
    assert not reading.has_answer and reading.answer is None and reading.threshold == -1e6
    assert len(reading.answers) == 2  # the best spans are still given
    record = reading.to_dict()
    assert record["no_answer"] and record["answer"] == "" and record["start"] is None
    always = Reader.from_pretrained(folder, na_threshold=math.inf)(question="Who built it ?",
                                                                    context="Romans built it .")
    assert always.answer is not None and always.na_score == pytest.approx(reading.na_score)


def test_bad_input_is_one_clear_error(env, reader, tmp_path):
    with pytest.raises(UserError, match="the question is empty"):
        reader(question="  ", context="Romans built it .")
    with pytest.raises(UserError, match="the context \\(passage\\) must be a string, not int"):
        reader(question="who ?", context=3)
    with pytest.raises(UserError, match="top_k=0 must be a positive integer"):
        reader(question="who ?", context="Romans built it .", top_k=0)
    with pytest.raises(UserError, match="no questions to answer"):
        reader.answer_all([])
    with pytest.raises(UserError, match="has no train_config.json"):
        Reader.from_pretrained(tmp_path)
    with pytest.raises(UserError, match="neither a folder nor a trained reader's name; the reader names: sgnet-squad2"):
        Reader.from_pretrained("no-such-reader")


def test_a_question_longer_than_its_passage_is_read_with_a_warning_when_tokens_are_lost(reader):
    passage = " ".join(["Romans built it"] * 14) + " ."
    with pytest.warns(UserWarning, match="sub-word token\\(s\\) of questions are in no window of 64 tokens.*"
                                         "shorten the question"):
        reading = reader(question=" ".join(["which"] * 100) + " ?", context=passage)
    assert reading.answer is not None and reading.windows > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a long passage with a short question loses nothing: no warning
        reader(question="Which city ?", context=LONG)


# ------------------------------------------------------------------------------------------------ packing
def _logits(reader, questions):
    built = reader.family.qa_features(questions, parser=lambda: reader.parser)
    starts, ends = reader.family.span_logits(built.features)
    return np.concatenate(starts + ends)


def test_packed_reader_is_small_and_close_to_float32(env, reader, tmp_path):
    card = pack_reader(env["best"], tmp_path / "packed")
    packed_weights = (tmp_path / "packed" / "model.safetensors").stat().st_size
    assert packed_weights < 0.3 * card["float32_bytes"] and card["packing"]["int8_tensors"] >= 10
    assert json.loads((tmp_path / "packed" / "card.json").read_text()) == card and card["size_bytes"] > packed_weights
    # the vocabulary rebuilds the run's tokenizer exactly, so vocab.txt replaces tokenizer.json
    assert card["tokenizer"].startswith("rebuilt from vocab.txt") and (env["best"] / "tokenizer.json").is_file()
    assert not (tmp_path / "packed" / "tokenizer.json").exists() and (tmp_path / "packed" / "vocab.txt").is_file()
    packed = Reader.from_pretrained(tmp_path / "packed")
    assert packed.threshold == reader.threshold and packed.cfg == reader.cfg
    questions = read_squad(env["dev"])
    ours, theirs = _logits(reader, questions), _logits(packed, questions)
    spread = ours.max() - ours.min()
    assert np.abs(ours - theirs).max() < 0.05 * spread and not np.array_equal(ours, theirs)
    same = [a.answer.text == b.answer.text
            for a, b in zip(reader.read_questions(questions), packed.read_questions(questions))]
    assert sum(same) >= len(same) - 2
    # float32 packing (nothing quantised, nothing by reference) gives the very same logits
    pack_reader(env["best"], tmp_path / "float", quantize=False)
    assert np.array_equal(_logits(Reader.from_pretrained(tmp_path / "float"), questions), ours)


def test_a_tokenizer_the_vocabulary_does_not_rebuild_is_kept(env, tmp_path):
    from transformers import AutoTokenizer

    run = tmp_path / "best"
    shutil.copytree(env["best"], run)
    tokenizer = AutoTokenizer.from_pretrained(run)
    tokenizer.add_tokens(["qzxword"])  # an added token lives in tokenizer.json only, not in a vocab.txt
    tokenizer.save_pretrained(run)
    saved = (run / "tokenizer.json").read_text(encoding="utf-8")
    card = pack_reader(run, tmp_path / "packed")
    assert card["tokenizer"].startswith("the run's tokenizer files")
    assert (tmp_path / "packed" / "tokenizer.json").read_text(encoding="utf-8") == saved
    assert not (tmp_path / "packed" / "tokenizer.json.aside").exists() and not (tmp_path / "packed" / "vocab.txt").exists()


def test_packing_cost_scores_both_forms_on_the_same_questions(env, tmp_path):
    pack_reader(env["best"], tmp_path / "packed")
    cost = packing_cost(env["best"], tmp_path / "packed", task="squad11", split="dev")
    assert cost["questions"] == 12 and cost["source"] == "squad11/dev"
    assert cost["f1_lost"] == pytest.approx(cost["float32"]["f1"] - cost["packed"]["f1"])
    assert abs(cost["f1_lost"]) < 20  # 12 questions: one flipped answer moves F1 by at most 8.3
    on_file = packing_cost(env["best"], tmp_path / "packed", data=env["dev"], limit=5)
    assert on_file["questions"] == 5 and on_file["float32"]["total"] == 5


def test_packing_refuses_what_is_not_a_finished_reader(env, tmp_path):
    with pytest.raises(UserError, match="has no train_config.json"):
        pack_reader(tmp_path, tmp_path / "out")
    with pytest.raises(UserError, match="is the run's own folder"):
        pack_reader(env["best"], env["best"])


def test_a_packed_reader_loads_by_name_through_the_registry(env, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(trained, "TRAINED_DIR", tmp_path)  # an install whose package data is this folder
    monkeypatch.setitem(trained.TRAINED, "tiny-reader",
                        trained.TrainedModel("tiny-reader", "reader", "a tiny test reader", "make nothing"))
    pack_reader(env["best"], tmp_path / "tiny-reader")
    assert [m.name for m in trained.shipped_models("reader")] == ["tiny-reader"]
    reading = Reader.from_pretrained("tiny-reader")(question="Who built it ?", context="Romans built it .")
    assert reading.answer is not None
    capsys.readouterr()
    assert cli_main(["models"]) == 0
    assert any(line.startswith("tiny-reader ") and " reader " in line for line in capsys.readouterr().out.splitlines())
    with pytest.raises(UserError, match="is a trained reader, not a parser"):
        trained.resolve("tiny-reader", "parser")


# ------------------------------------------------------------------------------------------------ commands
@pytest.fixture
def answer(env, capsys, monkeypatch):
    """argv (after ``answer --model BEST``), stdin text -> (exit code, stdout, stderr)."""
    def call(argv, stdin: str | None = None, model: str | None = None):
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = cli_main(["answer", "--model", model or str(env["best"]), *argv])
        out = capsys.readouterr()
        return code, out.out, out.err
    return call


def test_answer_command_from_flags_file_and_standard_input(answer, reader, tmp_path):
    context = "Romans built the city in 43 AD ."
    expected = reader(question="Who built it ?", context=context, top_k=2)
    code, out, _ = answer(["--question", "Who built it ?", "--context", context, "--top-k", "2"])
    a, b = expected.answers
    assert code == 0 and out.splitlines() == [
        f"answer: {a.text!r} (characters {a.start}-{a.end}, score {a.score:.3f}, probability {a.probability:.3f})",
        f"2. {b.text!r} (characters {b.start}-{b.end}, score {b.score:.3f}, probability {b.probability:.3f})"]
    (tmp_path / "passage.txt").write_text(context, encoding="utf-8")
    code, from_file, _ = answer(["--question", "Who built it ?", "--context-file", str(tmp_path / "passage.txt"),
                                 "--top-k", "2"])
    assert code == 0 and from_file == out
    code, piped, _ = answer(["--question", "Who built it ?", "--top-k", "2"], stdin=context)
    assert code == 0 and piped == out
    lines = json.dumps({"question": "Who built it ?", "context": context, "id": "a"}) + "\n\n" + \
        json.dumps({"question": "When ?", "context": context}) + "\n"
    code, out, _ = answer([], stdin=lines)
    records = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and [r["id"] for r in records] == ["a", "q1"]
    assert records[0]["answer"] == a.text and records[0]["start"] == a.start
    assert records[0]["question"] == "Who built it ?"


def test_answer_command_reads_squad_and_json_lines_files(answer, env, tmp_path):
    out = tmp_path / "answers.jsonl"
    code, _, err = answer(["--input", str(env["dev"]), "--output", str(out)])
    records = [json.loads(x) for x in out.read_text().splitlines()]
    assert code == 0 and [r["id"] for r in records] == [q.qid for q in read_squad(env["dev"])]
    assert "12 questions" in err
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps({"id": r["id"], "question": q.question, "context": q.context}) + "\n"
                            for r, q in zip(records, read_squad(env["dev"]))))
    code, printed, _ = answer(["--input", str(path)])
    assert code == 0 and [json.loads(x) for x in printed.splitlines()] == records


def test_answer_command_says_no_answer(answer, env, tmp_path):
    folder = with_threshold(env, tmp_path, -1e6)
    code, out, _ = answer(["--question", "Who built it ?", "--context", "Romans built it ."], model=str(folder))
    assert code == 0 and out.startswith("no answer: null score - best span score = ")
    code, out, _ = answer(["--question", "Who built it ?", "--context", "Romans built it .", "--na-threshold",
                           "never"], model=str(folder))
    assert code == 0 and out.startswith("answer: ")


@pytest.mark.parametrize("argv, stdin, message", [
    (["--question", "who ?"], "", "the context (passage) is empty"),
    ([], "not json\n", "standard input line 1 is not JSON"),
    ([], '{"question": "who ?"}\n', "standard input line 1: an object with \"question\" and \"context\" is needed"),
    ([], "\n", "standard input holds no questions"),
    (["--context", "Romans built it ."], None, "give the question with --question"),
    (["--input", "missing.json"], None, "input file missing.json does not exist"),
    (["--input", "__TMP__/list.json"], None, "is JSON but neither SQuAD format ({\"data\": [...]}) nor JSON lines"),
    (["--input", "x.json", "--question", "who ?"], None, "--input holds its own questions"),
    (["--question", "who ?", "--context", "Romans .", "--top-k", "0"], None, "--top-k 0: give a positive number"),
    (["--question", "who ?", "--context", "Romans .", "--na-threshold", "low"], None,
     "--na-threshold takes a number or 'never'"),
    (["--question", "who\x07 ?", "--context", "Romans ."], None, "--question:1: control character U+0007 (BEL)"),
    (["--question", "who ?", "--context", "Rom\x00ans ."], None, "--context:1: control character U+0000 (NUL)"),
    (["--question", "who ?"], "Romans \x1b built it .", "<stdin>:1: control character U+001B (ESC)"),
    ([], '{"question": "who\\u0007 ?", "context": "Romans ."}\n', "control character U+0007 (BEL) (written \\u0007)"),
    (["--question", "who ?"], "\udcff\udcfeELF\udc80", "<stdin>:1: not valid UTF-8 (byte 0xff"),
    (["--question", "who ?", "--context-file", "__TMP__"], None, "is a folder, not a file"),
    (["--question", "who ?", "--context", "Romans .", "--output", "__TMP__/missing/a.jsonl"], None,
     "the folder __TMP__/missing does not exist"),
])
def test_answer_command_bad_input_is_one_line(answer, argv, stdin, message, tmp_path):
    (tmp_path / "list.json").write_text('[\n{"question": "who ?",\n"context": "Romans ."}\n]')
    code, out, err = answer([a.replace("__TMP__", str(tmp_path)) for a in argv], stdin=stdin)
    assert code == 2 and out == "" and err.count("\n") == 1 and message.replace("__TMP__", str(tmp_path)) in err
    assert err.startswith("structattn answer: error: ")
    assert not (tmp_path / "missing").exists()


def test_a_word_for_a_flag_of_another_name_gets_a_suggestion(answer, capsys):
    with pytest.raises(SystemExit) as exit_:
        answer(["--question", "who ?", "--passage", "Romans ."])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "did you mean --passage -> --context?" in err


def test_a_control_character_in_a_question_is_refused_by_the_api(reader):
    with pytest.raises(UserError, match="question 'q0': the question holds the control character U\\+0007"):
        reader(question="Who\x07 built it ?", context="Romans built it .")


def test_the_reader_loads_spacy_once_over_many_calls(env, monkeypatch):
    import spacy

    loads = []
    real = spacy.load
    monkeypatch.setattr(spacy, "load", lambda *a, **kw: loads.append(a) or real(*a, **kw))
    reader = Reader.from_pretrained(env["best"])
    for n in range(4):  # passages no parse cache holds: each call parses
        reading = reader(question=f"Who built wall {n} ?", context=f"Romans built the {n}th wall of Town{n} in {n} AD .")
        assert reading.windows >= 1
    assert len(loads) == 1


def test_pack_reader_command_packs_and_measures(env, tmp_path, capsys):
    capsys.readouterr()
    assert cli_main(["pack-reader", str(env["best"]), str(tmp_path / "packed"), "--measure", "squad11:dev",
                     "--limit", "6"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert cost["questions"] == 6 and set(cost) >= {"float32", "packed", "f1_lost"}
    card = json.loads((tmp_path / "packed" / "card.json").read_text())
    assert card["packing_cost"] == [cost] and card["kind"] == "reader" and card["trained_on"] == "squad11"
    assert card["test"]["score"] == round(cost["packed"]["f1"], 2) and card["test"]["set"] == "squad11/dev"
    assert cli_main(["pack-reader", str(env["best"]), str(tmp_path / "p2"), "--measure", "squad11"]) == 2
    assert "give TASK:SPLIT" in capsys.readouterr().err and not (tmp_path / "p2").exists()
