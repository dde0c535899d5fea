import json
import re

import pytest

from structattn.cli import main

CONLLU = """# sent_id = s1
# text = the cat sat
1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_

# sent_id = s2
1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_

"""


@pytest.fixture
def conllu(tmp_path):
    path = tmp_path / "tiny.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    return path


def test_json_output_is_word_level_in_file_order(conllu, capsys):
    assert main(["masks", "--conllu", str(conllu), "--relation", "sdoi", "--json"]) == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [l["sent_id"] for l in lines] == ["s1", "s2"]
    assert lines[0]["words"] == ["the", "cat", "sat"]
    # sdoi: the -> cat -> sat
    assert lines[0]["mask"] == [[1, 1, 1], [0, 1, 1], [0, 0, 1]]
    assert lines[1]["words"] == ["do", "n't", "go"]  # the multiword token line is not a word


@pytest.mark.parametrize("relation,opt,expected", [
    ("window", ["--k", "1"], [[1, 1, 0], [1, 1, 1], [0, 1, 1]]),
    ("forward", [], [[1, 1, 1], [0, 1, 1], [0, 0, 1]]),
    ("backward", [], [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
    ("sla", ["--m", "0"], [[1, 1, 0], [1, 1, 1], [0, 1, 1]]),
])
def test_relations_from_cli(conllu, capsys, relation, opt, expected):
    main(["masks", "--conllu", str(conllu), "--relation", relation, "--json", "--limit", "1"] + opt)
    assert json.loads(capsys.readouterr().out)["mask"] == expected


def test_grid_and_png(conllu, tmp_path, capsys):
    png = tmp_path / "m.png"
    main(["masks", "--conllu", str(conllu), "--relation", "sla", "--m", "1", "--png", str(png), "--limit", "1"])
    out = capsys.readouterr().out
    assert "1 the" in out and "■" in out and "nsubj" in out
    assert png.stat().st_size > 1000


def test_negative_threshold_is_a_clear_error(conllu, capsys):
    assert main(["masks", "--conllu", str(conllu), "--m", "-1"]) == 2
    assert "--m must be >= 0" in capsys.readouterr().err


def test_empty_text_is_a_clear_error(capsys):
    assert main(["masks", "--text", "   "]) == 2
    assert "--text is empty" in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    (b"# sent_id = s1\n1\tcaf\xe9\t_\tX\t_\t_\t0\troot\t_\t_\n\n", r"bad\.conllu: line 2: not UTF-8"),
    (b"1\tThe\tthe\tDET\n\n", r"bad\.conllu: line 1: 4 columns"),
    (CONLLU.replace("\t_\t_\n\n# sent_id = s2", "\t_\n\n# sent_id = s2").encode(), r"bad\.conllu: line 5: 9 columns"),
    (b"", r"bad\.conllu: no sentences"),
])
def test_malformed_conllu_is_one_line_and_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.conllu"
    path.write_bytes(content)
    assert main(["masks", "--conllu", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("structattn masks: error: ")
    assert re.search(message, err), err


def test_missing_conllu_file_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["masks", "--conllu", str(tmp_path / "none.conllu")]) == 2
    assert "none.conllu: no such file" in capsys.readouterr().err
