"""Every code block of README.md and docs/**/*.md runs here or is checked against the command line.

The convention (docs/contributing.md, "Code blocks that cannot rot"): a code block is preceded, on the line before
its opening fence, by one of

    <!-- example: run -->                                  run it (python: exec in a fresh namespace;
                                                           shell: bash -e -o pipefail)
    <!-- example: long, <measured time> on <hardware> -->  parse each `structattn ...` line with the real parser
    <!-- example: output -->                               what a command prints (write it as `text`)

`text` blocks that are neither (folder trees, diagrams) need no marker. Identical run blocks (the README's quick
start repeated in a guide) run once.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CODE_LANGUAGES = {"", "python", "py", "bash", "sh", "shell", "console"}
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
MARKER = re.compile(r"^<!--\s*example:\s*(?P<kind>run|long|output)\b(?P<rest>.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)\s*$")
RUN_TIMEOUT_S = 240  # per block; the shipped translator alone takes about 35 s on a loaded 2-core CPU


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    marker: str | None  # the marker line before the fence, or None
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str | None:
        match = MARKER.match(self.marker or "")
        return match["kind"] if match else None


def documentation_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def read_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of one Markdown file, with the line before each opening fence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, start = opening["fence"], i
        i += 1
        body = []
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        previous = lines[start - 1].strip() if start > 0 else ""
        blocks.append(Block(path, start + 1, opening["lang"].lower(), previous if previous.startswith("<!--") else None,
                            "\n".join(body) + "\n"))
        i += 1
    return blocks


ALL_BLOCKS = [block for path in documentation_files() for block in read_blocks(path)]


def _unique(blocks: list[Block]) -> list[Block]:
    seen, kept = set(), []
    for block in blocks:
        if (block.language in SHELL_LANGUAGES, block.code) not in seen:
            seen.add((block.language in SHELL_LANGUAGES, block.code))
            kept.append(block)
    return kept


RUN_BLOCKS = _unique([b for b in ALL_BLOCKS if b.kind == "run"])
LONG_BLOCKS = [b for b in ALL_BLOCKS if b.kind == "long"]


# ------------------------------------------------------------------------------------------------ the convention
def test_documentation_has_examples_of_each_kind():
    assert RUN_BLOCKS and LONG_BLOCKS, "the extraction found no run or no long blocks: is the marker syntax broken?"


def test_every_code_block_is_marked():
    problems = []
    for block in ALL_BLOCKS:
        if block.marker is not None and block.kind is None:
            problems.append(f"{block.where}: unknown marker {block.marker!r}")
        elif block.language in CODE_LANGUAGES and block.kind is None:
            problems.append(f"{block.where}: a {block.language or 'plain'} block without "
                            "<!-- example: run | long, TIME on HARDWARE | output -->")
        elif block.kind == "run" and block.language not in CODE_LANGUAGES:
            problems.append(f"{block.where}: a run marker on a {block.language} block")
    assert not problems, "\n".join(problems)


def test_long_blocks_give_their_measured_time_and_hardware():
    problems = []
    for block in LONG_BLOCKS:
        rest = MARKER.match(block.marker)["rest"].strip()
        # ", 4.2 min on a 2-core AMD EPYC": a number (the measured time), then " on " and the hardware
        if not re.match(r"^,\s*\S.*\d.*\s+on\s+\S", rest):
            problems.append(f"{block.where}: {block.marker!r} lacks ', <measured time> on <hardware>'")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------------------------- flags of long blocks
def structattn_commands(code: str) -> list[list[str]]:
    """The argument lists of every `structattn ...` (or `python -m structattn.cli ...`) command in a shell block:
    continuation lines joined, comments, pipes, redirections and here-documents left out."""
    commands, heredoc_end = [], None
    for line in code.replace("\\\n", " ").splitlines():
        if heredoc_end is not None:
            heredoc_end = None if line.strip() == heredoc_end else heredoc_end
            continue
        if "<<" in line:
            heredoc_end = line.split("<<", 1)[1].strip().strip("'\"").split()[0]
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words, segments = list(lexer), [[]]
        for word in words:
            if set(word) <= set("|&;"):
                segments.append([])
            else:
                segments[-1].append(word)
        for segment in segments:
            args, skip_next = [], False
            for word in segment:
                if skip_next:
                    skip_next = False
                elif set(word) <= set("<>") or re.fullmatch(r"\d?[<>]+", word):
                    skip_next = True  # the redirection's file
                else:
                    args.append(word)
            while args and "=" in args[0] and not args[0].startswith("-"):
                args = args[1:]  # VAR=value prefixes
            if args[:1] == ["structattn"]:
                commands.append(args[1:])
            elif len(args) > 3 and args[1:3] == ["-m", "structattn.cli"]:
                commands.append(args[3:])
    return commands


def test_the_command_extraction_itself():
    code = ("VAR=1 structattn parse --model m < in.txt > out.trees   # comment --bogus\n"
            "echo 'a b' | structattn translate \\\n    --model x\n"
            "cat > f <<'EOF'\nstructattn not-a-command\nEOF\n"
            "torchrun --nproc_per_node 2 -m structattn.cli train-parsing --epochs 1\n")
    assert structattn_commands(code) == [["parse", "--model", "m"], ["translate", "--model", "x"]]


@pytest.mark.parametrize("block", [b for b in LONG_BLOCKS if b.language in SHELL_LANGUAGES],
                         ids=lambda b: b.where)
def test_long_block_commands_parse(block):
    """A renamed or removed command or flag in a block that is not run fails here."""
    from structattn.cli import build_parser

    parser = build_parser()
    for args in structattn_commands(block.code):
        try:
            parser.parse_args(args)
        except SystemExit as exc:
            pytest.fail(f"{block.where}: `structattn {shlex.join(args)}` is refused by the parser (exit {exc.code})")


# ------------------------------------------------------------------------------------------------ run blocks
def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
               PYTHONWARNINGS="ignore::DeprecationWarning")
    return env


class _Timeout(Exception):
    pass


def _run_python(block: Block, tmp_path: Path, monkeypatch) -> None:
    """exec the block in a fresh namespace, in its own temporary folder, offline, with a time limit (SIGALRM: the
    interpreter's imports are shared with the test process, which keeps a dozen blocks fast)."""
    monkeypatch.chdir(tmp_path)
    for key, value in _environment().items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)

    def expired(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(RUN_TIMEOUT_S)
    try:
        exec(compile(block.code, block.where, "exec"), {"__name__": "__docs_example__"})
    except _Timeout:
        pytest.fail(f"{block.where}: did not finish in {RUN_TIMEOUT_S} s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _run_shell(block: Block, tmp_path: Path) -> None:
    """The block as one bash script (set -e -o pipefail) in which `structattn` is this checkout's command line."""
    script = (f'structattn() {{ {shlex.quote(sys.executable)} -m structattn.cli "$@"; }}\n'
              "set -e -o pipefail\n" + block.code)
    try:
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_environment(), capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: did not finish in {RUN_TIMEOUT_S} s")
    assert done.returncode == 0, f"{block.where} failed (exit {done.returncode}):\n{done.stderr[-3000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_BLOCKS, ids=lambda b: b.where)
def test_run_block(block, tmp_path, monkeypatch):
    if block.language in SHELL_LANGUAGES:
        _run_shell(block, tmp_path)
    else:
        _run_python(block, tmp_path, monkeypatch)
