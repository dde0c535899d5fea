"""Every code block of README.md and docs/**/*.md runs here or is checked against the command line.

The convention (docs/contributing.md, "Code blocks that cannot rot"): a code block is preceded, on the line before
its opening fence, by one of

    <!-- example: run -->                                  run it (python: exec in a fresh namespace;
                                                           shell: bash -e -o pipefail)
    <!-- example: long, <measured time> on <hardware> -->  parse each `structattn ...` line with the real parser
    <!-- example: output -->                               what the run block just above prints (as `text`),
                                                           compared with what it prints here
    <!-- example: output, varies: scores -->               the same, numbers with a decimal point (scores,
                                                           probabilities, timings) not compared
    <!-- example: output, not run: <why> -->               what a command prints in a case no example can make
                                                           (a build, a full disk); not compared
    <!-- example: fragment, <what it needs> -->             part of a program (names defined elsewhere): neither
                                                           run nor parsed, by design

`text` blocks that are neither (folder trees, diagrams) need no marker. Identical run blocks (the README's quick
start repeated in a guide) run once, and are compared with the output blocks that follow any copy.

Time limits: a run block may take RUN_CPU_LIMIT_S of CPU time (its process and children) and RUN_WALL_LIMIT_S of
wall time; the wall limit is generous (a 2-core machine busy with other work runs a block at a third of its speed),
the CPU limit is what catches a block that became slow.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import contextlib
import io
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CODE_LANGUAGES = {"", "python", "py", "bash", "sh", "shell", "console"}
SHELL_LANGUAGES = {"", "bash", "sh", "shell", "console"}
MARKER = re.compile(r"^<!--\s*example:\s*(?P<kind>run|long|output|fragment)\b(?P<rest>.*?)-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)\s*$")
# per block: the slowest (the README's reader answers, two processes) takes about 12 s of CPU time; on a 2-core
# machine under load its wall time was 60 s alone and past 240 s beside a full test run
RUN_CPU_LIMIT_S = 120
RUN_WALL_LIMIT_S = 900


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


def _output_pairs(blocks: list[Block]) -> list[tuple[Block | None, Block]]:
    """Every output block with the block just before it in its file (None: the first block of its file)."""
    pairs, previous = [], None
    for block in blocks:
        if block.kind == "output":
            pairs.append((previous if previous is not None and previous.path == block.path else None, block))
        previous = block
    return pairs


OUTPUT_PAIRS = _output_pairs(ALL_BLOCKS)


def _output_option(block: Block) -> str:
    """"compare", "scores" (varies: scores) or "not run"."""
    rest = MARKER.match(block.marker)["rest"].strip().lstrip(",").strip()
    if rest.startswith("not run:") and rest[len("not run:"):].strip():
        return "not run"
    return {"": "compare", "varies: scores": "scores"}.get(rest, f"unknown: {rest}")


def normalised(text: str, option: str) -> list[str]:
    """Lines as compared: trailing spaces and blank lines at the end dropped; with "scores", every number with a
    decimal point is <N> (integers, such as character offsets, are still compared)."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    if option == "scores":
        lines = [re.sub(r"-?\d+\.\d+(e-?\d+)?", "<N>", line) for line in lines]
    return lines


def expected_outputs(block: Block) -> list[Block]:
    """The output blocks that show what ``block`` (or an identical run block elsewhere) prints."""
    return [out for before, out in OUTPUT_PAIRS if before is not None and before.kind == "run"
            and before.code == block.code and before.language == block.language
            and _output_option(out) != "not run"]


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


def test_every_output_block_is_compared_or_says_why_not():
    problems = []
    for before, block in OUTPUT_PAIRS:
        option = _output_option(block)
        if option.startswith("unknown"):
            problems.append(f"{block.where}: {block.marker!r}: say nothing, 'varies: scores' or 'not run: <why>'")
        elif option != "not run" and (before is None or before.kind != "run"):
            problems.append(f"{block.where}: an output block not right after a run block; put it after the block "
                            "that prints it, or mark it 'not run: <why>'")
    assert not problems, "\n".join(problems)


def test_output_normalisation():
    text = "answer: 'France' (characters 104-110, score 7.235, probability 0.972)  \n\n"
    assert normalised(text, "scores") == ["answer: 'France' (characters 104-110, score <N>, probability <N>)"]
    assert normalised(text, "compare") == [text.split("\n")[0].rstrip()]


def test_fragments_say_what_they_need():
    fragments = [b for b in ALL_BLOCKS if b.kind == "fragment"]
    assert all(MARKER.match(b.marker)["rest"].strip(" ,") for b in fragments), \
        [b.where for b in fragments if not MARKER.match(b.marker)["rest"].strip(" ,")]


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
def test_long_block_commands_parse(block, monkeypatch):
    """A renamed or removed command or flag in a block that is not run fails here, and so does a retired spelling
    (an unknown argument). Model folders the block's own steps make (``--model runs/x/best``) are taken as
    given."""
    from structattn.cli import build_parser
    from structattn.models import trained

    monkeypatch.setattr(trained, "resolve", lambda model, kind: ROOT)
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


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _run_python(block: Block, tmp_path: Path, monkeypatch) -> str:
    """exec the block in a fresh namespace, in its own temporary folder, offline, with time limits (SIGALRM for
    the wall time; the interpreter's imports are shared with the test process, which keeps a dozen blocks fast);
    returns what it printed."""
    monkeypatch.chdir(tmp_path)
    for key, value in _environment().items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)

    def expired(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(RUN_WALL_LIMIT_S)
    printed, started = io.StringIO(), _cpu_seconds()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(block.code, block.where, "exec"), {"__name__": "__docs_example__"})
    except _Timeout:
        pytest.fail(f"{block.where}: did not finish in {RUN_WALL_LIMIT_S} s of wall time")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    used = _cpu_seconds() - started
    assert used <= RUN_CPU_LIMIT_S, f"{block.where}: took {used:.0f} s of CPU time (limit {RUN_CPU_LIMIT_S} s)"
    return printed.getvalue()


def _run_shell(block: Block, tmp_path: Path) -> str:
    """The block as one bash script (set -e -o pipefail) in which `structattn` is this checkout's command line,
    with time limits; returns its standard output."""
    script = (f'structattn() {{ {shlex.quote(sys.executable)} -m structattn.cli "$@"; }}\n'
              "set -e -o pipefail\n" + block.code)
    started = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=_environment(), capture_output=True,
                              text=True, timeout=RUN_WALL_LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.where}: did not finish in {RUN_WALL_LIMIT_S} s of wall time")
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    used = (ended.ru_utime - started.ru_utime) + (ended.ru_stime - started.ru_stime)
    assert done.returncode == 0, f"{block.where} failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
    assert used <= RUN_CPU_LIMIT_S, f"{block.where}: took {used:.0f} s of CPU time (limit {RUN_CPU_LIMIT_S} s)"
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_BLOCKS, ids=lambda b: b.where)
def test_run_block(block, tmp_path, monkeypatch):
    if block.language in SHELL_LANGUAGES:
        printed = _run_shell(block, tmp_path)
    else:
        printed = _run_python(block, tmp_path, monkeypatch)
    for shown in expected_outputs(block):
        option = _output_option(shown)
        assert normalised(printed, option) == normalised(shown.code, option), \
            f"{shown.where}: the output block is not what {block.where} prints:\n{printed}"
