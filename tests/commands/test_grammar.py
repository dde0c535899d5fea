"""One command-line grammar: every subcommand described, every option with help, one spelling per meaning; a
retired spelling is an unknown argument answered with its replacement; a misspelled flag gets the subcommand's
usage and the closest valid flag."""
from __future__ import annotations

import argparse

import pytest

from structattn import cli
from structattn.cli_grammar import SYNONYMS, walk_parsers


@pytest.fixture(scope="module")
def parser():
    return cli.build_parser()


def _options(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]


def test_every_subcommand_has_a_description_and_every_option_a_help(parser):
    missing = []
    for p in walk_parsers(parser):
        if p is not parser and not (p.description or "").strip():
            missing.append(f"{p.prog}: no description")
        for action in _options(p):
            if action.help is argparse.SUPPRESS:
                missing.append(f"{p.prog} {action.option_strings or action.dest}: hidden")
            elif not (action.help or "").strip():
                missing.append(f"{p.prog} {action.option_strings or action.dest}: no help")
    assert not missing, "\n".join(missing)


def test_one_spelling_per_meaning(parser):
    problems = []
    for p in walk_parsers(parser):
        visible = {s for a in _options(p) if a.help is not argparse.SUPPRESS for s in a.option_strings}
        for group in SYNONYMS:
            shown = sorted(visible & set(group))
            if len(shown) > 1:
                problems.append(f"{p.prog}: {' and '.join(shown)} mean one thing")
            if shown and shown[0] != group[0]:
                problems.append(f"{p.prog}: {shown[0]} is a retired spelling of {group[0]}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("argv, guess", [
    (["probe", "--model", "hybrid-gate-en-de", "--out", "r.json"], "--out -> --output"),
    (["score", "bleu", "--references", "r", "--predictions", "p"], "--references -> --gold"),
    (["score", "bleu", "--split", "dev", "--hypotheses", "h"], "--hypotheses -> --predictions"),
    (["parse", "--model", "bna-minilm", "--spacy-model", "en_x"], "--spacy-model -> --parser"),
    (["train-parsing", "--encoder", "none"], "--encoder -> --model"),
    (["train-parsing", "--max-train-trees", "5"], "--max-train-trees -> --max-train-examples"),
    (["train-parsing", "--clip-grad", "1"], "--clip-grad -> --clip-norm"),
    (["train-translation", "--warmup", "10"], "--warmup -> --warmup-steps"),
    (["train-translation", "--max-updates", "10"], "--max-updates -> --max-steps"),
    (["train-translation", "--variant", "transformer"], "--variant -> --mechanism"),
    (["demo", "--train-examples", "7"], "--train-examples -> --max-train-examples"),
    (["predict", "--model", "runs/x/best", "--data", "q.json"], "--data -> --input"),
])
def test_a_retired_spelling_is_an_unknown_argument_that_names_its_replacement(capsys, argv, guess):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "unrecognized arguments" in err and f"did you mean {guess}?" in err
    assert "deprecated" not in err


@pytest.mark.parametrize("argv", [["evaluate", "runs/x/best"], ["predict", "runs/x/best", "--split", "dev"],
                                  ["score", "evalb", "gold.trees", "pred.trees"]])
def test_a_positional_where_a_flag_is_wanted_is_an_unknown_argument(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.parametrize("argv, dest, value", [
    (["probe", "--model", "hybrid-gate-en-de", "--output", "r.json"], "output", "r.json"),
    (["parse", "--model", "bna-minilm", "--parser", "en_x"], "parser", "en_x"),
    (["train-parsing", "--model", "none"], "encoder", "none"),
    (["train-parsing", "--max-train-examples", "5"], "max_train_trees", "5"),
    (["train-parsing", "--clip-norm", "1"], "clip_grad", "1"),
    (["train-translation", "--warmup-steps", "10"], "warmup", "10"),
    (["evaluate", "--model", "runs/x/best"], "model", "runs/x/best"),
])
def test_the_one_spelling_gives_the_same_value_without_a_warning(parser, capsys, argv, dest, value):
    assert getattr(parser.parse_args(argv), dest) == value
    assert capsys.readouterr().err == ""


def test_renamed_parser_flags_reach_the_config(parser):
    from structattn.commands.train_parsing import parser_config_from_args

    config = parser_config_from_args(parser.parse_args(["train-parsing", "--model", "none", "--max-train-examples",
                                                        "9", "--max-eval-examples", "4", "--clip-norm", "2.5"]))
    assert (config.encoder, config.max_train_trees, config.max_eval_trees, config.clip_grad) == ("none", 9, 4, 2.5)


@pytest.mark.parametrize("argv, usage, guess", [
    (["parse", "--modle", "bna-minilm"], "usage: structattn parse", "--modle -> --model"),
    (["translate", "--model", "hybrid-gate-en-de", "--outptu=y"], "usage: structattn translate", "--outptu -> --output"),
    (["score", "race", "--predictions", "p", "--spilt", "dev"], "usage: structattn score race", "--spilt -> --split"),
    (["train-parsing", "--max-trian-examples", "3"], "usage: structattn train-parsing",
     "--max-trian-examples -> --max-train-examples"),
])
def test_a_misspelled_flag_gets_the_subcommands_usage_and_the_closest_flag(capsys, argv, usage, guess):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith(usage) and f"did you mean {guess}?" in err


@pytest.mark.parametrize("argv, guess", [(["pars", "--model", "bna-scratch"], "parse"),
                                         (["score", "evlab", "gold", "pred"], "evalb")])
def test_a_misspelled_command_gets_the_closest_command_not_a_flag(capsys, argv, guess):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert exc.value.code == 2 and "invalid choice" in last and last.endswith(f"; did you mean {guess}?")


def _help(parser, *command: str) -> str:
    for p in walk_parsers(parser):
        if p.prog == " ".join(("structattn", *command)):
            return " ".join(p.format_help().split())
    raise AssertionError(command)


def test_help_names_the_choices_from_the_registries_and_what_defaults_mean(parser):
    from structattn.attention.mechanisms import MECHANISMS
    from structattn.bna.model import VARIANTS
    from structattn.train.config import task_names

    train = _help(parser, "train")
    assert all(name in train for name in task_names()) and "squad2" in train and "race" in train
    assert "one of: " + ", ".join(sorted(MECHANISMS)) in train
    assert "'' = the offline default all-MiniLM-L6-v2" in train
    parsing = _help(parser, "train-parsing")
    assert "one of: " + ", ".join(VARIANTS) in parsing and "one of: none, spacy, gold" in parsing
    assert "one of: fp32, bf16, fp16" in parsing and "'' = the offline all-MiniLM-L6-v2" in parsing
    evaluate = _help(parser, "evaluate")
    assert "--split SPLIT split to score" in evaluate and "--limit LIMIT score only the first N" in evaluate


def test_none_is_the_one_word_for_no_value(parser, capsys):
    from structattn.errors import UserError
    from structattn.run_config import RunConfig
    from structattn.train.config import config_from_args

    assert config_from_args(parser.parse_args(["train", "--m", "none"]), RunConfig).m is None
    assert capsys.readouterr().err == ""
    with pytest.raises(UserError, match="m='null' is not a valid int"):
        config_from_args(parser.parse_args(["train", "--m", "null"]), RunConfig)
    assert config_from_args(parser.parse_args(["train", "--sgnet", "none"]), RunConfig).sgnet == "none"  # a text field keeps it


def test_the_documented_flag_tables_are_the_parsers(parser):
    """docs/command-line.md ends with the tables :func:`flag_tables` makes; regenerate them when a flag changes."""
    from pathlib import Path

    from structattn.cli_grammar import flag_tables

    doc = (Path(__file__).resolve().parents[2] / "docs" / "command-line.md").read_text(encoding="utf-8")
    begin = doc.index("-->\n", doc.index("<!-- generated from the parser")) + 4
    end = doc.index("<!-- end of the generated tables -->")
    assert doc[begin:end].strip() == flag_tables(parser).strip(), \
        "docs/command-line.md is out of date: paste flag_tables(structattn.cli.build_parser()) between the markers"


def test_building_the_command_line_does_not_import_transformers():
    """Help texts name the registries' choices without importing them at start-up (the mechanisms' registry pulls
    in transformers: 10 s and 270 MB more for every command, also for one that only prints an error)."""
    import subprocess
    import sys

    code = "import sys; from structattn import cli; cli.build_parser(); print('transformers' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_every_help_page_answers_without_importing_torch():
    """`structattn --help` and every `structattn COMMAND --help` (benchmarks/cli_help.py times them): the flags'
    choices come from modules without torch, so help takes a fraction of a second."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from structattn import cli\n"
            "from structattn.cli_grammar import subparser_actions\n"
            "names = dict.fromkeys(p.prog.split()[1] for p in subparser_actions(cli.build_parser())[0].choices.values())\n"
            "for argv in [['--help']] + [[name, '--help'] for name in names]:\n"
            "    try:\n"
            "        cli.main(argv)\n"
            "    except SystemExit:\n"
            "        pass\n"
            "    print('TORCH' if 'torch' in sys.modules else 'no torch', *argv, file=sys.stderr)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    pages = [line for line in res.stderr.splitlines() if line.startswith(("TORCH", "no torch"))]
    assert len(pages) > 15 and not [p for p in pages if p.startswith("TORCH")], res.stderr


def test_the_light_name_lists_name_their_registries():
    """The choices the command line shows (no torch) are the keys of the registries that implement them."""
    from structattn.sgnet import layer, names
    from structattn.translation import config, data, trainer

    assert tuple(layer.AGGREGATIONS) == names.AGGREGATIONS
    assert tuple(trainer.LR_DECAYS) == config.LR_DECAY_NAMES
    assert tuple(data.TRAINING_BATCHES) == config.BATCHINGS


def _all_visible_flags(parser) -> dict[str, list[str]]:
    from structattn.cli_grammar import visible_flags

    found: dict[str, list[str]] = {}
    for p in walk_parsers(parser):
        for flag in visible_flags(p):
            if flag.startswith("--"):
                found.setdefault(flag, []).append(p.prog)
    return found


# Words that name one concept: a flag built of one must not stand beside the same flag built of the other.
_SAME_WORD = {"attn": "attention", "updates": "steps", "update": "step", "variant": "mechanism", "data": "input",
              "in": "input", "out": "output", "hypotheses": "predictions", "references": "gold",
              "trees": "examples", "grad": "norm", "encoder": "model", "pipeline": "parser"}

# Flags close in spelling that were read and mean different things.
_DISTINCT = {("--activation-dropout", "--attention-dropout"), ("--batch-size", "--eval-batch-size"),
             ("--d-model", "--model"), ("--dev-source", "--test-source"), ("--dev-target", "--test-target"),
             ("--encoder-learning-rate", "--learning-rate"), ("--heads", "--threads"), ("--layers", "--nsa-layers"),
             ("--layers", "--num-layers"), ("--learning-rate", "--learning-rates"),
             ("--max-eval-examples", "--max-train-examples"), ("--n-process", "--no-progress"),
             ("--nsa-layers", "--num-layers"), ("--output", "--output-dir"), ("--per-sentence", "--sentence"),
             ("--seed", "--seeds"), ("--tags", "--task"), ("--task", "--tasks"), ("--test", "--text")}


def test_no_two_spellings_of_one_concept_across_the_commands(parser):
    """Every subcommand's flags, read together: two flags made of words that name one concept (--attn-dropout
    beside --attention-dropout, --max-updates beside --max-steps), and any two flags spelled alike that nobody
    has read (a new one gets a look: one concept, or added to _DISTINCT), fail."""
    import difflib
    import itertools

    flags = _all_visible_flags(parser)

    def concept(flag: str) -> str:
        return "-".join(w for w in (_SAME_WORD.get(w, w) for w in flag[2:].split("-")) if w)

    by_concept: dict[str, list[str]] = {}
    for flag in flags:
        by_concept.setdefault(concept(flag), []).append(flag)
    twice = {c: fs for c, fs in by_concept.items() if len(fs) > 1}
    assert not twice, "one concept, several spellings: " + "; ".join(
        f"{' / '.join(f'{f} ({flags[f][0]})' for f in fs)}" for fs in twice.values())
    close = [(a, b) for a, b in itertools.combinations(sorted(flags), 2)
             if difflib.SequenceMatcher(None, a[2:], b[2:]).ratio() >= 0.75 and (a, b) not in _DISTINCT]
    assert not close, f"flags spelled alike, read by nobody yet: {close}"


def test_one_default_seed():
    from structattn.bna.config import ParserConfig
    from structattn.train.config import TrainConfig
    from structattn.translation.config import NMTConfig

    seeds = {p.prog: a.default for p in walk_parsers(cli.build_parser()) for a in p._actions
             if "--seed" in a.option_strings and a.default is not None}
    seeds.update({cls.__name__: cls().seed for cls in (TrainConfig, ParserConfig, NMTConfig)})
    assert set(seeds.values()) == {42}, seeds


def test_usage_lines_show_required_flags_without_brackets(parser):
    for p in walk_parsers(parser):
        usage = p.format_usage()
        for action in p._actions:
            if action.option_strings and (action.required or getattr(p, "required_in_usage", None)
                                          in action.option_strings):
                assert f"[{action.option_strings[0]} " not in usage and f"[{action.option_strings[0]}]" not in usage, \
                    f"{p.prog}: {action.option_strings[0]} is required but its usage line shows it optional"


def test_no_help_page_shows_restructuredtext_markup(parser):
    for p in walk_parsers(parser):
        assert "``" not in p.format_help(), p.prog


def test_every_command_that_runs_a_model_takes_threads(parser, capsys):
    from structattn.cli_grammar import visible_flags

    commands = {p.prog.split()[-1]: p for p in walk_parsers(parser)}
    assert [c for c in cli.THREADED if "--threads" not in visible_flags(commands[c])] == []
    assert cli.main(["translate", "--model", "hybrid-gate-en-de", "--threads", "-1"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
