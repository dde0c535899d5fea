"""CPU seconds per training epoch of a parser configuration, measured on a sample of its batches (the plan in
lane-hours of results/PEERS.md). One process, the thread count of the environment (OMP_NUM_THREADS=1 for a lane).

  python experiments/peers/epoch_cost.py ours NAME -- TRAIN-PARSING FLAGS    (our venv, structattn importable)
  $PEERS/supar-venv/bin/python experiments/peers/epoch_cost.py supar NAME --every K -- SUPAR ARGS

``ours``: the flags of ``structattn train-parsing`` build the ParserConfig; the engine trains ``--batches B``
batches (default 6) spread evenly over the epoch's batches sorted by their longest sentence (a batch's chart costs
its longest sentence squared, so an even spread over lengths estimates the epoch's mean), then parses the dev split
once. An epoch = mean CPU seconds of a sampled update x the epoch's updates + the dev parse (what the trainer runs
once an epoch; the checkpoint write is left out).

``supar``: SuPar's own command line (``-m supar.cmds.crf_con`` arguments, with ``--epochs=1`` and a temporary model
path) runs in this process; its train pass gets every K-th batch of the epoch (SuPar's batches are shuffled and
hold about the same number of tokens) and is timed, as are its evaluations: an epoch = the mean CPU seconds of a
timed update x the epoch's updates + the dev and the test evaluation (SuPar evaluates both after every epoch). The
one-off set-up (vocabularies, loading the encoder) and the final reload are left out.

One JSON line per configuration on stdout (``--jsonl FILE`` appends it there too): name, cpu_s_per_epoch (and
wall_s_per_epoch, the figure that counts on a GPU; the committed lines were measured before it was recorded), its
parts, what was sampled, parameters, CPU model, torch version and threads, the command.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (lscpu's 'Model name'), or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def clocks() -> tuple[float, float]:
    """(CPU seconds of this process, wall seconds), after the GPU's queued work is done (on a GPU the wall time is
    the figure that counts; on one CPU thread the two agree when the machine is quiet)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.process_time(), time.perf_counter()


def spent(since: tuple[float, float]) -> tuple[float, float]:
    now = clocks()
    return now[0] - since[0], now[1] - since[1]


def facts(name: str, extra: dict, command: str | None = None) -> dict:
    import torch

    return {"name": name, **extra, "cpu": cpu_model(), "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "command": command or " ".join(sys.argv)}


# ---------------------------------------------------------------------------------------------- ours
def measure_ours(name: str, flags: list[str], batches: int) -> dict:
    """Time ``batches`` sampled updates and one dev parse of the train-parsing configuration ``flags``."""
    from structattn.bna.trainer import ParserFamily, TreebankFiles
    from structattn.commands.train_parsing import add_parser_config_arguments, parser_config_from_args
    from structattn.train.engine import Engine

    cli = argparse.ArgumentParser(prog="train-parsing flags")
    add_parser_config_arguments(cli)
    config = parser_config_from_args(cli.parse_args(flags))

    class SampledEpoch(ParserFamily):
        """The family whose epoch is ``batches`` of its batches, spread over their lengths; clocks the updates."""
        n_batches = 0
        started: tuple[float, float] | None = None

        def epoch_batches(self, epoch: int) -> list[list[int]]:
            full = super().epoch_batches(epoch)
            self.n_batches = len(full)
            by_length = sorted(full, key=lambda b: max(self.train_lengths[i] for i in b))
            k = min(batches, len(full))
            return [by_length[round(j * (len(full) - 1) / max(k - 1, 1))] for j in range(k)]

        def passes(self, batch):
            if self.started is None:  # the first update starts the clock (set-up and loading left out)
                self.started = clocks()
            return super().passes(batch)

    with tempfile.TemporaryDirectory() as tmp:
        config.output_dir = str(Path(tmp) / "run")
        family = SampledEpoch(config, TreebankFiles())
        engine = Engine(config.output_dir, seed=config.seed, precision=config.precision, clip_norm=config.clip_grad,
                        checkpoints=False, show_progress=False, name="epoch-cost")
        k = min(batches, math.ceil(len(TreebankFiles().read("train")) / config.batch_size))
        engine.train(family, stop_after=k)
        (train_s, train_wall), t0 = spent(family.started), clocks()
        entry = family.evaluate_dev(engine.state, True)
        dev_s, dev_wall = spent(t0)
    per_update = train_s / k
    return facts(name, {
        "cpu_s_per_epoch": round(per_update * family.n_batches + dev_s, 1),
        "wall_s_per_epoch": round(train_wall / k * family.n_batches + dev_wall, 1),
        "train_cpu_s_per_epoch": round(per_update * family.n_batches, 1), "dev_parse_cpu_s": round(dev_s, 1),
        "updates_per_epoch": family.n_batches, "updates_timed": k, "cpu_s_per_update": round(per_update, 2),
        "parameters": sum(p.numel() for p in family.model.parameters()),
        "trainable_parameters": sum(p.numel() for p in family.model.parameters() if p.requires_grad),
        "device": str(engine.device), "dev_f1_after_sample": entry.entry.get("f1"),
        "config": {k_: v for k_, v in config.to_dict().items() if k_ != "output_dir"}})


# ---------------------------------------------------------------------------------------------- SuPar
def measure_supar(name: str, args: list[str], every: int) -> dict:
    """Run SuPar's crf_con command line for one epoch that trains on every ``every``-th of its batches, timing
    the train pass and the dev and test evaluations."""
    from supar import CRFConstituencyParser
    from supar.cmds import crf_con

    command = " ".join(sys.argv)
    clock: dict[str, list[tuple[float, float]]] = {"_train": [], "_evaluate": []}  # (CPU, wall) seconds
    counts: list[int] = []
    parameters: list[int] = []
    train, evaluate = CRFConstituencyParser._train, CRFConstituencyParser._evaluate

    def sampled_train(self, loader):  # SuPar's own pass over every `every`-th batch of the epoch
        batches = list(loader)
        parameters.append(sum(p.numel() for p in self.model.parameters()))
        counts.extend([len(batches), len(batches[::every])])
        t0 = clocks()
        train(self, batches[::every])
        clock["_train"].append(spent(t0))

    def timed_evaluate(self, loader):
        t0 = clocks()
        out = evaluate(self, loader)
        clock["_evaluate"].append(spent(t0))
        return out

    CRFConstituencyParser._train, CRFConstituencyParser._evaluate = sampled_train, timed_evaluate
    args = [a for a in args if not a.startswith(("--epochs=", "--patience="))] + ["--epochs=1", "--patience=1"]
    with tempfile.TemporaryDirectory() as tmp:
        args[args.index("-p") + 1] = str(Path(tmp) / "model")
        sys.argv = ["crf_con"] + args
        try:
            crf_con.main()
        except ValueError:  # no dev improvement over SuPar's initial 0 after the sampled epoch: no model file to
            # reload at the end (SuPar then tries to download one); the timings were taken before that
            if len(clock["_evaluate"]) < 2:
                raise
    train_s, train_wall = (t * counts[0] / counts[1] for t in clock["_train"][0])
    (dev_s, dev_wall), (test_s, test_wall) = clock["_evaluate"][:2]  # after the epoch: dev, then test
    return facts(name, {
        "cpu_s_per_epoch": round(train_s + dev_s + test_s, 1),
        "wall_s_per_epoch": round(train_wall + dev_wall + test_wall, 1), "train_cpu_s_per_epoch": round(train_s, 1),
        "dev_eval_cpu_s": round(dev_s, 1), "test_eval_cpu_s": round(test_s, 1), "updates_per_epoch": counts[0],
        "updates_timed": counts[1], "cpu_s_per_update": round(clock["_train"][0][0] / counts[1], 2),
        "parameters": parameters[0], "device": "cpu" if "-d=-1" in args else "cuda"}, command)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=["ours", "supar"])
    p.add_argument("name", help="the configuration's name in the plan")
    p.add_argument("--batches", type=int, default=6, help="ours: sampled updates (default 6)")
    p.add_argument("--every", type=int, default=4, help="supar: train on every K-th batch (default 4)")
    p.add_argument("--jsonl", help="also append the line to this file")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # after "--": the train-parsing flags or SuPar's arguments
    a, rest = p.parse_args(argv[:cut]), argv[cut + 1:]
    line = measure_ours(a.name, rest, a.batches) if a.kind == "ours" else measure_supar(a.name, rest, a.every)
    text = json.dumps(line, ensure_ascii=False)
    print(text, flush=True)
    if a.jsonl:
        with open(a.jsonl, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
