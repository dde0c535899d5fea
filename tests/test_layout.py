"""The repository's layout: results/ holds outcomes (JSONL, Markdown, figures, predictions), the scripts that made
them live in experiments/, which the package does not install."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT_SUFFIXES = {".py", ".sh"}


def test_results_hold_no_scripts():
    scripts = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "results").rglob("*")) if p.suffix in SCRIPT_SUFFIXES]
    assert not scripts, f"scripts belong in experiments/, not results/: {scripts}"


def test_experiments_are_not_inside_the_package():
    assert (ROOT / "experiments").is_dir()
    assert not (ROOT / "src" / "experiments").exists()
