"""Control characters (NUL and the other C0 controls but tab) are refused by every reader with ``FILE:LINE``;
the GLUE files published with a few keep them and count them; tree errors name file and line."""
from __future__ import annotations

import json

import pytest

from structattn.errors import UserError
from structattn.tasks import get_task
from tasks_testutil import needs, write

NUL = r"control character U\+0000 \(NUL\)"


@pytest.mark.parametrize("task, split, relative, content, line", [
    ("conll2003", "train", "conll2003/train.txt", "EU NNP B-NP B-ORG\n\nre\x00jects VBZ O O\n", 3),
    ("fce", "dev", "fce/multiged2023_bea_split/en_fce_dev.tsv", "I\tc\nam\x07\tc\n", 2),
    ("ud_pos", "test", "ud_english_ewt/en_ewt-ud-test.conllu",
     "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n1\tH\x00i\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n", 3),
])
def test_task_readers_refuse_control_characters(tmp_path, task, split, relative, content, line):
    path = write(tmp_path, relative, content)
    with pytest.raises(UserError, match=rf"^{path}:{line}: control character"):
        get_task(task).read(split, data_dir=tmp_path)


def test_glue_files_keep_and_count_them(tmp_path, capsys):
    path = write(tmp_path, "sst2/train.tsv", "sentence\tlabel\ngood\x08 film\t1\nbad\t0\n")
    examples = get_task("sst2").read("train", data_dir=tmp_path)
    assert examples[0].words_a == ["good\x08", "film"]  # as published: recorded results stay what they were
    assert f"note: {path}: 1 line(s) hold control characters, kept as in the published file (lines 2)" \
        in capsys.readouterr().err


@needs("cola/train.tsv")
def test_the_published_cola_training_set_reads_with_its_three_backspaces(capsys):
    assert len(get_task("cola").read("train")) == 8551
    assert "3 line(s) hold control characters" in capsys.readouterr().err


def test_treebank_and_parallel_text_refuse_them(tmp_path):
    from structattn.tasks.multi30k import read_parallel
    from structattn.tasks.ptb import read_treebank

    trees = write(tmp_path, "t.mrg", "(S (NN a))\n(S (NN b\x00c))\n")
    with pytest.raises(UserError, match=rf"^{trees}:2: {NUL} at column 9"):
        read_treebank(trees)
    src = write(tmp_path, "a.en", "A dog.\n\x00\x00\x00\n")
    tgt = write(tmp_path, "a.de", "Ein Hund.\nX.\n")
    with pytest.raises(UserError, match=rf"^{src}:2: {NUL}"):
        read_parallel(src, tgt)


def test_dependency_readers_refuse_them(tmp_path):
    from structattn.dependency.conllu_backend import read_conllu
    from structattn.dependency.ptb_dependency import read_ptb_dependency

    conllu = write(tmp_path, "x.conllu",
                   "# text\n1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n2\t\x1b\t_\tX\tX\t_\t1\tdep\t_\t_\n")
    with pytest.raises(UserError, match=rf"^{conllu}:3: control character U\+001B \(ESC\)"):
        read_conllu(conllu)
    dep = write(tmp_path, "x.dp", "Hi\tUH\t0\nthe\x00re\tRB\t1\n")
    with pytest.raises(UserError, match=rf"^{dep}:2: {NUL}"):
        read_ptb_dependency(dep)


def test_json_readers_refuse_them_raw_or_escaped(tmp_path):
    from structattn.tasks.race import read_race_file
    from structattn.tasks.squad import load_squad

    squad = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": "Paris.", "qas": [
        {"id": "q1", "question": "Where\u0000?", "answers": [], "is_impossible": True}]}]}]}
    path = write(tmp_path, "squad.json", json.dumps(squad, indent=1))
    with pytest.raises(UserError, match=rf"^{path}:\d+: {NUL} \(written \\u0000\)"):
        load_squad(path)
    race = write(tmp_path, "1.txt", json.dumps({"article": "A\u0001b.", "questions": ["Q?"],
                                                "options": [["a", "b", "c", "d"]], "answers": ["A"], "id": "1.txt"}))
    with pytest.raises(UserError, match=rf"^{race}:1: control character U\+0001"):
        read_race_file(race, "middle")
