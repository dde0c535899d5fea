"""Run a recipe's named runs, resumably, and record each: ``python experiments/run.py RECIPE [RUN ...] [options]``.

A recipe is a TOML file in experiments/recipes/ (RECIPE: its name, or a path): what it trains (``train``, a command
template), where each run goes (``output``), how it is recorded (``record``: a kind of experiments/record.py, with
``record_args``; ``""``: the command records its own lines), the environment of its commands (``[env]``) and its
named runs (``[[runs]]``, each with a ``lane``; a list-valued field makes one run per value, the first list the
outer loop). Templates are Python format strings over the recipe's ``[variables]`` (``--set KEY=VALUE`` changes
one), its ``[flags]`` groups and the run's fields; a command's first word ``structattn`` or ``python`` is the one in
--bin. Optional settings: ``default`` (the runs or lanes run when none is named), ``fresh = true`` (remove a run's
folder first: a timed run), ``skip_recorded = false`` (run a recorded run again), ``command_file = true`` (write
the training command to OUTPUT.command for the recorder).

For each selected run (RUN: a run's name, else a lane's; none: every run), in order: a run already recorded in the
results file is skipped (``skip NAME (recorded)``); the training command runs with its output in OUTPUT.log, in the
same --output-dir as before, so an interrupted run resumes from its checkpoint; ``[[before_record]]`` steps
(e.g. the dev translation), the recorder, then ``[[after_record]]`` steps (each with ``match``: the run-name patterns
it is for) run with their output appended to the log. A failure is said (``FAILED NAME (LOG)``) without stopping the
other runs; the exit status says whether any failed. --lanes N runs N lanes side by side (each lane's runs one
after the other, as the recipes' lanes on a 2-core CPU). --dry-run prints the command lines instead of running them
(values known only once a run trained, such as the laptop recipe's ``{seconds}``, print as their placeholder);
--list prints each run, its lane and whether it is recorded.
"""
from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import itertools
import os
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent   # relative paths of a recipe are inside the checkout
RECIPES = REPO / "experiments" / "recipes"
RECORDER = REPO / "experiments" / "record.py"
PROGRAMS = ("structattn", "python")   # first words resolved in --bin


def _record_module():
    """experiments/record.py (its kinds decide which line names a run)."""
    spec = importlib.util.spec_from_file_location("experiments_record", RECORDER)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return sys.modules[spec.name]


def _dev_source() -> str:
    from structattn.tasks.multi30k import split_paths

    return str(split_paths("dev")[0])


#: Values a template may name that come from the library, computed only when named.
COMPUTED = {"multi30k_dev_source": _dev_source}


class _Template(dict):
    """format_map mapping that keeps an unknown ``{name}`` as it is (filled later: runtime values)."""

    def __missing__(self, key: str) -> str:
        if key in COMPUTED:
            self[key] = COMPUTED[key]()
            return self[key]
        return "{" + key + "}"


def fill(text: str, values: dict) -> str:
    """``text`` with every ``{name}`` that ``values`` knows replaced, repeatedly (a value may name others)."""
    mapping = _Template(values)
    for _ in range(8):
        new = text.format_map(mapping)
        if new == text:
            return new
        text = new
    raise ValueError(f"template does not settle: {text}")


@dataclass(frozen=True)
class Step:
    """A command run after training, for the runs whose name matches one of ``match``."""
    command: str
    what: str
    match: tuple[str, ...] = ("*",)


@dataclass
class Run:
    """One named run of a recipe, its templates filled."""
    name: str
    lane: str
    values: dict

    def fill(self, template: str, runtime: dict | None = None) -> str:
        """``template`` over the run's values (and ``runtime``: values known once it trained)."""
        return fill(template, {**self.values, **(runtime or {})})

    def get(self, key: str, runtime: dict | None = None) -> str:
        return self.fill(str(self.values.get(key, "")), runtime)

    @property
    def output(self) -> Path:
        return Path(self.get("output"))

    @property
    def log(self) -> Path:
        return Path(f"{self.output}.log")


@dataclass
class Recipe:
    """A recipe file read: its settings and its runs in order."""
    name: str
    settings: dict
    runs: list[Run]
    env: dict[str, str] = field(default_factory=dict)
    default: list[str] = field(default_factory=list)   # the runs or lanes run when none is named (all: empty)
    before_record: list[Step] = field(default_factory=list)
    after_record: list[Step] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.settings.get("record", "")

    @property
    def results(self) -> Path | None:
        return Path(self.settings["results"]) if self.settings.get("results") else None


def _expand(entry: dict) -> list[dict]:
    """A ``[[runs]]`` entry -> one dict per combination of its list-valued fields (the first the outer loop)."""
    axes = {k: v for k, v in entry.items() if isinstance(v, list)}
    fixed = {k: v for k, v in entry.items() if not isinstance(v, list)}
    return [{**fixed, **dict(zip(axes, combo))} for combo in itertools.product(*axes.values())]


def load_recipe(recipe: str, overrides: dict[str, str] | None = None) -> Recipe:
    """Read experiments/recipes/RECIPE.toml (or the path RECIPE); ``overrides``: --set values of [variables]."""
    path = Path(recipe) if recipe.endswith(".toml") else RECIPES / f"{recipe}.toml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in RECIPES.glob("*.toml")))
        raise SystemExit(f"run.py: no recipe {path}; the recipes: {known}")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    variables = {k: str(v) for k, v in data.get("variables", {}).items()}
    unknown = set(overrides or {}) - set(variables)
    if unknown:
        raise SystemExit(f"run.py: --set {', '.join(sorted(unknown))}: not a variable of {path.name} "
                         f"(its variables: {', '.join(variables) or 'none'})")
    variables.update(overrides or {})
    settings = {k: v for k, v in data.items() if not isinstance(v, (dict, list))}
    base = {**settings, **variables, **data.get("flags", {})}
    runs = []
    for entry in data.get("runs", []):
        for values in _expand(entry):
            values = {**base, **{k: v if isinstance(v, bool) else str(v) for k, v in values.items()}}
            runs.append(Run(fill(values["name"], values), fill(values.get("lane", "main"), values), values))
    names = [r.name for r in runs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SystemExit(f"run.py: {path.name} names these runs twice: {', '.join(twice)}")
    steps = {key: [Step(s["command"], s.get("what", key), tuple(s.get("match", ["*"]))) for s in data.get(key, [])]
             for key in ("before_record", "after_record")}
    env = {k: fill(str(v), base) for k, v in data.get("env", {}).items()}
    settings = {k: fill(v, base) if isinstance(v, str) else v for k, v in settings.items()}
    return Recipe(path.stem, settings, runs, env,
                  data.get("default", []), **steps)


def argv(command: str, bin_dir: str) -> list[str]:
    """A filled command line -> its words, the program resolved in ``bin_dir``."""
    words = shlex.split(command)
    if words and words[0] in PROGRAMS:
        words[0] = f"{bin_dir}/{words[0]}"
    return words


def record_command(recipe: Recipe, run: Run, bin_dir: str, runtime: dict | None = None) -> list[str] | None:
    if not recipe.kind:
        return None
    return [f"{bin_dir}/python", "experiments/record.py", recipe.kind, str(run.output), run.name,
            *shlex.split(run.get("record_args", runtime))]


def is_recorded(recipe: Recipe, run: Run) -> bool:
    """Whether the recipe's results file has a line for ``run`` (the kind's key names it)."""
    if not recipe.kind or recipe.results is None or not (REPO / recipe.results).is_file():
        return False
    from structattn.io import read_jsonl

    kind = _record_module().KINDS[recipe.kind]
    return any(kind.run_name(line) == run.name for line in read_jsonl(REPO / recipe.results))


def _steps(steps: list[Step], run: Run) -> list[Step]:
    return [s for s in steps if any(fnmatch.fnmatchcase(run.name, m) for m in s.match)]


def _environment(recipe: Recipe) -> dict[str, str]:
    return {**os.environ, **recipe.env}


def _run_logged(words: list[str], log: Path, mode: str, env: dict[str, str]) -> bool:
    with open(log, mode) as out:
        return subprocess.run(words, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, env=env).returncode == 0


def execute(recipe: Recipe, run: Run, bin_dir: str, dry_run: bool, force: bool) -> bool:
    """Train, record and follow up one run (or print what would run); False when a step failed."""
    if not force and recipe.settings.get("skip_recorded", True) and is_recorded(recipe, run):
        print(f"skip {run.name} (recorded)", flush=True)
        return True
    train = argv(run.get("train"), bin_dir)
    plain = " ".join(["structattn", *train[1:]]) if Path(train[0]).name == "structattn" else " ".join(train)
    if dry_run:
        rec = record_command(recipe, run, bin_dir)
        for words in [train, *(argv(run.fill(s.command), bin_dir) for s in _steps(recipe.before_record, run)),
                      *([rec] if rec else []),
                      *(argv(run.fill(s.command), bin_dir) for s in _steps(recipe.after_record, run))]:
            print(shlex.join(words))
        return True
    if recipe.settings.get("fresh"):        # a timed run starts from nothing: a resumed one would not time it all
        shutil.rmtree(REPO / run.output, ignore_errors=True)
    (REPO / run.output).parent.mkdir(parents=True, exist_ok=True)
    if recipe.settings.get("command_file"):
        Path(f"{REPO / run.output}.command").write_text(plain + "\n")
    load_before = _load_average()
    start = time.time()
    print(f"== {run.name}: {' '.join(train)}", flush=True)
    if not _run_logged(train, REPO / run.log, "w", _environment(recipe)):
        print(f"FAILED {run.name} ({run.log})", flush=True)
        return False
    runtime = {k: shlex.quote(v) for k, v in {  # values known once it trained, as words of a command line
        "seconds": f"{time.time() - start:.3f}", "load_before": load_before, "load_after": _load_average(),
        "train_line": " ".join(train)}.items()}
    _follow_up(recipe, recipe.before_record, run, runtime, bin_dir)
    rec = record_command(recipe, run, bin_dir, runtime)
    ok = not rec or subprocess.run(rec, cwd=REPO, env=_environment(recipe)).returncode == 0
    if not ok:
        print(f"RECORD FAILED {run.name}", flush=True)
    _follow_up(recipe, recipe.after_record, run, runtime, bin_dir)
    return ok


def _follow_up(recipe: Recipe, steps: list[Step], run: Run, runtime: dict, bin_dir: str) -> None:
    """The steps for ``run``, their output appended to its log; a failure is said, the others still run."""
    for s in _steps(steps, run):
        if not _run_logged(argv(run.fill(s.command, runtime), bin_dir), REPO / run.log, "a", _environment(recipe)):
            print(f"{s.what.upper()} FAILED {run.name}", flush=True)


def _load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").is_file() else ""


def select(recipe: Recipe, wanted: list[str], default: bool = True) -> list[Run]:
    """The runs named (by run or lane name), in the recipe's order; when none is named, the recipe's default
    runs (``default``) or every run. A word that names a run selects that run alone, also where a lane has the
    same name (laptop's run ``transformer`` in lane ``transformer``): two commands naming two runs of one lane must
    not both train the second."""
    lanes, names = {r.lane for r in recipe.runs}, {r.name for r in recipe.runs}
    unknown = [w for w in wanted if w not in lanes and w not in names]
    if unknown:
        raise SystemExit(f"run.py: {recipe.name} has no run or lane {', '.join(unknown)} "
                         f"(lanes: {', '.join(sorted(lanes))}; --list names the runs)")
    wanted = wanted or (recipe.default if default else [])
    whole_lanes = {w for w in wanted if w not in names}
    return [r for r in recipe.runs if not wanted or r.name in wanted or r.lane in whole_lanes]


def main(args: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run.py", description=__doc__.splitlines()[0])
    ap.add_argument("recipe", help="a recipe in experiments/recipes/ (parsing, nmt, ...) or a .toml path")
    ap.add_argument("runs", nargs="*", help="run or lane names (default: every run)")
    ap.add_argument("--lanes", type=int, default=1, help="lanes run side by side (default 1)")
    ap.add_argument("--dry-run", action="store_true", help="print the command lines instead of running them")
    ap.add_argument("--list", action="store_true", help="print the runs, their lanes and whether they are recorded")
    ap.add_argument("--force", action="store_true", help="run (or print) recorded runs too")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="change a recipe variable")
    ap.add_argument("--bin", default=os.environ.get("BIN", ".venv/bin"),
                    help="folder of the structattn and python to run (default $BIN or .venv/bin)")
    opts = ap.parse_args(args)
    bad = [s for s in opts.set if "=" not in s]
    if bad:
        ap.error(f"--set takes KEY=VALUE, not {', '.join(bad)}")
    recipe = load_recipe(opts.recipe, dict(s.split("=", 1) for s in opts.set))
    runs = select(recipe, opts.runs, default=not opts.list)
    if opts.list:
        for r in runs:
            print(f"{r.name}\tlane {r.lane}\t{'recorded' if is_recorded(recipe, r) else 'to run'}")
        return 0
    if opts.dry_run:
        print("# " + " ".join(f"{k}={v}" for k, v in recipe.env.items()))
    by_lane: dict[str, list[Run]] = {}
    for r in runs:
        by_lane.setdefault(r.lane, []).append(r)

    def lane(items: list[Run]) -> bool:
        return all([execute(recipe, r, opts.bin, opts.dry_run, opts.force) for r in items])

    workers = 1 if opts.dry_run else max(1, opts.lanes)
    with ThreadPoolExecutor(workers) as pool:
        ok = all(pool.map(lane, by_lane.values()))
    return 0 if ok else 1


if __name__ == "__main__":
    from structattn.errors import UserError

    try:
        sys.exit(main())
    except UserError as exc:  # e.g. the data folder a template names is missing
        sys.exit(f"run.py: {exc}")
