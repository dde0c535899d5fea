"""The one task registry: every task and corpus once, with its family; the trainers, loaders and predictors are
looked up by family, and each family has one; a corpus registered for translation or parsing is what their commands
and trainers read."""
from pathlib import Path

import pytest
from tasks_testutil import write

from structattn.errors import UserError
from structattn.tasks import TASKS
from structattn.tasks.multiple_choice import MC_TASKS
from structattn.tasks.multi30k import MULTI30K, TRANSLATION_CORPORA, ParallelCorpus
from structattn.tasks.ptb import PARSING_CORPORA, PTB_SAMPLE, TreebankCorpus
from structattn.tasks.registry import FAMILIES, FAMILY_TABLES, all_entries, corpus, corpus_names, registry, task_entry
from structattn.tasks.squad import QA_TASKS


def test_every_table_is_in_the_registry_once_with_its_family():
    entries = all_entries()
    tables = ((TASKS, "sentence"), (QA_TASKS, "span_qa"), (MC_TASKS, "multiple_choice"),
              (TRANSLATION_CORPORA, "translation"), (PARSING_CORPORA, "parsing"))
    assert len(entries) == sum(len(table) for table, _ in tables)
    for table, family in tables:
        for name, spec in table.items():
            assert entries[name].family == family and entries[name].spec is spec
    assert {e.family for e in entries.values()} == set(FAMILY_TABLES)


def test_the_fine_tuning_tasks_are_those_structattn_train_trains():
    assert FAMILIES == ("sentence", "span_qa", "multiple_choice")
    assert set(registry()) == {n for n, e in all_entries().items() if e.family in FAMILIES}
    assert "multi30k" not in registry() and "ptb_sample_nltk" not in registry()
    with pytest.raises(UserError, match="unknown task 'multi30k'"):
        task_entry("multi30k")


def test_each_family_has_a_default_corpus_and_an_unknown_one_is_one_line():
    assert corpus("translation") is MULTI30K and corpus("parsing") is PTB_SAMPLE
    with pytest.raises(UserError, match="unknown translation corpus 'wmt14'; valid corpora: multi30k"):
        corpus("translation", "wmt14")


def test_an_unknown_task_is_one_line_listing_the_valid_ones():
    with pytest.raises(UserError, match="unknown task .sst3.; valid tasks: .*squad2.*sst2"):
        task_entry("sst3")


def test_each_family_has_a_trainer_a_loader_and_a_predictor():
    from structattn.commands.predict import PREDICTORS
    from structattn.train.config import task_family, task_names
    from structattn.trainers import LOADERS, TRAINERS

    assert set(TRAINERS) == set(LOADERS) == set(PREDICTORS) == set(FAMILIES)
    assert task_names() == sorted(registry())
    assert [task_family(n) for n in ("sst2", "squad2", "race_m")] == ["sentence", "span_qa", "multiple_choice"]


def test_a_registered_translation_corpus_is_what_train_translation_reads(tmp_path, monkeypatch):
    from structattn.cli import build_parser
    from structattn.translation.config import NMTConfig
    from structattn.translation.trainer import TranslationFamily, _read_sets

    for stem, pairs in (("tr", "a b\tx y\nc\tz\n"), ("va", "d\tw\n"), ("te", "e f\tv u\n")):
        for side, lang in ((0, "fr"), (1, "it")):
            write(tmp_path, f"tiny/{stem}.{lang}", "".join(line.split("\t")[side] + "\n"
                                                           for line in pairs.splitlines()))
    monkeypatch.setitem(TRANSLATION_CORPORA, "tiny", ParallelCorpus("Tiny", "tiny", {"train": "tr", "dev": "va",
                                                                                   "final": "te"},
                                                                 ("final",), "fr", "it"))
    assert corpus_names("translation") == ["multi30k", "tiny"]
    args = build_parser().parse_args(["train-translation", "--corpus", "tiny", "--test-splits", "final"])
    assert args.corpus == "tiny"
    train, dev, tests = _read_sets(NMTConfig(data_dir=str(tmp_path), test_splits=["final"]), "tiny")
    assert (train.sources, train.targets, dev.sources, tests["final"].targets) == (["a b", "c"], ["x y", "z"],
                                                                                  ["d"], ["v u"])
    own = dict(train_source="a", train_target="b", dev_source="c", dev_target="d")
    with pytest.raises(UserError, match="exclude each other"):
        _read_sets(NMTConfig(**own), "tiny")
    # a run on another corpus does not resume one on the default corpus, whose settings are its config's alone
    assert TranslationFamily(NMTConfig(), corpus="tiny").settings()["corpus"] == "tiny"
    assert "corpus" not in TranslationFamily(NMTConfig(), corpus="multi30k").settings()


def test_a_registered_treebank_is_what_train_parsing_reads(tmp_path, monkeypatch):
    from structattn.bna.trainer import TreebankFiles
    from structattn.cli import build_parser

    for n, tree in enumerate(["(S (NP (DT a) (NN b)) (VP (VBZ c)))", "(S (NP (NN d)) (VP (VBZ e)))",
                              "(S (NP (NN f)) (VP (VBZ g)))"], start=1):
        write(tmp_path, f"tiny_bank/t{n}.mrg", f"( {tree} )\n")
    monkeypatch.setitem(PARSING_CORPORA, "tiny_bank", TreebankCorpus(
        "tiny", "tiny treebank", Path("tiny_bank"), "t{}.mrg", {"train": (1, 1), "dev": (2, 2), "test": (3, 3)},
        "t1 / t2 / t3"))
    monkeypatch.setenv("STRUCTATTN_DATA", str(tmp_path))
    assert build_parser().parse_args(["train-parsing", "--corpus", "tiny_bank"]).corpus == "tiny_bank"
    data = TreebankFiles(corpus="tiny_bank")
    assert [t.leaves() for t in data.read("dev")] == [["d", "e"]]
    assert data.raw_files("test") == [tmp_path / "tiny_bank" / "t3.mrg"]
    assert data.describe() == {"treebank": "tiny_bank", "split": "t1 / t2 / t3"}
    with pytest.raises(UserError, match="exclude each other"):
        TreebankFiles(train="a", dev="b", corpus="tiny_bank")
