"""Control characters: one check, the same message (``FILE:LINE``) from every reader."""
from __future__ import annotations

import json

import pytest

from structattn.errors import UserError
from structattn.io import decode_lines
from structattn.textcheck import check_json_text, check_lines, check_text, control_lines, describe


def test_tab_and_line_ends_pass_every_other_c0_control_is_refused():
    check_lines(["a\tb", "c\r"], "f")
    for code in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)]:
        with pytest.raises(UserError, match=rf"^f:2: control character U\+{code:04X}"):
            check_lines(["ok", f"a{chr(code)}b"], "f")


def test_the_message_names_line_column_and_character():
    with pytest.raises(UserError, match=r"^in.txt:3: control character U\+0000 \(NUL\) at column 4; text may hold "
                                        r"tab and line ends but no other control characters: remove it$"):
        check_text("one\ntwo\nthr\x00ee\n", "in.txt")
    assert describe("\x1b") == "U+001B (ESC)" and control_lines(["a", "b\x08", "c\x00"]) == [2, 3]


def test_json_raw_and_escaped_controls_are_refused_an_escaped_backslash_is_not():
    with pytest.raises(UserError, match=r"^d.json:2: control character U\+0000 \(NUL\) \(written \\u0000\)"):
        check_json_text('{"a":\n "x\\u0000"}', "d.json")
    with pytest.raises(UserError, match=r"^d.json:1: control character U\+0001"):
        check_json_text('{"a": "x\x01"}', "d.json")
    check_json_text(json.dumps({"a": "tab\tnew\nline", "b": "\\u0000 as text"}), "d.json")  # \\u0000: a backslash


def test_decode_lines_refuses_by_default():
    with pytest.raises(UserError, match=r"^<stdin>:2: control character U\+0000"):
        decode_lines(b"ok\n\x00\x00\x00\n", "<stdin>")
