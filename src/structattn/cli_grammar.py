"""The command line's one grammar: one spelling per meaning, and the subcommand's usage with the closest valid
flag when a flag is misspelled.

* `SYNONYMS`: groups of spellings that mean one thing; the first of each group is the spelling every
  subcommand uses, the others are retired: no command accepts them, and one given is answered with its
  replacement (`RETIRED`).
* `CommandLineParser`: an ``ArgumentParser`` whose unrecognised arguments are reported by the
  subcommand that was chosen (its usage line) with the closest valid flag (`difflib`).
* `walk_parsers`: every (sub)parser of a command line, for tests and the generated flag tables.
"""
from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Iterator

#: Spellings with one meaning: the first is the one every subcommand uses; the others are retired (an unknown
#: argument whose error names the first).
SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("--model", "--encoder", "--model-dir"),  # the trained model or pretrained encoder to use
    ("--input", "--input-file", "--in", "--data"),  # the file read (--data: predict's SQuAD file)
    ("--output", "--out", "--output-file"),  # the file written
    ("--parser", "--spacy-model", "--spacy-pipeline"),  # the spaCy pipeline
    ("--max-train-examples", "--max-train-trees", "--train-examples"),  # use only the first N training examples
    ("--max-eval-examples", "--max-eval-trees", "--eval-examples"),  # evaluate on only the first N examples
    ("--clip-norm", "--clip-grad"),  # gradient norm clipping
    ("--warmup-steps", "--warmup"),  # linear warm-up, in optimizer steps (--warmup-ratio is a fraction)
    ("--gold", "--references"),  # what a scorer compares with (gold trees, reference translations, SQuAD file)
    ("--predictions", "--hypotheses"),  # what a scorer scores
    ("--max-steps", "--max-updates"),  # optimizer steps of a run (train-translation said updates)
    ("--attention-dropout", "--attn-dropout"),  # dropout on the attention probabilities
    ("--mechanism", "--variant"),  # the attention mechanism (or BNA's layer stack) a model is built with
)

#: Retired spelling -> the spelling that replaces it (derived from `SYNONYMS`), suggested when given.
RETIRED: dict[str, str] = {old: group[0] for group in SYNONYMS for old in group[1:]}


#: Words people reach for that a command spells otherwise: suggested when given (``answer --passage`` -> ``--context``)
#: even where they are too far from the flag for a spelling match.
SUGGESTED: dict[str, str] = {"--passage": "--context", "--passage-file": "--context-file", "--text": "--context",
                             "--file": "--input"}


def add_line_io_flags(parser: argparse.ArgumentParser, kind: str, folder: str, each_line: str, written: str,
                      model_type=str) -> None:
    """``--model`` (required: a shipped ``kind``'s name or a ``folder``, read by ``model_type``), ``--input`` and
    ``--output`` of a command that writes output line N for input line N (standard input and output by default):
    ``each_line`` says what an input line holds, ``written`` what is written for it."""
    parser.add_argument("--model", required=True, type=model_type, metavar="NAME|DIR",
                        help=f"a trained {kind}'s name (`structattn models` lists them) or {folder}")
    parser.add_argument("--input", default="-", help=f"UTF-8 text file, {each_line} per line (default -: stdin)")
    parser.add_argument("--output", default="-", help=f"output file: {written} of input line N on line N "
                                                      "(default -: stdout); its folder must exist")


def require_in_usage(parser: argparse.ArgumentParser, flag: str) -> None:
    """Show ``flag`` as required in ``parser``'s usage line where the command checks it itself (its one-line
    error says what to give): ``[--model DIR]`` -> ``--model DIR``. Call it again after adding flags (it keeps
    ``flag`` in ``parser.required_in_usage``)."""
    parser.required_in_usage = flag
    parser.usage = None
    usage = parser.format_usage().removeprefix("usage: ").rstrip("\n")
    parser.usage = re.sub(r"\[(" + re.escape(flag) + r"(?: [A-Z_|]+)?)\]", r"\1", usage, count=1)


def plain_text(text: str) -> str:
    """Help text from reStructuredText docstrings: ````x```` -> ```x``` (help pages are read as plain text)."""
    return text.replace("``", "`")


def subparser_actions(parser: argparse.ArgumentParser) -> list[argparse._SubParsersAction]:
    return [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001


def walk_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subparser below it, each once (aliases of a command share one parser)."""
    seen: set[int] = set()
    todo = [parser]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for sub in subparser_actions(current):
            todo.extend(sub.choices.values())


def visible_flags(parser: argparse.ArgumentParser) -> list[str]:
    """The option strings shown in ``parser``'s help."""
    return [s for a in parser._actions if a.help is not argparse.SUPPRESS for s in a.option_strings]  # noqa: SLF001


def closest_flag(parser: argparse.ArgumentParser, word: str) -> str | None:
    """The valid flag of ``parser`` closest to the misspelled ``word`` (``--modle=x`` -> ``--model``), or None."""
    flag = word.split("=", 1)[0]
    for table in (SUGGESTED, RETIRED):
        if table.get(flag) in visible_flags(parser):
            return table[flag]
    match = difflib.get_close_matches(flag, visible_flags(parser), n=1, cutoff=0.6)
    return match[0] if match else None


def unknown_flags(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """The words that look like flags but are none of ``parser``'s (nor an abbreviation of one), and the retired
    spellings it does not have."""
    known = list(parser._option_string_actions)  # noqa: SLF001
    out = []
    for word in words:
        flag = word.split("=", 1)[0]
        if len(flag) > 1 and flag.startswith("-") and not flag[1:2].isdigit() \
                and (flag in RETIRED and flag not in known or not any(k.startswith(flag) for k in known)):
            out.append(flag)
    return out


class CommandLineParser(argparse.ArgumentParser):
    """Reports unrecognised arguments with the chosen subcommand's usage and, for any error of a command line
    that holds a misspelled flag (also "the following arguments are required"), the closest valid flag."""

    _words: list[str] = []  # the command line being parsed (shared by the subcommands' parsers)

    def parse_args(self, args=None, namespace=None):
        CommandLineParser._words = list(sys.argv[1:] if args is None else args)
        namespace, extras = self.parse_known_args(args, namespace)
        chosen = self.chosen_parser(namespace)
        # a retired spelling argparse took as the abbreviation of a longer flag (--out: --output, --encoder:
        # --encoder-learning-rate) is refused as well
        extras += [word for word in CommandLineParser._words if word.split("=", 1)[0] in RETIRED
                   and word.split("=", 1)[0] not in chosen._option_string_actions and word not in extras]  # noqa: SLF001
        if extras:
            chosen.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace

    def error(self, message: str):
        subs = subparser_actions(self)
        given = re.search(r"invalid choice: '([^']*)'", message)
        if subs and given:  # a misspelled (sub)command: the closest name, not a flag
            close = difflib.get_close_matches(given[1], list(subs[0].choices), n=1)
            super().error(message + (f"; did you mean {close[0]}?" if close else ""))
        guesses = [(flag, closest_flag(self, flag)) for flag in unknown_flags(self, CommandLineParser._words)]
        hints = [f"{flag} -> {guess}" for flag, guess in guesses if guess]
        if hints:
            message += "; did you mean " + ", ".join(hints) + "?"
        super().error(message)

    def chosen_parser(self, namespace: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost subparser that ``namespace``'s command (and sub-command) names."""
        parser: argparse.ArgumentParser = self
        while True:
            subs = subparser_actions(parser)
            name = getattr(namespace, subs[0].dest, None) if subs else None
            if name is None or name not in subs[0].choices:
                return parser
            parser = subs[0].choices[name]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def flag_tables(parser: argparse.ArgumentParser) -> str:
    """Markdown: per (sub)command its description and a table of its flags and their help (the tables of
    ``docs/command-line.md``)."""
    out = []
    for p in walk_parsers(parser):
        if p is parser or subparser_actions(p):
            continue  # the top level and a command with sub-commands (cache, score): their sub-commands follow
        formatter = p._get_formatter()  # noqa: SLF001
        out += [f"### `{p.prog}`", "", _cell(p.description or ""), "", "| flag | meaning |", "|---|---|"]
        for action in p._actions:  # noqa: SLF001
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            invocation = formatter._format_action_invocation(action)  # noqa: SLF001
            out.append(f"| `{invocation}` | {_cell(action.help or '')} |")
        out.append("")
    return "\n".join(out)
