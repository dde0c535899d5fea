"""No pickle in the package: a checkpoint or cache someone else wrote must not be able to run code when read.

Every module of ``src/structattn`` is read as Python tokens and syntax (comments and strings are prose, not code):
no name that mentions pickle or dill (``allow_pickle=False``, NumPy's refusal, is the one exception), no
``weights_only=False``, every ``torch.load`` call passes ``weights_only=True``, and no call of Accelerate's
``save_state`` / ``load_state`` (they write and read the RNG states as ``random_states_<i>.pkl`` pickles). A failure
names file:line.
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "structattn"
FORBIDDEN_NAME = re.compile(r"pickle|(?:^|_)dill(?:_|$)", re.IGNORECASE)


def pickle_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) for each use of pickle, dill, ``weights_only=False`` or a ``torch.load`` without
    ``weights_only=True`` in the Python ``source``."""
    found = []
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
              if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    for k, tok in enumerate(tokens):
        after = [t.string for t in tokens[k + 1:k + 3]]
        if tok.type == tokenize.NAME and FORBIDDEN_NAME.search(tok.string):
            if not (tok.string == "allow_pickle" and after == ["=", "False"]):
                keyword = "".join(after) if after[:1] == ["="] else ""
                found.append((tok.start[0], tok.string + keyword))
        elif tok.string == "weights_only" and after == ["=", "False"]:
            found.append((tok.start[0], "weights_only=False"))
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"):
            safe = any(kw.arg == "weights_only" and isinstance(kw.value, ast.Constant) and kw.value.value is True
                       for kw in node.keywords)
            if not safe:
                found.append((node.lineno, "torch.load without weights_only=True"))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("save_state", "load_state")):
            found.append((node.lineno, f"{node.func.attr}() (Accelerate's pickled RNG states)"))
    return sorted(set(found))


def test_the_package_uses_no_pickle():
    problems = [f"{path.relative_to(PACKAGE.parents[1])}:{line}: {what}"
                for path in sorted(PACKAGE.rglob("*.py"))
                for line, what in pickle_uses(path.read_text(encoding="utf-8"))]
    assert not problems, "pickle in the package (a file read this way can run code):\n" + "\n".join(problems)


def test_the_check_finds_each_kind_of_use():
    source = '''"""Docstrings and comments may say pickle and dill."""
import pickle  # line 2
import dill
import numpy as np
import torch
a = torch.load(path, weights_only=False)  # line 6: flagged twice (the flag, and the load is not safe)
b = torch.load(path)
c = torch.load(path, weights_only=True)
d = np.load(path, allow_pickle=True)
e = np.load(path, allow_pickle=False)
f = "pickle"
g = dill_loads(x)
accelerator.save_state(folder)
accelerator.load_state(folder)
'''
    assert pickle_uses(source) == [
        (2, "pickle"), (3, "dill"), (6, "torch.load without weights_only=True"), (6, "weights_only=False"),
        (7, "torch.load without weights_only=True"), (9, "allow_pickle=True"), (12, "dill_loads"),
        (13, "save_state() (Accelerate's pickled RNG states)"), (14, "load_state() (Accelerate's pickled RNG states)")]
