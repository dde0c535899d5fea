"""experiments/run.py: the recipes' dry runs give the commands the committed results lines record, and the driver
skips recorded runs, resumes in the same folder, follows up and says what failed (on a recipe of tiny commands)."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tasks"))
from tasks_testutil import DATA  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from experiments_testutil import load_experiment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"


@pytest.fixture(scope="module")
def driver():
    return load_experiment("run")


def _dry_run(driver, capsys, *args: str) -> dict[str, list[list[str]]]:
    """run NAME -> the command lines (as words) the dry run prints for it, the training command first."""
    assert driver.main([*args, "--dry-run", "--force", "--bin", "BIN"]) == 0
    by_run, current = {}, None
    for line in capsys.readouterr().out.splitlines():
        words = shlex.split(line)
        if line.startswith("#"):
            continue
        if words[0] == "BIN/structattn" and "--output-dir" in words:
            current = Path(words[words.index("--output-dir") + 1]).name
        by_run.setdefault(current, []).append(words)
    return by_run


def _lines(name: str) -> list[dict]:
    return [json.loads(x) for x in (RESULTS / name).read_text(encoding="utf-8").splitlines()]


#: Options added, or whose preset default changed, after the committed runs were recorded: the recipes give them
#: at the value those runs had, where the recorded commands say nothing.
RECIPE_GIVEN = {"max_chart_cells": 0, "adam_eps": 1e-9, "init": "fairseq", "residual": "plain", "batching": "length",
                "embedding_dropout": None, "attention_dropout": 0.0, "activation_dropout": 0.0,
                "lr_decay": "inverse_sqrt"}


def _same_settings(ours: list[str], recorded: list[str], config: dict | None = None) -> None:
    """The parser reads the same settings from both commands (arguments after the program), ``--preset`` apart:
    the committed runs were recorded under the commands' earlier names (train-parser, train-nmt: aliases the parser
    still reads), before --preset existed (the default was then what --preset full is) and
    before --max-chart-cells and before the laptop preset took DeepNet's residual weights (the recipes give the
    values the runs had: --max-chart-cells 0, --residual plain). A flag the recorded command leaves to the preset
    matches when it gives the value of the line's recorded ``config`` (the laptop preset's warm-up of 800 before
    it became 400)."""
    from structattn.cli import build_parser

    parser = build_parser()
    aliases = {"train-parser": "train-parsing", "train-nmt": "train-translation"}
    a, b = vars(parser.parse_args(ours)), vars(parser.parse_args(recorded))
    a.pop("preset", None)
    b.pop("preset", None)
    for name, value in RECIPE_GIVEN.items():
        if name in a and b.get(name) is None and a[name] in (value, str(value)):  # flags are read as text
            b[name] = a[name]
    for name, value in (config or {}).items():  # what the run had, where its command said nothing
        if name in a and b.get(name) is None and a[name] is not None and str(a[name]) == str(value):
            b[name] = a[name]
    b["command"] = aliases.get(b["command"], b["command"])
    assert a == b, f"{shlex.join(ours)}\n{shlex.join(recorded)}"


def test_every_recipe_loads_and_names_each_run_once(driver):
    recipes = sorted(p.stem for p in driver.RECIPES.glob("*.toml"))
    assert recipes == ["cpu", "laptop", "nmt", "parsing", "precision", "translation_ablation"]
    for name in recipes:
        recipe = driver.load_recipe(name)   # cpu: its sweeps record their own lines
        assert recipe.runs and recipe.kind in {"", *driver._record_module().KINDS}


def test_laptop_dry_run_is_the_recorded_command(driver, capsys):
    for line in _lines("laptop_defaults.jsonl"):
        suffix = "-2threads" if line["name"].endswith("-2threads") else ""
        runs = _dry_run(driver, capsys, "laptop", line["name"], "--set", f"suffix={suffix}")
        train, record = runs[line["name"]]
        assert shlex.split(shlex.join(train).replace("BIN/", ".venv/bin/")) == shlex.split(line["command"])
        assert record[2:6] == ["laptop", f"runs/laptop/{line['name']}", line["name"], Path(line["output"]).name
                               .removeprefix(line["name"] + ".").replace("test2016.de", "hypotheses/test2016.de")]


def test_precision_dry_run_is_the_recorded_command(driver, capsys):
    runs = _dry_run(driver, capsys, "precision")
    for line in _lines("precision_runs.jsonl"):
        train, record = runs[f"{line['workload']}-{line['precision']}"]
        _same_settings(train[1:], shlex.split(line["command"])[1:])
        assert record[2:] == ["precision", f"runs/precision/{line['workload']}-{line['precision']}",
                              f"{line['workload']}-{line['precision']}"]


def test_translation_ablation_dry_run_is_the_recorded_command_and_note(driver, capsys):
    """Each recorded line is the dry run of the recipe under the seed and threads that line was run with."""
    lines = _lines("peers/nmt_recipe_ablation.jsonl")
    assert lines
    for line in lines:
        threads = line["command"][line["command"].index("--threads") + 1]
        runs = _dry_run(driver, capsys, "translation_ablation", "--set", f"seed={line['seed']}", "--set",
                        f"threads={threads}")
        train, record = runs[line["run"]]
        _same_settings(train[1:], line["command"], line["config"])
        assert record[record.index("--note") + 1] == line["note"]


@pytest.mark.parametrize("recipe,results", [("parsing", "parsing.jsonl"), ("nmt", "nmt.jsonl")])
def test_parsing_and_nmt_dry_runs_give_the_recorded_settings(driver, capsys, recipe, results):
    """The recipes' full-size runs: each says --preset full (see :func:`_same_settings`)."""
    if recipe == "nmt" and not (DATA / "multi30k").is_dir():
        pytest.skip(f"data not found: {DATA / 'multi30k'} (the dev translation names its sources; set STRUCTATTN_DATA)")
    runs = _dry_run(driver, capsys, recipe)
    lines = _lines(results)
    assert len(lines) >= 18
    for line in lines:
        train = runs[line["run"]][0]
        assert train[train.index("--preset") + 1] == "full"
        _same_settings(train[1:], line["command"])
        assert ["BIN/python", "experiments/record.py", recipe, f"runs/{recipe}/{line['run']}", line["run"]] \
            in runs[line["run"]]


# --------------------------------------------------------------------------------------- the driver itself
def _recipe(tmp_path: Path, train: str) -> Path:
    recipe = tmp_path / "tiny.toml"
    recipe.write_text(f"""
output = "{tmp_path}/runs/{{name}}"
train = "{train}"
record = ""
[variables]
word = "hello"
[env]
TINY_WORD = "{{word}}"
[[after_record]]
what = "follow-up"
match = ["*-b"]
command = "python -c 'import sys; sys.exit(0)'"
[[runs]]
lane = "{{x}}"
x = ["a", "b"]
name = "run-{{x}}"
""")
    return recipe


def test_runs_train_in_their_folder_with_their_log_and_environment(driver, tmp_path, capsys):
    script = "import os, sys, pathlib; d = pathlib.Path(sys.argv[1]); d.mkdir(exist_ok=True); " \
             "(d / 'seen').write_text(os.environ['TINY_WORD'] + str(len(list(d.iterdir()))))"
    recipe = _recipe(tmp_path, f"python -c \\\"{script}\\\" {{output}}")
    bin_dir = str(Path(sys.executable).parent)
    assert driver.main([str(recipe), "--bin", bin_dir, "--set", "word=hi"]) == 0
    assert (tmp_path / "runs" / "run-a" / "seen").read_text() == "hi0" and (tmp_path / "runs" / "run-a.log").is_file()
    assert driver.main([str(recipe), "run-b", "--bin", bin_dir]) == 0   # again, in the same folder: resumes there
    assert (tmp_path / "runs" / "run-b" / "seen").read_text() == "hello1"
    out = capsys.readouterr().out
    assert "== run-a:" in out and "FAILED" not in out


def test_a_failure_is_said_and_the_other_runs_go_on(driver, tmp_path, capsys):
    recipe = _recipe(tmp_path, "python -c 'import sys; sys.exit(sys.argv[1].endswith(\\\"a\\\"))' {output}")
    assert driver.main([str(recipe), "--bin", str(Path(sys.executable).parent), "--lanes", "2"]) == 1
    out = capsys.readouterr().out
    assert f"FAILED run-a ({tmp_path}/runs/run-a.log)" in out and "== run-b:" in out and "FAILED run-b" not in out


def test_recorded_runs_are_skipped_and_names_are_checked(driver, tmp_path, capsys):
    results = tmp_path / "nmt.jsonl"
    results.write_text('{"run": "run-a"}\n')
    recipe = _recipe(tmp_path, "structattn train-translation --output-dir {output}")
    recipe.write_text(recipe.read_text().replace('record = ""', f'record = "nmt"\nresults = "{results}"'))
    assert driver.main([str(recipe), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "skip run-a (recorded)" in out and "experiments/record.py nmt" in out and "run-b run-b" in out
    assert "python -c 'import sys; sys.exit(0)'" in out   # the follow-up of *-b only
    assert out.count("sys.exit(0)") == 1
    with pytest.raises(SystemExit, match="no run or lane run-c"):
        driver.main([str(recipe), "run-c", "--dry-run"])
    with pytest.raises(SystemExit, match="not a variable"):
        driver.main([str(recipe), "--set", "colour=red", "--dry-run"])


def test_a_run_named_like_a_lane_selects_that_run_alone(driver):
    """laptop's run ``transformer`` sits in lane ``transformer`` with ``transformer-s2``: naming the run must not
    also train the lane's other run (two commands naming one run each would both train the second)."""
    recipe = driver.load_recipe("laptop")
    assert [r.name for r in driver.select(recipe, ["transformer"])] == ["transformer"]
    assert [r.name for r in driver.select(recipe, ["transformer", "transformer-s2"])] == ["transformer", "transformer-s2"]
    assert [r.name for r in driver.select(recipe, ["translation"])] == ["hg", "hg-s2"]   # a lane's name alone
