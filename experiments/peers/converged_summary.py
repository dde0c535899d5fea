"""One JSON line per parser run trained until dev F1 stopped improving (`run_peers.sh bna-converge SEED`,
`supar-converge SEED`; with ``--minilm``, `bna-minilm-ft VARIANT SEED` and `supar-minilm SEED`; with ``--ablations``,
`bna-ablation NAME SEED`, with the dev curve; with ``--paper``, `PAPER_WIDTH=128 bna-paper VARIANT SEED` and BNA and
self-attention at batch 32 (`PAPER_BATCH=32`), with the dev curve): epochs, best epoch and dev F1, test F1 of the
committed parse, wall and CPU time.

    python experiments/peers/converged_summary.py [PEERS] > results/peers/converged_runs.jsonl.new \
        && mv results/peers/converged_runs.jsonl.new results/peers/converged_runs.jsonl
    python experiments/peers/converged_summary.py --minilm [PEERS] > results/peers/minilm_runs.jsonl.new \
        && mv results/peers/minilm_runs.jsonl.new results/peers/minilm_runs.jsonl
    python experiments/peers/converged_summary.py --ablations [PEERS] > results/peers/ablations.jsonl.new \
        && mv results/peers/ablations.jsonl.new results/peers/ablations.jsonl
    python experiments/peers/converged_summary.py --paper [PEERS] > results/peers/paper_d128_runs.jsonl.new \
        && mv results/peers/paper_d128_runs.jsonl.new results/peers/paper_d128_runs.jsonl

PEERS is the peers' folder (default /work/peers). Test F1 is ``structattn score evalb`` of the committed parse against
the test split. CPU time is what ``/usr/bin/time -v`` printed for the run's last process: a run resumed after an
interruption reports only its last part (``cpu_seconds_epochs`` says which epochs that covers). SuPar's runs record
the threads they trained on (``SUPAR_THREADS``, default 1): CPU seconds an epoch are comparable only between equal
counts. A run whose folder is not under PEERS (trained on another machine) keeps its line from the committed file.
"""
from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from structattn.bna.config import VARIANTS
from structattn.tasks.evalb import evalb_files
from structattn.tasks.ptb import split_files

RESULTS = Path(__file__).resolve().parents[2] / "results"


def cpu_seconds(log: str) -> float | None:
    """User + system seconds of the last ``/usr/bin/time -v`` report in ``log``."""
    user = re.findall(r"User time \(seconds\): ([\d.]+)", log)
    system = re.findall(r"System time \(seconds\): ([\d.]+)", log)
    return round(float(user[-1]) + float(system[-1]), 1) if user and system else None


@dataclass(frozen=True)
class Setting:
    """One comparison's runs: the committed file of its lines, and per run name (with ``{seed}``) its folder under
    PEERS, its committed parse under results/peers/, what the line calls the parser and its command."""

    jsonl: str
    runs: tuple  # (summarise, name, folder, parse, parser, command) per run kind


def bna_run(peers: Path, seed: int, folder: str = "none-bna-posnone-converge-s{seed}",
            name: str = "bna-converged-s{seed}", parser: str = "BNA (no pretrained encoder, no POS)",
            command: str = "bash experiments/run_peers.sh bna-converge {seed}", curve: bool = False) -> dict | None:
    """The line of our run ``bna-run/FOLDER`` (None when it has not finished); ``curve``: with its dev F1 after
    every epoch (``dev_f1_by_epoch``)."""
    run = peers / "bna-run" / folder.format(seed=seed)
    parse = RESULTS / "peers" / f"{name.format(seed=seed)}.test.trees"
    if not (run / "summary.json").is_file() or not parse.is_file():
        return None
    summary = json.loads((run / "summary.json").read_text())
    log = Path(f"{run}.log").read_text()
    resumed = re.findall(r"resuming .* \(epoch (\d+),", log)
    first = int(resumed[-1]) + 1 if resumed else 1
    dev_curve = {"dev_f1_by_epoch": [entry["f1"] for entry in summary["history"]]} if curve else {}
    return {"run": name.format(seed=seed), "parser": parser, "seed": seed,
            "epochs": summary["epochs_completed"], "best_epoch": summary["best_epoch"],
            "best_dev_f1": summary["best_dev_f1"], "test_f1": evalb_files(split_files("test"), parse).to_dict()["f1"],
            "output": str(parse.relative_to(RESULTS.parent)), "wall_seconds": summary["wall_seconds"],
            "cpu_seconds": cpu_seconds(log), "cpu_seconds_epochs": [first, summary["epochs_completed"]],
            "command": command.format(seed=seed), **dev_curve}


def hms_seconds(text: str) -> float:
    """Seconds of a ``timedelta`` as SuPar logs it (``H:MM:SS.ffffff``, or ``N day(s), H:MM:SS``)."""
    text = text.strip()
    days = re.match(r"(\d+) days?, (.*)", text)
    hours, minutes, seconds = (days.group(2) if days else text).split(":")
    return (int(days.group(1)) * 86400 if days else 0) + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def supar_run(peers: Path, seed: int, folder: str = "crf-char-converge-s{seed}", name: str = "supar-converged-s{seed}",
              parser: str = "SuPar 1.1.4 CRF (CharLSTM, MBR, no POS, no GloVe)",
              command: str = "bash experiments/run_peers.sh supar-converge {seed}") -> dict | None:
    """The line of SuPar's run ``supar-run/FOLDER`` from SuPar's own log (None when it has not finished).
    SuPar's elapsed time is its epochs' (training, dev and test evaluation), summed over resumed parts."""
    run = peers / "supar-run" / folder.format(seed=seed)
    parse = RESULTS / "peers" / f"{name.format(seed=seed)}.test.txt"
    log = (run / "train.out").read_text() if (run / "train.out").is_file() else ""
    saved = re.findall(r"Epoch (\d+) saved\s*\n.*dev:\s+.*LF:\s*([\d.]+)%", log)
    elapsed = re.findall(r"([\d:., a-z]+)s elapsed, ([\d:., a-z]+)s/epoch", log)
    if not saved or not elapsed or not parse.is_file():
        return None
    epoch = re.compile(r"Epoch (\d+) / \d+:")
    last_process = [int(e) for e in epoch.findall(log.split("Loading the data")[-1])]  # each process loads once
    threads = re.findall(r"^threads\s+\|\s*(\d+)", log, re.M)  # SuPar's printed config, once a process
    prefix = f"SUPAR_THREADS={threads[-1]} " if threads and threads[-1] != "1" else ""
    return {"run": name.format(seed=seed), "parser": parser, "seed": seed, "epochs": int(epoch.findall(log)[-1]), "best_epoch": int(saved[-1][0]),
            "best_dev_f1": float(saved[-1][1]),
            "test_f1": evalb_files(split_files("test"), parse).to_dict()["f1"],
            "output": str(parse.relative_to(RESULTS.parent)), "supar_epoch_seconds": hms_seconds(elapsed[-1][1]),
            "supar_elapsed_seconds": hms_seconds(elapsed[-1][0]), "cpu_seconds": cpu_seconds(log),
            "cpu_seconds_epochs": [last_process[0], last_process[-1]] if last_process else None,
            "threads": int(threads[-1]) if threads else 1,
            "command": prefix + command.format(seed=seed)}


#: each ablation of `run_peers.sh ablations` (the bna-converge run with one setting moved to SuPar's recipe)
ABLATIONS = {"dropout": "dropout .33 everywhere (SuPar's; ours .2, characters .1)",
             "lr": "learning rate 2e-3 (SuPar's; ours 1e-3)",
             "width": "width 256, 8 heads, feed-forward 512 (ours 128, 4, 256)",
             "loss": "tree CRF loss (SuPar's; ours the margin loss)",
             "batch": "batches of 90 trees (SuPar's 5,000 tokens; ours 32 trees)",
             "scorer": "biaffine span and label scorer over boundary MLPs of 500 and 100 (SuPar's; ours an MLP over "
                       "fencepost differences)",
             "optimizer": "Adam betas .9/.9, eps 1e-12, learning rate x .75 every 5,000 updates (SuPar's; ours "
                          ".9/.999, 1e-8, constant)",
             "chars": "character LSTM of 50-dim characters, 100 out (SuPar's; ours 64, 128)",
             "scorer-dropout": "SuPar's biaffine scorer and its dropout .33 together"}

#: the paper's ablation (Tables 3-4) without a pretrained encoder, at the width the CPU runs use
PAPER_WIDTH = 128
VARIANT_NAMES = {"sa": "self-attention", "bimsa": "BiMSA alone", "sa_nsa": "self-attention + NSA", "bna": "BNA"}


def _paper_run(variant: str, batch: int = 250) -> tuple:
    """How to summarise `PAPER_WIDTH=128 [PAPER_BATCH=N] run_peers.sh bna-paper VARIANT SEED`, under the name that
    script gives the run (``-bN`` for a batch other than the paper's 250)."""
    name = f"paper-d{PAPER_WIDTH}{'' if batch == 250 else f'-b{batch}'}-{variant}-s{{seed}}"
    env = f"PAPER_WIDTH={PAPER_WIDTH}" + ("" if batch == 250 else f" PAPER_BATCH={batch}")
    return (bna_run, {"folder": name, "name": name, "curve": True,
                      "parser": f"{VARIANT_NAMES[variant]} at the paper's shape (8 layers, character LSTM, batch "
                                f"{batch}, lr 8e-4), width {PAPER_WIDTH}, no POS",
                      "command": f"{env} bash experiments/run_peers.sh bna-paper {variant} {{seed}}"})


#: the comparisons: without a pretrained encoder, and on all-MiniLM-L6-v2 fine-tuned (ours: BNA and its
#: self-attention baseline)
_MINILM_FT = "on all-MiniLM-L6-v2 fine-tuned (encoder lr 5e-5, layers 1e-3, warm-up 160, no POS)"
SETTINGS = {
    "converged": Setting("converged_runs.jsonl", (
        (bna_run, {}), (supar_run, {}))),
    "minilm": Setting("minilm_runs.jsonl", (
        (bna_run, {"folder": "minilm-ft-bna-s{seed}", "name": "bna-minilm-ft-s{seed}", "parser": "BNA " + _MINILM_FT,
                   "command": "bash experiments/run_peers.sh bna-minilm-ft bna {seed}"}),
        (bna_run, {"folder": "minilm-ft-sa-s{seed}", "name": "sa-minilm-ft-s{seed}",
                   "parser": "self-attention " + _MINILM_FT,
                   "command": "bash experiments/run_peers.sh bna-minilm-ft sa {seed}"}),
        (supar_run, {"folder": "crf-minilm-s{seed}", "name": "supar-minilm-s{seed}",
                     "parser": "SuPar 1.1.4 CRF on all-MiniLM-L6-v2 fine-tuned (its recipe, MBR, no POS)",
                     "command": "bash experiments/run_peers.sh supar-minilm {seed}"}))),
    "ablations": Setting("ablations.jsonl", tuple(
        (bna_run, {"folder": f"ablation-{name}-s{{seed}}", "name": f"ablation-{name}-s{{seed}}",
                   "parser": f"BNA (no pretrained encoder, no POS), {change}", "curve": True,
                   "command": f"bash experiments/run_peers.sh bna-ablation {name} {{seed}}"})
        for name, change in ABLATIONS.items()) + (
        (bna_run, {"folder": "recipe-s{seed}", "name": "recipe-s{seed}", "curve": True,
                   "parser": "BNA (no pretrained encoder, no POS), width 256 and SuPar's Adam and schedule together",
                   "command": "bash experiments/run_peers.sh bna-recipe {seed}"}),)),
    "paper": Setting(f"paper_d{PAPER_WIDTH}_runs.jsonl", tuple(
        _paper_run(variant) for variant in VARIANTS) + (  # the registry's variants, in its order
        _paper_run("sa", batch=32), _paper_run("bna", batch=32))),  # a diagnostic: the small shape's batch
}


def committed_lines(jsonl: str) -> dict[str, dict]:
    """The lines of the committed ``results/peers/JSONL`` by run name (empty when there is none)."""
    path = RESULTS / "peers" / jsonl
    lines = path.read_text().splitlines() if path.is_file() else []
    return {line["run"]: line for line in map(json.loads, lines)}


def main(argv: list[str]) -> None:
    flags = [f"--{kind}" for kind in SETTINGS if kind != "converged"]
    kind = next((a[2:] for a in argv if a in flags), "converged")
    setting = SETTINGS[kind]
    argv = [a for a in argv if a not in flags]
    peers = Path(argv[0]) if argv else Path("/work/peers")
    committed = committed_lines(setting.jsonl)
    for summarise, names in setting.runs:
        for seed in (1, 2):
            line = summarise(peers, seed, **names)
            run = (names.get("name") or ("bna-converged-s{seed}" if summarise is bna_run
                                         else "supar-converged-s{seed}")).format(seed=seed)
            if line is None and run in committed:  # its folder is gone (another machine): the committed line stands
                print(f"{run}: not under {peers}; its committed line is kept", file=sys.stderr)
                line = committed[run]
            if line is None:
                print(f"{run}: not finished under {peers}", file=sys.stderr)
            else:
                print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv[1:])
