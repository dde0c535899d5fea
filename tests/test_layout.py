"""The repository's layout: results/ holds outcomes (JSONL, Markdown, figures, predictions), the scripts that made
them live in experiments/, which the package does not install."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_SUFFIXES = {".py", ".sh"}


def test_results_hold_no_scripts():
    scripts = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "results").rglob("*")) if p.suffix in SCRIPT_SUFFIXES]
    assert not scripts, f"scripts belong in experiments/, not results/: {scripts}"


def test_experiments_are_not_inside_the_package():
    assert (ROOT / "experiments").is_dir()
    assert not (ROOT / "src" / "experiments").exists()


def run_names() -> set[str]:
    """The names of this repository's runs in results/**/*.jsonl (``run``, ``name``, ``encoder_from`` and the
    reader folder a run started from), those with a digit only: a variant's bare name ("baseline") is a word."""
    names = set()
    for path in sorted((ROOT / "results").rglob("*.jsonl")):
        for text in path.read_text(encoding="utf-8").splitlines():
            if not text.strip():
                continue
            line = json.loads(text)
            names.update(str(line[k]) for k in ("run", "name", "encoder_from") if line.get(k))
            model = Path(str((line.get("config") or {}).get("model") or ""))
            if model.parts[:1] == ("runs",):
                names.add(model.parent.name if model.name == "best" else model.name)
    return {n for n in names if re.search(r"\d", n)}


def test_no_run_of_this_repository_is_named_in_the_package():
    """Code under src/ is the library: a run's name belongs to experiments/ and results/. The shipped models'
    folders (src/structattn/trained/<name>/) are exempt: their cards record the run that made them."""
    names = run_names()
    assert "base-s1-gpu" in names and "reader-cpu-s2-step1500" in names   # the scan reads what it should
    trained = ROOT / "src" / "structattn" / "trained"
    found = []
    for path in sorted((ROOT / "src").rglob("*")):
        in_a_shipped_model = trained in path.parents and path.parent != trained
        if not path.is_file() or path.suffix not in {".py", ".md", ".cpp", ".json"} or in_a_shipped_model:
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{path.relative_to(ROOT)}: {n}" for n in sorted(names) if n in text]
    assert not found, "run names of this repository under src/ (move them to experiments/):\n" + "\n".join(found)
