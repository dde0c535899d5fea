"""A fault campaign against the ``structattn`` command line: hostile inputs, kills, concurrency, a full disk.

Every case runs the real CLI (``python -m structattn.cli ...``, this checkout's ``src`` first on ``PYTHONPATH``)
in a fresh process and is classified from what a user sees: the exit status, whether stderr holds a Python
traceback, how many lines stderr has, and whether the expected output exists (or a file that must survive is
unchanged). Kinds of cases:

- ``input``: hostile files given to every reader (empty, binary and non-UTF-8 bytes, NUL and other C0 controls,
  a folder or a missing path where a file is expected, truncated JSON and JSON lines, malformed, unbalanced and
  301-word trees, parallel files of unequal length, SQuAD files without their keys, blank and very long lines);
- ``output``: a missing output folder, a folder given as the output file, a read-only file system, and an existing
  output file that a failed run must leave unchanged;
- ``kill``: ``kill -9`` of a tiny parser or translation trainer when it reaches a phase (data loading, an update,
  a checkpoint or best/ write, an evaluation, the final test parse or translation), then the same command again;
  the resumed run's ``best/`` and ``checkpoint/`` tensors must be ``torch.equal`` to an uninterrupted run's;
- ``concurrency``: two ``preprocess`` writers into one cache (every entry kept), two trainers on one ``--output-dir``;
- ``disk``: a trainer whose ``--output-dir`` is a 2 MB tmpfs (needs ``mount``; skipped where it is refused).

Classes: ``clear error`` (exit != 0, no traceback, one message line besides usage/notes, naming an error),
``unclear error`` (exit != 0, no traceback, but several lines or no ``error:``), ``traceback``, ``success``
(exit 0 and the expected output), ``handled`` (exit 0 on a hostile input, with a note or warning about it),
``silent`` (exit 0 where the input should be refused or noted and nothing is said, or exit 0 without the expected
output), ``data lost`` (a file that had to survive changed, or a resumed run differs from an uninterrupted one),
``hang`` (ran past the time limit), ``skipped``.

Usage (from the repository root)::

    nice -n 19 env OMP_NUM_THREADS=1 python experiments/fault_campaign.py --out /tmp/faults.jsonl [--kinds input,kill]

It writes one JSON line per case to ``--out`` and prints a Markdown table of counts per kind and class.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import glob
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("STRUCTATTN_DATA", REPO.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = Path("/work/shared/data")
WSJ = DATA / "ptb_sample_nltk" / "treebank" / "combined"
MULTI30K = DATA / "multi30k" / "raw"
PARSER = "bna-scratch"
TRANSLATOR = "hybrid-gate-en-de"
CLASSES = ("clear error", "unclear error", "traceback", "success", "handled", "silent", "data lost", "hang",
           "skipped")
KINDS = ("input", "output", "kill", "signal", "checkpoint", "model", "cache", "concurrency", "disk")
# stderr lines that are not a message about the case: argparse's usage block and the library's notes/warnings
NOISE_PREFIXES = ("usage:", "structattn: warning:", "note:", "warning:")
# words of a line that tells the user something about an input it accepted
NOTICE_WORDS = ("warning", "note:", "skipp", "ignor", "dropp", "blank", "unmatch", "were cut", "no prediction",
                "parse cache:")


@dataclasses.dataclass
class Case:
    """One CLI run: ``argv`` after ``python -m structattn.cli``; ``expect`` says what a correct CLI does."""
    id: str
    kind: str
    argv: list[str]
    expect: str = "refuse"  # refuse | accept | either
    stdin: bytes | None = None
    output: str | None = None  # a file that must exist after a success
    unchanged: str | None = None  # a file whose bytes must survive the run
    timeout: float = 300.0


@dataclasses.dataclass
class Outcome:
    rc: int | None
    stderr: str
    seconds: float


def cli_env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("STRUCTATTN_KILL_AT_STEP", None)
    return env


def cli_command(argv: list[str]) -> list[str]:
    return [sys.executable, "-m", "structattn.cli", *argv]


def run_cli(argv: list[str], stdin: bytes | None = None, timeout: float = 300.0, env: dict | None = None) -> Outcome:
    """Run the CLI once in a fresh process; rc None = killed at ``timeout``."""
    t0 = time.time()
    try:
        p = subprocess.run(cli_command(argv), input=stdin if stdin is not None else b"", capture_output=True,
                           timeout=timeout, env=env or cli_env(), cwd="/tmp")
        return Outcome(p.returncode, p.stderr.decode("utf-8", "replace"), time.time() - t0)
    except subprocess.TimeoutExpired as e:
        return Outcome(None, (e.stderr or b"").decode("utf-8", "replace"), time.time() - t0)


def message_lines(stderr: str) -> list[str]:
    """stderr without blank lines, argparse's usage block (its first line and the indented rest) and notes."""
    out = []
    for line in stderr.splitlines():
        if not line.strip() or line.startswith((" ", "\t")) or line.startswith(NOISE_PREFIXES):
            continue
        if "\r" in line or "it/s]" in line or "s/it]" in line:  # a progress bar
            continue
        out.append(line)
    return out


def classify(outcome: Outcome, expect: str = "refuse", output: Path | None = None,
             unchanged: tuple[Path, bytes] | None = None) -> str:
    """One class of :data:`CLASSES` for a finished run (see the module docstring)."""
    if unchanged is not None:
        path, before = unchanged
        if not path.is_file() or path.read_bytes() != before:
            return "data lost"
    if outcome.rc is None:
        return "hang"
    if "Traceback" in outcome.stderr:
        return "traceback"
    lines = message_lines(outcome.stderr)
    if outcome.rc != 0:
        return "clear error" if len(lines) == 1 and "error" in lines[0] else "unclear error"
    if output is not None and not output.exists():
        return "silent"
    if expect == "refuse":  # a trainer's progress lines are no message about the input
        return "handled" if any(word in outcome.stderr.lower() for word in NOTICE_WORDS) else "silent"
    return "success"


def first_line(stderr: str) -> str:
    lines = message_lines(stderr) or [line for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if "Traceback" in stderr and not line.startswith("Traceback"):
            continue
        return line[:300]
    return lines[0][:300] if lines else ""


def last_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def record(case_id: str, kind: str, command: list[str], outcome: Outcome, cls: str, **extra) -> dict:
    row = {"id": case_id, "kind": kind, "command": " ".join(["structattn", *command]), "rc": outcome.rc,
           "class": cls, "stderr_first": first_line(outcome.stderr), "stderr_last": last_error_line(outcome.stderr),
           "stderr_lines": len(outcome.stderr.splitlines()), "stderr_tail": outcome.stderr[-1500:],
           "seconds": round(outcome.seconds, 1)}
    row.update(extra)
    return row


def run_case(case: Case) -> dict:
    before = None
    if case.unchanged:
        before = (Path(case.unchanged), Path(case.unchanged).read_bytes())
    outcome = run_cli(case.argv, case.stdin, case.timeout)
    cls = classify(outcome, case.expect, Path(case.output) if case.output else None, before)
    return record(case.id, case.kind, case.argv, outcome, cls, expect=case.expect)


# ---------------------------------------------------------------- hostile files

TREE = "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .)))"
TINY_TREES = [
    TREE,
    "(TOP (S (NP (PRP She)) (VP (VBZ likes) (NP (JJ green) (NNS apples))) (. .)))",
    "(TOP (S (NP (NNS Dogs)) (VP (VBP bark) (ADVP (RB loudly))) (. .)))",
    "(TOP (S (NP (DT A) (NN man)) (VP (VBD walked) (NP (DT the) (NN dog))) (. .)))",
    "(TOP (S (NP (PRP He)) (VP (VBD read) (NP (DT a) (NN book))) (. .)))",
    "(TOP (S (NP (DT The) (NNS children)) (VP (VBD played) (PP (IN in) (NP (DT the) (NN park)))) (. .)))",
]


def write(path: Path, data: bytes | str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return str(path)


def text_variants(d: Path, good: str) -> dict[str, tuple[str, str]]:
    """Hostile versions of a one-sentence-per-line text file: name -> (path, expect)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "folder").mkdir(exist_ok=True)
    return {
        "empty": (write(d / "empty.txt", ""), "either"),
        "binary": (write(d / "binary.txt", bytes(range(256)) * 8), "refuse"),
        "latin1": (write(d / "latin1.txt", f"Le café est fermé.\n{good}\n".encode("latin-1")), "refuse"),
        "nul": (write(d / "nul.txt", f"{good}\nA d\x00og runs.\n"), "refuse"),
        "c0": (write(d / "c0.txt", f"{good}\nA d\x07og\x1b runs.\n"), "refuse"),
        "folder": (str(d / "folder"), "refuse"),
        "missing": (str(d / "missing.txt"), "refuse"),
        "blank_lines": (write(d / "blank.txt", f"{good}\n\n   \n{good}\n"), "accept"),
        "bom_crlf": (write(d / "bom.txt", f"\ufeff{good}\r\n{good}\r\n"), "accept"),
        "long_line": (write(d / "long.txt", " ".join(["word"] * 5000) + " .\n"), "either"),
    }


def tree_variants(d: Path) -> dict[str, tuple[str, str]]:
    """Hostile treebank files: name -> (path, expect)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "folder").mkdir(exist_ok=True)
    long_tree = "(TOP (S " + " ".join(f"(NN w{i})" for i in range(301)) + "))"
    return {
        "empty": (write(d / "empty.trees", ""), "refuse"),
        "binary": (write(d / "binary.trees", bytes(range(256)) * 8), "refuse"),
        "latin1": (write(d / "latin1.trees", "(TOP (S (NP (NN café)) (VP (VBZ est))))\n".encode("latin-1")), "refuse"),
        "nul": (write(d / "nul.trees", TREE + "\n(TOP (S (NP (NN d\x00og)) (VP (VBZ runs))))\n"), "refuse"),
        "malformed": (write(d / "malformed.trees", TREE + "\n(TOP (S NP (NN dog)) VP (VBZ runs))) )(\n"), "refuse"),
        "unbalanced_open": (write(d / "unbal_open.trees", TREE + "\n(TOP (S (NP (NN dog)) (VP (VBZ runs))\n"),
                            "refuse"),
        "unbalanced_close": (write(d / "unbal_close.trees", TREE + "\n(TOP (S (NP (NN dog)) (VP (VBZ runs)))))))\n"),
                             "refuse"),
        "words_301": (write(d / "long.trees", TREE + "\n" + long_tree + "\n"), "refuse"),
        "no_label": (write(d / "nolabel.trees", "(TOP (NN dog))\n(TOP (NN cat))\n"), "refuse"),
        "plain_text": (write(d / "text.trees", "The cat sat on the mat .\n"), "refuse"),
        "folder": (str(d / "folder"), "refuse"),
        "missing": (str(d / "missing.trees"), "refuse"),
    }


def input_cases(root: Path) -> list[Case]:
    cases: list[Case] = []
    good_sentence = "A man is walking his dog in the park ."
    txt = text_variants(root / "text", good_sentence)
    trees = tree_variants(root / "trees")
    good_trees = write(root / "good.trees", "\n".join(TINY_TREES) + "\n")
    out = root / "out"
    out.mkdir(parents=True, exist_ok=True)

    def add(cid, argv, expect="refuse", output=None, **kw):
        cases.append(Case(cid, "input", argv, expect, output=output, **kw))

    # parse: raw text and pre-tokenised, translate: every text variant
    pretok_301 = write(root / "text" / "pretok301.txt", " ".join(f"w{i}" for i in range(301)) + "\n")
    for name, (path, expect) in txt.items():
        o = str(out / f"parse-{name}.trees")
        add(f"parse-raw-{name}", ["parse", "--model", PARSER, "--input", path, "--output", o, "--tags", "none"],
            expect, o if expect != "refuse" else None)
        o = str(out / f"parse-pretok-{name}.trees")
        add(f"parse-pretok-{name}", ["parse", "--model", PARSER, "--pretokenized", "--input", path, "--output", o],
            expect, o if expect != "refuse" else None)
    add("parse-pretok-301-words", ["parse", "--model", PARSER, "--pretokenized", "--input", pretok_301], "either")
    add("parse-stdin-nul", ["parse", "--model", PARSER, "--pretokenized"], stdin=b"a dog\x00 runs\n")
    add("parse-stdin-binary", ["parse", "--model", PARSER], stdin=bytes(range(256)) * 4)
    for name in ("empty", "binary", "latin1", "nul", "folder", "missing", "blank_lines", "long_line"):
        path, expect = txt[name]
        o = str(out / f"translate-{name}.de")
        add(f"translate-{name}", ["translate", "--model", TRANSLATOR, "--beam", "1", "--input", path, "--output", o],
            expect, o if expect != "refuse" else None)

    # answer --input (SQuAD JSON or JSON lines); no reader may be installed: then the model is what is refused
    sq = root / "squad"
    squad_good = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "The cat sat on the mat.",
                  "qas": [{"id": "q1", "question": "Where did the cat sit?",
                           "answers": [{"text": "on the mat", "answer_start": 12}], "is_impossible": False}]}]}]}
    squad = {
        "truncated": write(sq / "trunc.json", json.dumps(squad_good)[:60]),
        "no_data_key": write(sq / "nodata.json", json.dumps({"version": "v2.0"})),
        "no_context": write(sq / "nocontext.json", json.dumps({"data": [{"title": "t", "paragraphs": [{"qas": [
            {"id": "q1", "question": "Where?", "answers": []}]}]}]})),
        "no_question": write(sq / "noquestion.json", json.dumps({"data": [{"title": "t", "paragraphs": [
            {"context": "The cat sat.", "qas": [{"id": "q1", "answers": []}]}]}]})),
        "no_title": write(sq / "notitle.json", json.dumps({"data": [{"paragraphs": [{"context": "The cat sat.",
                          "qas": [{"id": "q1", "question": "Where?", "answers": []}]}]}]})),
        "not_object": write(sq / "list.json", "[1, 2, 3]"),
        "jsonl_bad_line": write(sq / "bad.jsonl", json.dumps({"question": "Where?", "context": "Here.", "id": "a"})
                                + "\n{\"question\": \"Who\n"),
        "jsonl_missing_key": write(sq / "nokey.jsonl", json.dumps({"question": "Where?", "id": "a"}) + "\n"),
        "binary": txt["binary"][0],
        "empty": txt["empty"][0],
        "nul_escaped": write(sq / "nul.json", json.dumps({"question": "Wh\u0000ere?", "context": "Here.", "id": "a"})),
        "folder": txt["folder"][0],
        "missing": txt["missing"][0],
    }
    good_squad = write(sq / "good.json", json.dumps(squad_good))
    for name in ("truncated", "jsonl_bad_line", "binary", "missing"):
        add(f"answer-input-{name}", ["answer", "--model", "sgnet-squad2", "--input", squad[name]])

    # score squad: --gold, --predictions, --na-prob
    good_pred = write(sq / "pred.json", json.dumps({"q1": "on the mat"}))
    for name in ("truncated", "no_data_key", "no_title", "no_context", "no_question", "not_object", "binary", "empty",
                 "folder", "missing"):
        add(f"score-squad-data-{name}", ["score", "squad", "--gold", squad[name], "--predictions", good_pred])
    pred_bad = {
        "truncated": write(sq / "pred_trunc.json", '{"q1": "on the'),
        "list": write(sq / "pred_list.json", '["on the mat"]'),
        "non_string": write(sq / "pred_num.json", '{"q1": 3}'),
        "unknown_ids": write(sq / "pred_unknown.json", '{"zz": "x"}'),
        "nul": write(sq / "pred_nul.json", '{"q1": "on the\\u0000 mat"}'),
        "missing": str(sq / "missing.json"),
    }
    for name, path in pred_bad.items():
        add(f"score-squad-pred-{name}", ["score", "squad", "--gold", good_squad, "--predictions", path],
            "either" if name == "unknown_ids" else "refuse")
    add("score-squad-naprob-truncated", ["score", "squad", "--gold", good_squad, "--predictions", good_pred,
                                         "--na-prob", squad["truncated"]])
    add("score-squad-naprob-strings", ["score", "squad", "--gold", good_squad, "--predictions", good_pred,
                                       "--na-prob", write(sq / "na_str.json", '{"q1": "high"}')])

    # score bleu: predictions and references
    ref3 = write(root / "bleu" / "ref.txt", "Ein Mann geht.\nEin Hund läuft.\nEine Katze schläft.\n")
    hyp2 = write(root / "bleu" / "hyp2.txt", "Ein Mann geht.\nEin Hund läuft.\n")
    add("score-bleu-unequal-lines", ["score", "bleu", "--gold", ref3, "--predictions", hyp2])
    for name in ("empty", "binary", "latin1", "nul", "folder", "missing", "blank_lines"):
        path, _ = txt[name]
        add(f"score-bleu-hyp-{name}", ["score", "bleu", "--gold", ref3, "--predictions", path])
    for name in ("binary", "missing"):
        add(f"score-bleu-ref-{name}", ["score", "bleu", "--gold", txt[name][0], "--predictions", ref3])
    add("score-bleu-unknown-split", ["score", "bleu", "--split", "test2099", "--predictions", ref3])

    # score evalb: --gold and --predictions
    gold2 = write(root / "evalb" / "gold2.trees", "\n".join(TINY_TREES[:2]) + "\n")
    add("score-evalb-unequal-count", ["score", "evalb", "--gold", gold2, "--predictions", good_trees])
    for name in ("empty", "binary", "nul", "malformed", "unbalanced_open", "unbalanced_close", "plain_text",
                 "folder", "missing"):
        path, _ = trees[name]
        add(f"score-evalb-pred-{name}", ["score", "evalb", "--gold", gold2, "--predictions", path])
    for name in ("malformed", "binary", "missing"):
        add(f"score-evalb-gold-{name}", ["score", "evalb", "--gold", trees[name][0], "--predictions", gold2])
    add("score-evalb-words-differ", ["score", "evalb", "--gold", gold2, "--predictions", write(root / "evalb" / "other.trees",
                                                                   "\n".join(TINY_TREES[2:4]) + "\n")])

    # train-parsing: own treebank files (each must be refused before the first update)
    tp = ["--model", "none", "--pos", "none", "--epochs", "1", "--batch-size", "2", "--no-progress"]
    for role in ("train", "dev", "test"):
        names = (trees.keys() if role == "train" else
                 ("binary", "malformed", "unbalanced_open", "words_301", "empty", "missing"))
        for name in names:
            files = {"train": good_trees, "dev": good_trees, "test": good_trees, role: trees[name][0]}
            od = root / "runs" / f"tp-{role}-{name}"
            add(f"train-parsing-{role}-{name}",
                ["train-parsing", "--train", files["train"], "--dev", files["dev"], "--test", files["test"], *tp,
                 "--output-dir", str(od)])
    add("train-parsing-config-truncated", ["train-parsing", "--config", write(root / "cfg" / "trunc.json",
                                                                              '{"epochs": 1,'),
                                           "--output-dir", str(root / "runs" / "tp-cfg")])
    add("train-parsing-config-unknown-key", ["train-parsing", "--config", write(root / "cfg" / "unk.json",
                                             '{"epochz": 1}'), "--output-dir", str(root / "runs" / "tp-cfg2")])
    add("train-parsing-train-without-dev", ["train-parsing", "--train", good_trees, *tp,
                                            "--output-dir", str(root / "runs" / "tp-nodev")])

    # train-translation: own parallel files
    par = root / "parallel"
    en = write(par / "tr.en", "A man walks.\nA dog runs.\nA cat sleeps.\nTwo men talk.\n")
    de = write(par / "tr.de", "Ein Mann geht.\nEin Hund rennt.\nEine Katze schläft.\nZwei Männer reden.\n")
    de3 = write(par / "tr3.de", "Ein Mann geht.\nEin Hund rennt.\nEine Katze schläft.\n")
    tt = ["--size", "micro", "--max-length", "64", "--vocab-size", "120", "--max-steps", "2", "--eval-every", "2",
          "--warmup-steps", "1", "--max-tokens", "256", "--beam", "1", "--no-progress"]
    par_cases = {
        "unequal-lines": (en, de3, en, de),
        "train-source-empty": (txt["empty"][0], de, en, de),
        "train-target-binary": (en, txt["binary"][0], en, de),
        "train-source-nul": (txt["nul"][0], de, en, de),
        "train-source-latin1": (txt["latin1"][0], de, en, de),
        "dev-target-missing": (en, de, en, txt["missing"][0]),
        "dev-source-folder": (en, de, txt["folder"][0], de),
        "train-blank-line": (write(par / "blank.en", "A man walks.\n\nA cat sleeps.\nTwo men talk.\n"), de, en, de),
    }
    for name, (ts, tg, ds, dg) in par_cases.items():
        add(f"train-translation-{name}",
            ["train-translation", "--train-source", ts, "--train-target", tg, "--dev-source", ds, "--dev-target", dg,
             *tt, "--output-dir", str(root / "runs" / f"tt-{name}")])
    add("train-translation-test-without-target",
        ["train-translation", "--train-source", en, "--train-target", de, "--dev-source", en, "--dev-target", de,
         "--test-source", en, *tt, "--output-dir", str(root / "runs" / "tt-test-no-target")])

    # train: the only user file is --config
    for name, text in (("truncated", '{"task": "sst2",'), ("not-object", "[1, 2]"), ("unknown-key", '{"tsk": 1}'),
                       ("bad-value", '{"task": "nosuchtask"}')):
        add(f"train-config-{name}", ["train", "--config", write(root / "cfg" / f"train-{name}.json", text),
                                     "--output-dir", str(root / "runs" / f"train-cfg-{name}")])
    add("train-config-binary", ["train", "--config", txt["binary"][0], "--output-dir", str(root / "runs" / "tc-bin")])

    # predict and probe: model folders that are not what they should be, hostile --input
    empty_dir = root / "emptydir"
    empty_dir.mkdir(exist_ok=True)
    for name, model in (("missing", str(root / "nomodel")), ("file", good_trees), ("empty-folder", str(empty_dir))):
        add(f"predict-model-{name}", ["predict", "--model", model])
        add(f"probe-model-{name}", ["probe", "--model", model, "--tasks", "SeLn"])
    add("predict-data-truncated", ["predict", "--model", str(empty_dir), "--input", squad["truncated"]])
    return cases


def output_cases(root: Path, ro_dir: Path | None) -> list[Case]:
    """Output paths: missing folder, a folder as the file, a read-only file system, a file that must survive."""
    cases: list[Case] = []
    good = write(root / "good.txt", "A man is walking his dog .\n")
    nul = write(root / "nul.txt", "A man\x00 is walking .\n")
    folder = root / "outfolder"
    folder.mkdir(parents=True, exist_ok=True)
    a_file = write(root / "a_file", "x\n")
    targets = {"missing-folder": str(root / "nodir" / "x.out"), "folder": str(folder)}
    if ro_dir is not None:
        targets["read-only-fs"] = str(ro_dir / "x.out")
    for name, target in targets.items():
        cases.append(Case(f"parse-output-{name}", "output",
                          ["parse", "--model", PARSER, "--pretokenized", "--input", good, "--output", target]))
        cases.append(Case(f"translate-output-{name}", "output",
                          ["translate", "--model", TRANSLATOR, "--beam", "1", "--input", good, "--output", target]))
        cases.append(Case(f"probe-output-{name}", "output", ["probe", "--model", TRANSLATOR, "--tasks", "SeLn",
                                                              "--output", target]))
        cases.append(Case(f"score-squad-output-{name}", "output",
                          ["score", "squad", "--gold", write(root / "s.json", json.dumps({"data": []})),
                           "--predictions", write(root / "p.json", "{}"), "--output", target]))
    trainer = ["train-parsing", "--train", write(root / "t.trees", "\n".join(TINY_TREES) + "\n"),
               "--dev", str(root / "t.trees"), "--model", "none", "--pos", "none", "--epochs", "1", "--no-progress"]
    cases.append(Case("train-parsing-output-dir-is-file", "output", [*trainer, "--output-dir", a_file]))
    cases.append(Case("train-parsing-output-dir-under-file", "output", [*trainer, "--output-dir", a_file + "/run"]))
    if ro_dir is not None:
        cases.append(Case("train-parsing-output-dir-read-only", "output",
                          [*trainer, "--output-dir", str(ro_dir / "run")]))
        cases.append(Case("train-translation-output-dir-read-only", "output",
                          ["train-translation", "--size", "micro", "--max-length", "64", "--max-steps", "1",
                           "--output-dir", str(ro_dir / "nmt")]))
    keep = write(root / "keep.trees", "(TOP (X keep))\n")
    cases.append(Case("parse-failed-run-keeps-output", "output",
                      ["parse", "--model", PARSER, "--pretokenized", "--input", nul, "--output", keep],
                      unchanged=keep))
    keep2 = write(root / "keep.de", "behalten\n")
    cases.append(Case("translate-failed-run-keeps-output", "output",
                      ["translate", "--model", TRANSLATOR, "--input", nul, "--output", keep2], unchanged=keep2))
    return cases


# ---------------------------------------------------------------- kills

def tensors_equal(a: Path, b: Path) -> tuple[bool, str]:
    """Whether two safetensors files hold the same names and ``torch.equal`` tensors (why not, if not)."""
    import torch
    from safetensors.torch import load_file
    if not a.is_file() or not b.is_file():
        return False, f"missing {a if not a.is_file() else b}"
    ta, tb = load_file(str(a)), load_file(str(b))
    if ta.keys() != tb.keys():
        return False, "different tensor names"
    diff = [k for k in ta if not torch.equal(ta[k], tb[k])]
    return not diff, f"{len(diff)} of {len(ta)} tensors differ (e.g. {diff[0]})" if diff else "equal"


def compare_runs(run: Path, reference: Path, files: tuple[str, ...]) -> tuple[bool, str]:
    """Compare a resumed run's tensors and text outputs with an uninterrupted one's."""
    notes = []
    ok = True
    for rel in files:
        a, b = run / rel, reference / rel
        if rel.endswith(".safetensors"):
            same, why = tensors_equal(a, b)
        else:
            same = a.is_file() and b.is_file() and a.read_bytes() == b.read_bytes()
            why = "equal" if same else "differ"
        ok &= same
        if not same:
            notes.append(f"{rel}: {why}")
    return ok, "; ".join(notes) or "torch.equal and byte-equal to the uninterrupted run"


def leftovers(run: Path) -> list[str]:
    """Temporary folders and files of interrupted writes (``.<name>.tmp-*``, ``.<name>.old-*``, ``.<name>.*.tmp``)."""
    return sorted(p.name for pattern in (".*tmp-*", ".*old-*", ".*.tmp") for p in run.glob(pattern))


def run_until(argv: list[str], trigger, timeout: float = 300.0, delay: float = 0.0,
              sig: int = signal.SIGKILL) -> tuple[Outcome, bool, str]:
    """Start the CLI, send ``sig`` (SIGKILL) when ``trigger(output)`` returns a description; (outcome, signalled,
    what).

    ``output`` is stdout and stderr together (the trainers print their phases on both)."""
    err_path = Path(f"/tmp/faults/.stderr-{os.getpid()}-{time.time_ns()}")
    err_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with open(err_path, "wb") as err:
        p = subprocess.Popen(cli_command(argv), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                             env=cli_env(), cwd="/tmp")
        what = ""
        while p.poll() is None and time.time() - t0 < timeout:
            what = trigger(err_path.read_text("utf-8", "replace"))
            if what:
                if delay:
                    time.sleep(delay)
                p.send_signal(sig)
                break
            time.sleep(0.005)
        if p.poll() is None and not what:
            p.kill()
        rc = p.wait()
    text = err_path.read_text("utf-8", "replace")
    err_path.unlink()
    return Outcome(rc, text, time.time() - t0), bool(what) and rc in (-sig, 128 + sig), what


def dir_trigger(run: Path, pattern: str, what: str):
    return lambda _err: what if list(run.glob(pattern)) else ""


def state_step(run: Path) -> int:
    try:
        return json.loads((run / "checkpoint" / "state.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return -1


def parser_setup(root: Path) -> tuple[list[str], Path] | None:
    """A tiny own-treebank parser run: 6 training trees, dev and test from the WSJ sample (slow to parse)."""
    mrg = sorted(glob.glob(str(WSJ / "wsj_01*.mrg")))[:8]
    if not mrg:
        return None
    train = write(root / "train.trees", "\n".join(TINY_TREES) + "\n")
    evalset = write(root / "eval.trees", "".join(Path(m).read_text() for m in mrg))
    argv = ["train-parsing", "--train", train, "--dev", evalset, "--test", evalset, "--model", "none", "--pos", "none",
            "--epochs", "3", "--batch-size", "2", "--checkpoint-every", "1", "--no-progress"]
    return argv, root


def nmt_setup(root: Path) -> tuple[list[str], Path] | None:
    if not (MULTI30K / "train.en").is_file():
        return None

    def head(src: str, n: int, dst: str) -> str:
        with open(MULTI30K / src, encoding="utf-8") as f:
            return write(root / dst, "".join(next(f) for _ in range(n)))
    argv = ["train-translation", "--size", "micro", "--max-length", "64", "--vocab-size", "300",
            "--train-source", head("train.en", 60, "tr.en"), "--train-target", head("train.de", 60, "tr.de"),
            "--dev-source", head("val.en", 40, "dv.en"), "--dev-target", head("val.de", 40, "dv.de"),
            "--test-source", str(root / "dv.en"), "--test-target", str(root / "dv.de"),
            "--max-steps", "6", "--eval-every", "3", "--warmup-steps", "2", "--max-tokens", "256",
            "--beam", "2", "--checkpoint-every", "1", "--no-progress"]
    return argv, root


PARSER_FILES = ("best/model.safetensors", "checkpoint/model.safetensors", "dev.trees", "test.trees")
NMT_FILES = ("best/model.safetensors", "checkpoint/model.safetensors", "final/model.safetensors")


def stopped_class(out: Outcome, sig: int) -> str:
    """How a trainer stopped by ``sig`` ended: SIGKILL needs nothing; SIGTERM and SIGINT must exit 128 + the signal
    number, without a traceback, with the last line ``stopped by <SIG>; resume with the same command``."""
    if sig == signal.SIGKILL:
        return "success"
    if "Traceback" in out.stderr:
        return "traceback"
    name = signal.Signals(sig).name
    said = last_error_line(out.stderr) == f"stopped by {name}; resume with the same command"
    return "success" if out.rc == 128 + sig and said else "unclear error"


def kill_cases(root: Path, only: set[str] | None = None, sig: int = signal.SIGKILL,
               kind: str = "kill", ids: list[str] | None = None) -> Iterator[dict]:
    """``sig`` (SIGKILL; the ``signal`` kind: SIGTERM and SIGINT) at each phase of the tiny parser and translation
    trainers, then the same command again, compared with an uninterrupted run."""
    verb = "kill" if sig == signal.SIGKILL else signal.Signals(sig).name.lower()
    setups = []
    ps = parser_setup(root / "parser")
    if ps:
        argv, d = ps

        def parser_phases(run: Path):
            return {
                "data-loading": (lambda e: "after 'train: using'" if "train: using" in e else "", 0.0),
                "update": (lambda e: f"checkpoint step {state_step(run)} committed, next update running"
                           if state_step(run) >= 1 and not list(run.glob(".checkpoint.tmp-*")) else "", 0.02),
                "checkpoint-write": (dir_trigger(run, ".checkpoint.tmp-*", "a .checkpoint.tmp-* folder exists"), 0.0),
                "checkpoint-replace": (lambda e: f"a .checkpoint.tmp-* folder beside checkpoint step {state_step(run)}"
                                       if state_step(run) >= 1 and list(run.glob(".checkpoint.tmp-*")) else "", 0.0),
                "best-write": (dir_trigger(run, ".best.tmp-*", "a .best.tmp-* folder exists"), 0.0),
                "evaluation": (lambda e: f"checkpoint step {state_step(run)}, evaluation of step 3 running"
                               if state_step(run) == 2 else "", 0.4),
                "final-test-parse": (lambda e: "after 'test (final parse): using'" if "test (final parse)" in e
                                     else "", 0.3),
            }
        setups.append(("train-parsing", argv, d, parser_phases, PARSER_FILES))
    ns = nmt_setup(root / "nmt")
    if ns:
        argv, d = ns

        def nmt_phases(run: Path):
            return {
                "data-loading": (lambda e: "1.5 s after start, before the output folder" if not run.exists()
                                 and time.time() - nmt_phases.t0 > 1.5 else "", 0.0),
                "update": (lambda e: f"checkpoint step {state_step(run)} committed" if state_step(run) >= 1 else "",
                           0.02),
                "checkpoint-write": (dir_trigger(run, ".checkpoint.tmp-*", "a .checkpoint.tmp-* folder exists"), 0.0),
                "checkpoint-replace": (lambda e: f"a .checkpoint.tmp-* folder beside checkpoint step {state_step(run)}"
                                       if state_step(run) >= 1 and list(run.glob(".checkpoint.tmp-*")) else "", 0.0),
                "evaluation": (lambda e: "checkpoint step 2, dev BLEU of step 3 running"
                               if state_step(run) == 2 else "", 0.15),
                "final-translation": (lambda e: "after the last dev evaluation line" if "step 6: dev" in e else "",
                                      0.5),
            }
        setups.append(("train-translation", argv, d, nmt_phases, NMT_FILES))

    for name, argv, d, phases, files in setups:
        if ids and not any(w.startswith(f"{name}-{verb}") or f"{name}-{verb}".startswith(w) for w in ids):
            continue  # none of this trainer's cases is asked for
        ref = d / "reference"
        if all((ref / f).is_file() for f in files):  # made by this campaign for another signal
            ref_out = Outcome(0, "", 0.0)
        else:
            shutil.rmtree(ref, ignore_errors=True)
            ref_out = run_cli([*argv, "--output-dir", str(ref)])
        if sig == signal.SIGKILL:
            yield (record(f"{name}-uninterrupted", kind, [*argv, "--output-dir", str(ref)], ref_out,
                          "success" if ref_out.rc == 0 else classify(ref_out)))
        if ref_out.rc != 0:
            continue
        probe_run = d / "probe"
        for phase in phases(probe_run):
            if (only and phase not in only) or (ids and not any(w in f"{name}-{verb}-{phase}" for w in ids)):
                continue
            run = d / f"{verb}-{phase}"
            shutil.rmtree(run, ignore_errors=True)
            trig, delay = phases(run)[phase]
            if name == "train-translation":
                phases.t0 = time.time()
            cmd = [*argv, "--output-dir", str(run)]
            killed_out, killed, what = run_until(cmd, trig, delay=delay, sig=sig)
            state = {"killed": killed, "trigger": what, "step_at_kill": state_step(run), "leftovers": leftovers(run),
                     "stopped_rc": killed_out.rc, "stopped_last": last_error_line(killed_out.stderr)}
            if not killed:
                yield (record(f"{name}-{verb}-{phase}", kind, cmd, killed_out, "skipped",
                                   note="the run ended before the phase was seen", **state))
                continue
            stopped = stopped_class(killed_out, sig)
            if stopped != "success":
                yield (record(f"{name}-{verb}-{phase}", kind, cmd, killed_out, stopped,
                              note="the signalled run did not stop cleanly", **state))
                continue
            again = run_cli(cmd)
            if again.rc != 0:
                cls = classify(again)
                note = "the rerun failed"
            else:
                same, note = compare_runs(run, ref, files)
                cls = "success" if same else "data lost"
                if leftovers(run):
                    note += f"; leftovers after the rerun: {leftovers(run)}"
            yield (record(f"{name}-{verb}-{phase}", kind, cmd, again, cls, note=note, **state))


# ---------------------------------------------------------------- damaged checkpoints, model folders and caches
def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size) if path.stat().st_size else b"\x00")


DAMAGES = {"truncated": truncate, "emptied": lambda p: p.write_bytes(b""), "garbage": garbage,
           "deleted": lambda p: p.unlink()}


def damaged_copy(template: Path, dst: Path, file: str, how: str) -> Path:
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(template, dst)
    DAMAGES[how](dst / file)
    return dst


def checkpoint_cases(root: Path) -> Iterator[dict]:
    """A tiny parser trainer (6 own trees, d_model 16) killed at update 5 (``checkpoint/`` of step 4, ``previous-checkpoint/`` of step 3, the
    ``best/`` of step 3); each file of them damaged in turn (truncated, emptied, replaced by random bytes of its
    size, deleted), then the same command: it must name the damaged file and end equal to an uninterrupted run
    (``handled``), or refuse in one line where no safe fallback exists (``settings.json``: ``clear error``)."""
    d = root / "parser"
    trees = write(d / "train.trees", "\n".join(TINY_TREES) + "\n")
    argv = ["train-parsing", "--train", trees, "--dev", trees, "--test", trees, "--model", "none", "--pos", "none",
            "--epochs", "3", "--batch-size", "2", "--checkpoint-every", "1", "--d-model", "16", "--num-layers", "1",
            "--heads", "2", "--d-head", "8", "--d-ff", "32", "--label-hidden", "16", "--char-dim", "8",
            "--word-dim", "16", "--no-progress"]
    ref, template = d / "reference", d / "killed"
    for folder in (ref, template):
        shutil.rmtree(folder, ignore_errors=True)
    if run_cli([*argv, "--output-dir", str(ref)]).rc != 0:
        return
    env = dict(cli_env(), STRUCTATTN_KILL_AT_STEP="5")
    run_cli([*argv, "--output-dir", str(template)], env=env)
    files = [f"checkpoint/{p.name}" for p in sorted((template / "checkpoint").iterdir())]
    files += ["best/model.safetensors", "best/config.json", "settings.json"]
    for file in files:
        for how in DAMAGES:
            run = damaged_copy(template, d / "case", file, how)
            cmd = [*argv, "--output-dir", str(run)]
            out = run_cli(cmd)
            named = Path(file).name in out.stderr
            if out.rc != 0 or "Traceback" in out.stderr:
                cls = classify(out)
            else:
                same, note = compare_runs(run, ref, PARSER_FILES)
                # a deleted manifest (beside previous-checkpoint/'s) leaves files whose form is checked: it resumes
                cls = "data lost" if not same else ("handled" if named else
                                                    "success" if file.endswith("manifest.json") else "silent")
            yield record(f"checkpoint-{file.replace('/', '-')}-{how}", "checkpoint", cmd, out, cls,
                         note=next((ln for ln in out.stderr.splitlines() if Path(file).name in ln), "")[:300])


def model_cases(root: Path) -> Iterator[dict]:
    """Copies of the shipped parser, translator and reader with one file damaged, given to ``parse``, ``translate``
    and ``answer``: one line naming it (``clear error``)."""
    sentence = write(root / "one.txt", "The cat sat on the mat .\n")
    commands = {"bna-scratch": ["parse", "--input", sentence, "--output", str(root / "out.trees")],
                "hybrid-gate-en-de": ["translate", "--input", sentence, "--output", str(root / "out.de")],
                "sgnet-squad2": ["answer", "--question", "Where did the cat sit?", "--context",
                                 "The cat sat on the mat."]}
    for name, argv in commands.items():
        shipped = REPO / "src" / "structattn" / "trained" / name
        if not (shipped / "model.safetensors").is_file():
            continue
        files = ["model.safetensors", "config.json"] + [f for f in ("vocab.txt", "tokenizer.json")
                                                       if (shipped / f).is_file()]
        for file in files:
            for how in ("truncated", "garbage", "deleted"):
                folder = damaged_copy(shipped, root / name, file, how)
                cmd = [*argv, "--model", str(folder)]
                yield record(f"model-{name}-{file}-{how}", "model", cmd, *_run_classified(cmd))


def _run_classified(cmd: list[str], env: dict | None = None, expect: str = "refuse") -> tuple[Outcome, str]:
    out = run_cli(cmd, env=env)
    return out, classify(out, expect)


def cache_cases(root: Path) -> Iterator[dict]:
    """The parse cache damaged (empty, truncated, random bytes) and read-only (a tmpfs remounted read-only):
    ``preprocess`` must say so and finish (``handled``; read-only: every cached item served, the note counting
    the writes skipped), ``cache info`` must read it, ``cache prune --all`` refuse in one line."""
    words = write(root / "words.txt", "".join(f"sentence number {i} is here .\n" for i in range(40)))
    fill = ["preprocess", "--words-file", words, "--no-progress", "--batch-size", "16"]
    good = root / "good"
    shutil.rmtree(good, ignore_errors=True)
    run_cli(fill, env=dict(cli_env(), STRUCTATTN_CACHE=str(good)))
    database = next(good.rglob("*.sqlite3"), None)
    if database is None:
        return
    for how in ("emptied", "truncated", "garbage"):
        cache = root / f"cache-{how}"
        damaged_copy(good, cache, str(database.relative_to(good)), how)
        for suffix in ("-wal", "-shm"):  # the damage is the database file's alone
            Path(f"{cache / database.relative_to(good)}{suffix}").unlink(missing_ok=True)
        out, cls = _run_classified(fill, env=dict(cli_env(), STRUCTATTN_CACHE=str(cache)))
        yield record(f"cache-{how}-preprocess", "cache", fill, out, cls)
    mnt = root / "ro"
    ok, why = mount_tmpfs(mnt, "8m")
    if not ok:
        yield record("cache-read-only", "cache", fill, Outcome(None, why, 0.0), "skipped", note=f"mount refused: {why}")
        return
    try:
        shutil.copytree(good, mnt / "cache")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        env = dict(cli_env(), STRUCTATTN_CACHE=str(mnt / "cache"))
        more = write(root / "more.txt", "".join(f"another sentence {i} .\n" for i in range(5)))
        for cid, cmd, expect in (("preprocess-all-cached", fill, "refuse"),
                                 ("preprocess-new-items", ["preprocess", "--words-file", more, "--no-progress"],
                                  "refuse"),
                                 ("info", ["cache", "info"], "accept"), ("prune", ["cache", "prune", "--all"], "refuse")):
            out, cls = _run_classified(cmd, env=env, expect=expect)
            if cid == "preprocess-all-cached" and cls == "handled" and "40 of 40 items from it" not in out.stderr:
                cls = "silent"  # exit 0, but the cached items were not served
            yield record(f"cache-read-only-{cid}", "cache", cmd, out, cls)
    finally:
        umount(mnt)


# ---------------------------------------------------------------- concurrency and disk

def concurrency_cases(root: Path) -> Iterator[dict]:
    # two preprocess writers into one STRUCTATTN_CACHE
    cache = root / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    words = []
    for w in ("a", "b"):
        lines = [f"sentence {w} number {i} is here ." for i in range(300)]
        words.append(write(root / f"words-{w}.txt", "\n".join(lines) + "\n"))
    env = dict(cli_env(), STRUCTATTN_CACHE=str(cache))
    cmds = [["preprocess", "--words-file", wf, "--no-progress", "--batch-size", "16"] for wf in words]
    t0 = time.time()
    procs = [subprocess.Popen(cli_command(c), env=env, cwd="/tmp", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for c in cmds]
    errs = [p.communicate(timeout=600)[1].decode("utf-8", "replace") for p in procs]
    out = Outcome(max(p.returncode for p in procs), "\n".join(errs), time.time() - t0)
    dbs = list(cache.rglob("*.sqlite3"))
    n = 0
    for db in dbs:
        with sqlite3.connect(db) as con:
            tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
            n += sum(con.execute(f"select count(*) from {t}").fetchone()[0] for t in tables)
    if out.rc != 0 or "Traceback" in out.stderr:
        cls = classify(out)
    else:
        cls = "success" if n >= 600 else "data lost"
    yield (record("preprocess-two-writers-one-cache", "concurrency", cmds[0] + ["&"] + cmds[1], out, cls,
                       note=f"{n} rows in {len(dbs)} database(s) for 600 distinct sentences"))

    # two trainers on one --output-dir
    ps = parser_setup(root / "two")
    if ps:
        argv, d = ps
        argv = [a if a != "3" else "2" for a in argv]  # two epochs
        run = d / "shared-run"
        shutil.rmtree(run, ignore_errors=True)
        cmd = [*argv, "--output-dir", str(run)]
        t0 = time.time()
        procs = [subprocess.Popen(cli_command(cmd), env=cli_env(), cwd="/tmp", stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE) for _ in range(2)]
        errs = [p.communicate(timeout=900)[1].decode("utf-8", "replace") for p in procs]
        rcs = sorted(p.returncode for p in procs)
        loser = errs[[p.returncode for p in procs].index(rcs[-1])]
        out = Outcome(rcs[-1], loser, time.time() - t0)
        ref = d / "reference"
        ref_out = run_cli([*argv, "--output-dir", str(ref)])
        same, note = compare_runs(run, ref, PARSER_FILES) if ref_out.rc == 0 else (False, "reference run failed")
        if rcs == [0, 0]:
            cls = "success" if same else "data lost"
            note = "both trainers exited 0; " + note
        elif rcs[0] == 0:
            cls = classify(out) if same else "data lost"
            note = "one trainer refused; the other's result: " + note
        else:
            cls = classify(out)
            note = f"exit codes {rcs}"
        yield (record("train-parsing-two-trainers-one-output-dir", "concurrency", cmd + ["&", "(twice)"], out,
                           cls, note=note, exit_codes=rcs))


def mount_tmpfs(path: Path, size: str, read_only: bool = False) -> tuple[bool, str]:
    path.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        return False, p.stderr.strip()
    if read_only:
        p = subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, text=True)
        if p.returncode != 0:
            umount(path)
            return False, p.stderr.strip()
    return True, ""


def umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], capture_output=True)


def disk_cases(root: Path) -> Iterator[dict]:
    ps = parser_setup(root / "parser")
    if not ps:
        return
    argv, d = ps
    argv = [a if a != "3" else "1" for a in argv]  # one epoch
    mnt = d / "full"
    ok, why = mount_tmpfs(mnt, "2m")
    cmd = [*argv, "--output-dir", str(mnt / "run")]
    if not ok:
        yield (record("train-parsing-full-disk", "disk", cmd, Outcome(None, why, 0.0), "skipped",
                           note=f"mount refused: {why}"))
        return
    try:
        out = run_cli(cmd)
        left = leftovers(mnt / "run")
        cls = classify(out)
        if out.rc == 0:
            cls = "silent"
        yield (record("train-parsing-full-disk", "disk", cmd, out, cls, leftovers=left))
        # free space (a larger size) and rerun: it must finish and equal an uninterrupted run
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], capture_output=True)
        again = run_cli(cmd)
        ref = d / "reference-1epoch"
        shutil.rmtree(ref, ignore_errors=True)
        ref_out = run_cli([*argv, "--output-dir", str(ref)])
        if again.rc != 0:
            cls, note = classify(again), "the rerun after freeing space failed"
        elif ref_out.rc != 0:
            cls, note = "skipped", "the reference run failed"
        else:
            same, note = compare_runs(mnt / "run", ref, PARSER_FILES)
            cls = "success" if same else "data lost"
        yield (record("train-parsing-full-disk-then-rerun", "disk", cmd, again, cls, note=note))
    finally:
        umount(mnt)


# ---------------------------------------------------------------- table and main

def table(rows: list[dict]) -> str:
    kinds = [k for k in KINDS if any(r["kind"] == k for r in rows)]
    classes = [c for c in CLASSES if any(r["class"] == c for r in rows)]
    lines = ["| kind | cases | " + " | ".join(classes) + " |", "|---|---:|" + "---:|" * len(classes)]
    for k in kinds + ["all"]:
        sel = [r for r in rows if k == "all" or r["kind"] == k]
        cells = [str(sum(1 for r in sel if r["class"] == c)) for c in classes]
        lines.append(f"| {k} | {len(sel)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON lines file, one line per case")
    ap.add_argument("--root", default="/tmp/faults/campaign", help="scratch folder (emptied first)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated subset of {', '.join(KINDS)}")
    ap.add_argument("--only", default="", help="only the cases whose id contains one of these comma-separated words")
    ap.add_argument("--jobs", type=int, default=2, help="input and output cases run at once (default 2)")
    args = ap.parse_args(argv)
    kinds = set(args.kinds.split(","))
    root = Path(args.root)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    t0 = time.time()
    rows: list[dict] = []
    out = open(args.out, "w", encoding="utf-8")

    def emit(row: dict) -> None:
        rows.append(row)
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
        out.flush()
        print(f"[{time.time() - t0:6.0f}s] {row['id']}: {row['class']} (rc {row['rc']}) {row['stderr_first'][:120]}",
              file=sys.stderr, flush=True)

    only = [w for w in args.only.split(",") if w]
    cases: list[Case] = []
    ro_dir = None
    if "input" in kinds:
        cases += input_cases(root / "input")
    if "output" in kinds:
        ro_dir = root / "output" / "ro"
        ok, why = mount_tmpfs(ro_dir, "1m", read_only=True)
        if not ok:
            print(f"read-only mount refused ({why}): the read-only output cases are skipped", file=sys.stderr)
            ro_dir = None
        cases += output_cases(root / "output", ro_dir)
    if only:
        cases = [c for c in cases if any(w in c.id for w in only)]
    try:
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for row in pool.map(run_case, cases):
                emit(row)
    finally:
        if ro_dir is not None:
            umount(ro_dir)
    if "kill" in kinds:
        for row in kill_cases(root / "kill", ids=only):
            emit(row)
    if "signal" in kinds:  # SIGTERM at every phase; Ctrl-C where it used to end in a traceback, and in an update
        for sig, phases in ((signal.SIGTERM, None), (signal.SIGINT, {"update", "checkpoint-write", "evaluation"})):
            for row in kill_cases(root / "signal", only=phases, sig=sig, kind="signal", ids=only):
                emit(row)
    for kind, cases_of in (("checkpoint", checkpoint_cases), ("model", model_cases), ("cache", cache_cases)):
        if kind in kinds:
            (root / kind).mkdir(parents=True, exist_ok=True)
            for row in cases_of(root / kind):
                emit(row)
    if "concurrency" in kinds:
        for row in concurrency_cases(root / "concurrency"):
            emit(row)
    if "disk" in kinds:
        for row in disk_cases(root / "disk"):
            emit(row)
    out.close()
    print(table(rows))
    print(f"\n{len(rows)} cases in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
