"""The one command-line entry point: ``structattn <command> ...``.

Each command lives in ``structattn.commands.<name>`` and exposes
``add_parser(subparsers)`` (which registers its flags and sets ``func``).
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .cli_grammar import CommandLineParser, plain_text, require_in_usage, walk_parsers
from .stopping import Stopped, handling_signals, raise_if_pending

# Order = order in --help. Every name is a module of structattn.commands (benchmarks are scripts in
# benchmarks/, run by `make bench`, not commands).
COMMANDS = ["preprocess", "masks", "cache", "train", "evaluate", "predict", "sweep", "report", "demo",
            "train_parsing", "parse", "score", "train_translation", "translate", "models",
            "probe", "answer", "pack_reader"]

# The commands that run models: each takes --threads (train-translation's is a field of its recorded config).
THREADED = {"train", "sweep", "evaluate", "predict", "demo", "train-parsing", "parse", "train-translation", "translate",
            "probe", "answer", "pack-reader"}
#: commands that continue where a stopped run of theirs left off when given the same arguments again
RESUMABLE_COMMANDS = ("train", "train-parsing", "train-translation", "sweep")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandLineParser(prog="structattn", description="Structure-aware attention for Transformer encoders.")
    parser.add_argument("--verbose", action="store_true",
                        help="show the libraries' loading output (transformers' progress bars and load reports)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"structattn.commands.{name}").add_parser(sub)
    for p in walk_parsers(parser):
        p.description = plain_text(p.description) if p.description else p.description
        for action in p._actions:  # noqa: SLF001
            if isinstance(action.help, str):
                action.help = plain_text(action.help)
        if p.prog.split()[-1] in THREADED and "--threads" not in p._option_string_actions:  # noqa: SLF001
            p.add_argument("--threads", type=int, default=0, metavar="N",
                           help="torch threads of the command's models (default 0: torch's default)")
            if getattr(p, "required_in_usage", None):
                require_in_usage(p, p.required_in_usage)  # the usage line again, with --threads
    return parser


def _set_threads(args) -> None:
    """``--threads N``: torch's intra-op threads, set before the command runs (train-translation also records it)."""
    value = getattr(args, "threads", None)
    try:
        threads = int(value) if value not in (None, "") else 0
    except ValueError:
        raise UserError(f"--threads {value}: give a number of threads, or 0 for torch's default") from None
    if threads < 0:
        raise UserError(f"--threads {threads}: give a positive number of threads, or 0 for torch's default")
    if threads:
        import torch

        torch.set_num_threads(threads)


def _quiet_libraries() -> None:
    """transformers' per-load reports drown the progress bars: errors only (read when it is imported,
    so commands that never load a model do not pay for importing it here)."""
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # the per-load "Loading weights" bar; ours stay


def _loud_libraries() -> None:
    """``--verbose``: transformers' warnings, load reports and progress bars back on."""
    from transformers.utils import logging as hf_logging

    from .verbosity import set_verbose

    set_verbose(True)
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    """Run one command; SIGINT and SIGTERM, from the start (imports included), end it in one line with 130 or 143
    (`structattn.stopping`: never inside a write)."""
    with handling_signals():
        try:
            return _main(argv)
        except Stopped as exc:
            words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
            exc.resumable = exc.resumable or words[:1] in ([c] for c in RESUMABLE_COMMANDS)  # also before training
            print(exc.message(), file=sys.stderr)
            return exc.exit_status
        except KeyboardInterrupt:  # raised by other code than the signal handler
            print("interrupted", file=sys.stderr)
            return 130


def _main(argv: list[str] | None) -> int:
    _quiet_libraries()
    parser = build_parser()
    raise_if_pending()  # a signal that an import swallowed
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser.parse_args(words)
    except UserError as exc:  # a value checked as the command line is read (a model's name): before any loading
        command = next((w for w in words if not w.startswith("-")), "")
        print(f"structattn {command}: error: {exc}", file=sys.stderr)
        return 2
    if args.verbose:
        _loud_libraries()
    args.argv = words  # recorded beside results as the exact command
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        _set_threads(args)
        result = args.func(args)
    except UserError as exc:  # errors the user can fix: one clear line, no traceback
        print(f"structattn {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)


from .errors import UserError  # noqa: E402  (kept after main for readability)

if __name__ == "__main__":
    sys.exit(main())
