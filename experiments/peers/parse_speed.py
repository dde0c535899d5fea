"""Parse speed on the 518 test sentences, SuPar's CRF parser vs our BNA parser, one thread each, alternating.

    python experiments/peers/parse_speed.py --peers /work/peers --bna MODEL_DIR [--rounds 3]

Each round times, after the model is loaded, one parse of all 518 test sentences (gold words, no tags):
ours with ``ChartParser.parse(words, batch_size=32)`` (what ``structattn parse`` runs), SuPar with
``Parser.predict(token lists)`` in its own venv (its defaults: batches of 5,000 tokens, MBR decoding as trained).
Wall time and the process's CPU time are both measured (the CPU figure does not depend on a busy machine's load).
Prints one JSON line per measurement and the medians.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

SUPAR_TIMER = r"""
import json, sys, time, torch
torch.set_num_threads(1)
from supar import Parser
model, data = sys.argv[1], sys.argv[2]
parser = Parser.load(model)
sents = [line.split() for line in open(data)]
t0, c0 = time.perf_counter(), time.process_time()
out = parser.predict(sents, verbose=False)
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
assert len(out.sentences) == len(sents)
print(json.dumps({"seconds": dt, "cpu_seconds": cpu, "sentences": len(sents)}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="/work/peers")
    ap.add_argument("--bna", required=True, help="our saved parser folder (train-parsing's best/)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--supar-model", help="default: PEERS/supar-run/crf-char/model")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from structattn.bna.model import ChartParser
    from structattn.tasks.ptb import read_split

    peers = Path(args.peers)
    gold = read_split("test")
    words = [t.leaves() for t in gold]
    words_file = peers / "data" / "ptb.test.words"
    words_file.write_text("".join(" ".join(w) + "\n" for w in words))
    ours = ChartParser.from_pretrained(args.bna)
    supar_python = peers / "supar-venv" / "bin" / "python"
    supar_model = args.supar_model or peers / "supar-run" / "crf-char" / "model"
    times: dict[str, list[float]] = {"bna": [], "supar": []}
    cpus: dict[str, list[float]] = {"bna": [], "supar": []}
    for r in range(args.rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        trees = ours.parse(words, None, batch_size=32)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert len(trees) == len(words)
        times["bna"].append(dt)
        cpus["bna"].append(cpu)
        print(json.dumps({"round": r + 1, "parser": "bna", "seconds": round(dt, 2), "cpu_seconds": round(cpu, 2),
                          "sentences_per_second": round(len(words) / dt, 1),
                          "sentences_per_cpu_second": round(len(words) / cpu, 1)}), flush=True)
        res = subprocess.run([str(supar_python), "-c", SUPAR_TIMER, str(supar_model), str(words_file)],
                             capture_output=True, text=True, check=True,
                             env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                                  "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
        out = json.loads(res.stdout.strip().splitlines()[-1])
        times["supar"].append(out["seconds"])
        cpus["supar"].append(out["cpu_seconds"])
        print(json.dumps({"round": r + 1, "parser": "supar", "seconds": round(out["seconds"], 2),
                          "cpu_seconds": round(out["cpu_seconds"], 2),
                          "sentences_per_second": round(len(words) / out["seconds"], 1),
                          "sentences_per_cpu_second": round(len(words) / out["cpu_seconds"], 1)}), flush=True)
    summary = {k: {"median_seconds": round(statistics.median(v), 2),
                   "sentences_per_second": round(len(words) / statistics.median(v), 1),
                   "median_cpu_seconds": round(statistics.median(cpus[k]), 2),
                   "sentences_per_cpu_second": round(len(words) / statistics.median(cpus[k]), 1)}
               for k, v in times.items()}
    summary["threads"] = 1
    summary["sentences"] = len(words)
    print(json.dumps({"summary": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
