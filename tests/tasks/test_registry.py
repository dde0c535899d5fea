"""The one task registry: every task once, with its family; the trainers, loaders and predictors are looked up by
family, and each family has one."""
import pytest

from structattn.errors import UserError
from structattn.tasks import TASKS
from structattn.tasks.multiple_choice import MC_TASKS
from structattn.tasks.registry import FAMILIES, registry, task_entry
from structattn.tasks.squad import QA_TASKS


def test_every_table_is_in_the_registry_once_with_its_family():
    entries = registry()
    assert len(entries) == len(TASKS) + len(QA_TASKS) + len(MC_TASKS)
    for table, family in ((TASKS, "sentence"), (QA_TASKS, "span_qa"), (MC_TASKS, "multiple_choice")):
        for name, spec in table.items():
            assert entries[name].family == family and entries[name].spec is spec
    assert {e.family for e in entries.values()} == set(FAMILIES)


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
