"""``structattn.io``'s reading side: the UTF-8 rules every command that reads user text shares (``parse``,
``translate``, ``score evalb -``): file or standard input, the BOM, line ends, and errors naming source and line."""
from __future__ import annotations

import json
import io
import re
import sys

import pytest

from structattn.errors import UserError
from structattn.io import STDIN, decode_lines, read_input_lines


def test_decode_lines_drops_the_bom_and_carriage_returns_only_where_they_belong():
    assert decode_lines(b"\xef\xbb\xbfThe cat\r\nsat\n", "f") == ["The cat", "sat"]
    assert decode_lines(b"a\n\xef\xbb\xbfb", "f") == ["a", "\ufeffb"]  # only a mark at the very start is dropped
    # split on \n only; no extra line at the end (a vertical tab is a control character: kept only on request)
    assert decode_lines(b"a\x0bb\n\n", "f", controls="keep") == ["a\x0bb", ""]
    assert decode_lines(b"", "f") == []


def test_decode_lines_names_line_and_byte():
    with pytest.raises(UserError, match=r"^in\.txt:3: not valid UTF-8 \(byte 0xe9 at byte 4 of the line\); .*"
                                        r"re-save the file as UTF-8$"):
        decode_lines(b"ok\nfine\ncaf\xe9\n", "in.txt")


def _stdin(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


@pytest.mark.parametrize("path", [None, "-"])
def test_standard_input_is_read_as_bytes(monkeypatch, path):
    _stdin(monkeypatch, b"\xef\xbb\xbfone\r\ntwo\n")
    assert read_input_lines(path) == (STDIN, ["one", "two"])
    _stdin(monkeypatch, b"one\n\xff two\n")  # a text read would raise UnicodeDecodeError or keep surrogates
    with pytest.raises(UserError, match=r"^<stdin>:2: not valid UTF-8 \(byte 0xff at byte 1 of the line\)"):
        read_input_lines(path)


def test_a_text_stream_as_stdin_still_works(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("\ufeffone\ntwo\n"))
    assert read_input_lines("-") == (STDIN, ["one", "two"])


def test_files_missing_folders_and_bad_bytes(tmp_path):
    good = tmp_path / "good.txt"
    good.write_bytes(b"\xef\xbb\xbfa b\nc\n")
    assert read_input_lines(str(good)) == (str(good), ["a b", "c"])
    with pytest.raises(UserError, match="missing.txt does not exist"):
        read_input_lines(str(tmp_path / "missing.txt"))
    with pytest.raises(UserError, match="is a folder, not a file"):
        read_input_lines(str(tmp_path))
    bad = tmp_path / "bad.txt"
    bad.write_bytes("a\nb\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(UserError, match=rf"^{re.escape(str(bad))}:3: not valid UTF-8"):
        read_input_lines(str(bad))


def test_upsert_jsonl_replaces_a_key_in_place_and_keeps_other_lines_byte_for_byte(tmp_path):
    import json

    from structattn.io import upsert_jsonl

    path = tmp_path / "runs.jsonl"
    upsert_jsonl(path, {"run": "a", "score": 1}, key="run")
    path.write_text(path.read_text() + '{"score": 2,  "run": "b"}\n{"run": "a", "score": 0}\n')
    upsert_jsonl(path, {"score": 3, "run": "a"}, key="run")  # first "a" replaced, its later duplicate dropped
    upsert_jsonl(path, {"run": "c", "score": 4}, key=lambda line: line["run"])
    assert path.read_text().splitlines() == ['{"run": "a", "score": 3}', '{"score": 2,  "run": "b"}',
                                             '{"run": "c", "score": 4}']
    assert [json.loads(x)["run"] for x in path.read_text().splitlines()] == ["a", "b", "c"]


def test_read_jsonl_skips_blank_lines_and_says_when_the_file_is_missing(tmp_path):
    from structattn.io import read_jsonl

    path = tmp_path / "runs.jsonl"
    path.write_text('{"run": "a"}\n\n  \n{"run": "b", "note": "caf\\u00e9"}\n', encoding="utf-8")
    assert read_jsonl(path) == [{"run": "a"}, {"run": "b", "note": "café"}]
    assert read_jsonl(tmp_path / "none.jsonl", missing_ok=True) == []
    with pytest.raises(FileNotFoundError):
        read_jsonl(tmp_path / "none.jsonl")


def test_leftovers_of_killed_atomic_writes_are_removed_and_nothing_else(tmp_path):
    from structattn.io import remove_write_leftovers

    for name in (".settings.json.ab12cd34.tmp", ".dev.trees.zz99yy88.tmp", "keep.tmp", ".hidden.tmp", "x.json"):
        (tmp_path / name).write_text("x")
    (tmp_path / ".best.tmp-123").mkdir()  # a folder: AtomicDir's, repaired elsewhere
    removed = remove_write_leftovers(tmp_path)
    assert sorted(p.name for p in removed) == [".dev.trees.zz99yy88.tmp", ".settings.json.ab12cd34.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".best.tmp-123", ".hidden.tmp", "keep.tmp", "x.json"]
