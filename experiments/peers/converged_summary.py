"""One JSON line per parser run trained until dev F1 stopped improving (`run_peers.sh bna-converge SEED`,
`supar-converge SEED`): epochs, best epoch and dev F1, test F1 of the committed parse, wall and CPU time.

    python experiments/peers/converged_summary.py [PEERS] > results/peers/converged_runs.jsonl.new \
        && mv results/peers/converged_runs.jsonl.new results/peers/converged_runs.jsonl

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
from pathlib import Path

from structattn.tasks.evalb import evalb_files
from structattn.tasks.ptb import split_files

RESULTS = Path(__file__).resolve().parents[2] / "results"


def cpu_seconds(log: str) -> float | None:
    """User + system seconds of the last ``/usr/bin/time -v`` report in ``log``."""
    user = re.findall(r"User time \(seconds\): ([\d.]+)", log)
    system = re.findall(r"System time \(seconds\): ([\d.]+)", log)
    return round(float(user[-1]) + float(system[-1]), 1) if user and system else None


def bna_run(peers: Path, seed: int) -> dict | None:
    """The line of ``bna-run/none-bna-posnone-converge-sSEED`` (None when it has not finished)."""
    run = peers / "bna-run" / f"none-bna-posnone-converge-s{seed}"
    parse = RESULTS / "peers" / f"bna-converged-s{seed}.test.trees"
    if not (run / "summary.json").is_file() or not parse.is_file():
        return None
    summary = json.loads((run / "summary.json").read_text())
    log = Path(f"{run}.log").read_text()
    resumed = re.findall(r"resuming .* \(epoch (\d+),", log)
    first = int(resumed[-1]) + 1 if resumed else 1
    return {"run": f"bna-converged-s{seed}", "parser": "BNA (no pretrained encoder, no POS)", "seed": seed,
            "epochs": summary["epochs_completed"], "best_epoch": summary["best_epoch"],
            "best_dev_f1": summary["best_dev_f1"], "test_f1": evalb_files(split_files("test"), parse).to_dict()["f1"],
            "output": str(parse.relative_to(RESULTS.parent)), "wall_seconds": summary["wall_seconds"],
            "cpu_seconds": cpu_seconds(log), "cpu_seconds_epochs": [first, summary["epochs_completed"]],
            "command": f"bash experiments/run_peers.sh bna-converge {seed}"}


def hms_seconds(text: str) -> float:
    """Seconds of a ``timedelta`` as SuPar logs it (``H:MM:SS.ffffff``, or ``N day(s), H:MM:SS``)."""
    text = text.strip()
    days = re.match(r"(\d+) days?, (.*)", text)
    hours, minutes, seconds = (days.group(2) if days else text).split(":")
    return (int(days.group(1)) * 86400 if days else 0) + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


def supar_run(peers: Path, seed: int) -> dict | None:
    """The line of ``supar-run/crf-char-converge-sSEED`` from SuPar's own log (None when it has not finished).
    SuPar's elapsed time is its epochs' (training, dev and test evaluation), summed over resumed parts."""
    run = peers / "supar-run" / f"crf-char-converge-s{seed}"
    parse = RESULTS / "peers" / f"supar-converged-s{seed}.test.txt"
    log = (run / "train.out").read_text() if (run / "train.out").is_file() else ""
    saved = re.findall(r"Epoch (\d+) saved\s*\n.*dev:\s+.*LF:\s*([\d.]+)%", log)
    elapsed = re.findall(r"([\d:., a-z]+)s elapsed, ([\d:., a-z]+)s/epoch", log)
    if not saved or not elapsed or not parse.is_file():
        return None
    epoch = re.compile(r"Epoch (\d+) / \d+:")
    last_process = [int(e) for e in epoch.findall(log.split("Loading the data")[-1])]  # each process loads once
    threads = re.findall(r"^threads\s+\|\s*(\d+)", log, re.M)  # SuPar's printed config, once a process
    prefix = f"SUPAR_THREADS={threads[-1]} " if threads and threads[-1] != "1" else ""
    return {"run": f"supar-converged-s{seed}", "parser": "SuPar 1.1.4 CRF (CharLSTM, MBR, no POS, no GloVe)",
            "seed": seed, "epochs": int(epoch.findall(log)[-1]), "best_epoch": int(saved[-1][0]),
            "best_dev_f1": float(saved[-1][1]),
            "test_f1": evalb_files(split_files("test"), parse).to_dict()["f1"],
            "output": str(parse.relative_to(RESULTS.parent)), "supar_epoch_seconds": hms_seconds(elapsed[-1][1]),
            "supar_elapsed_seconds": hms_seconds(elapsed[-1][0]), "cpu_seconds": cpu_seconds(log),
            "cpu_seconds_epochs": [last_process[0], last_process[-1]] if last_process else None,
            "threads": int(threads[-1]) if threads else 1,
            "command": f"{prefix}bash experiments/run_peers.sh supar-converge {seed}"}


def committed_lines() -> dict[str, dict]:
    """The lines of the committed ``results/peers/converged_runs.jsonl`` by run name (empty when there is none)."""
    path = RESULTS / "peers" / "converged_runs.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return {line["run"]: line for line in map(json.loads, lines)}


def main(argv: list[str]) -> None:
    peers = Path(argv[0]) if argv else Path("/work/peers")
    committed = committed_lines()
    for name, run_name, summarise in (("bna-converge", "bna-converged", bna_run),
                                      ("supar-converge", "supar-converged", supar_run)):
        for seed in (1, 2):
            line = summarise(peers, seed)
            run = f"{run_name}-s{seed}"
            if line is None and run in committed:  # its folder is gone (another machine): the committed line stands
                print(f"{name} {seed}: not under {peers}; its committed line is kept", file=sys.stderr)
                line = committed[run]
            if line is None:
                print(f"{name} {seed}: not finished under {peers}", file=sys.stderr)
            else:
                print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv[1:])
