"""The repository's texts describe the library and its measurements, not how the work on it was organised.

A figure names the hardware that made it ("one NVIDIA H100, torch 2.11"), not how the machine was obtained; a
comment says what code does and why; history goes to CHANGELOG.md. This test reads the README, the changelog, the
documentation, the results' Markdown, the benchmark, experiment and results scripts, and the comments and strings
of the package's source, and fails on the words below.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# word -> what it says about the work instead of the library
BANNED = {
    r"\bsessions?\b": "a working session",
    r"\bsittings?\b": "a sitting",
    r"\bleas(e|es|ed|ing)\b": "how a machine was obtained",
    r"\blent\b": "how a machine was obtained",
    r"\bborrowed\b": "how a machine was obtained",
    r"\bcolleagues?\b": "who else worked",
    r"\btime[- ]?box(es|ed)?\b": "a budget of the work (a run's own limit is a wall-clock limit)",
    r"\bhelpers?\b": "a helper as a worker (for code, say what the functions do)",
    r"\bsub-?agents?\b": "a worker",
    r"`device` tool|\bdevice tool\b": "the tool a machine came through",
    r"\btransfer limit\b": "a limit of the tool a machine came through",
    r"\bstop \d+\b": "a step of the work",
    r"\bissues? ?#?\d+\b|\bissue-\d+\b": "a tracker item",
    r"\b(the|this|that) issue('s)?\b": "a tracker item",
    r"\banother developer\b": "who else worked",
}
PATTERN = re.compile("|".join(f"(?:{p})" for p in BANNED), re.IGNORECASE)

# (file, exact text around the word, why it stays): kept short and explicit
ALLOWED = [
    ("results/PEERS.md", "joeynmt/helpers.py", "a file of Joey NMT, quoted from its own traceback"),
]


def texts() -> list[Path]:
    """The files whose words are checked (data files, predictions and tokenizers are not texts)."""
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]
    files += sorted((ROOT / "results").glob("*.md"))
    files += [p for p in sorted((ROOT / "benchmarks").rglob("*")) if p.suffix in {".md", ".sh", ".py"}]
    files += [p for p in sorted((ROOT / "experiments").rglob("*")) if p.suffix in {".md", ".sh", ".py", ".toml",
                                                                                      ".json", ".yaml", ".yml", ".ini"}]
    files += [p for p in sorted((ROOT / "src").rglob("*")) if p.suffix in {".py", ".md", ".cpp"}]
    return [p for p in files if p.is_file()]


def prose_of_python(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and string of a Python file: its identifiers are code, not prose (a
    third-party API may be called `session`)."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            for offset, line in enumerate(tok.string.splitlines()):
                out.append((tok.start[0] + offset, line))
    return out


def findings(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    rel = path.relative_to(ROOT).as_posix()
    lines = prose_of_python(text) if path.suffix == ".py" else list(enumerate(text.splitlines(), 1))
    found = []
    for number, line in lines:
        for match in PATTERN.finditer(line):
            if any(rel == file and kept in line and match.group(0).lower() in kept.lower()
                   for file, kept, _ in ALLOWED):
                continue
            reason = next(why for p, why in BANNED.items() if re.fullmatch(p, match.group(0), re.IGNORECASE))
            found.append(f"{rel}:{number}: {match.group(0)!r} ({reason}): {line.strip()[:120]}")
    return found


def test_the_texts_describe_the_library_not_how_the_work_was_organised():
    problems = [f for path in texts() for f in findings(path)]
    assert not problems, "\n".join(problems)


def test_the_pattern_catches_what_it_should_and_passes_technical_words():
    caught = ["the lease of stop 40 ran", "an H100 lent for a session", "(issue 27, part 5)", "issue #12",
              "the issue's target", "a colleague's training", "stopped by its time box", "the `device` tool",
              "the 64 MiB transfer limit", "the helpers"]
    passed = ["early stopping at patience 5", "stop the run", "release 0.1.0", "please", "a 2-core AMD EPYC",
              "the tissue", "issued", "a gentle slope", "silent", "the problem is known"]
    assert all(PATTERN.search(t) for t in caught), [t for t in caught if not PATTERN.search(t)]
    assert not any(PATTERN.search(t) for t in passed), [t for t in passed if PATTERN.search(t)]


def test_python_prose_extraction_skips_identifiers():
    source = 'session = make()  # the parser\nx = "a docstring"\n'
    assert [t for _, t in prose_of_python(source)] == ["# the parser", '"a docstring"']
