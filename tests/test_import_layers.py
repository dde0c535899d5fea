"""The package's architecture as a test: every module's structattn imports (module level and inside functions,
read with ``ast``) go to its own layer or a lower one, and no import cycle exists. Layers are those of the
package docstring (``structattn/__init__.py``); a failure names the two modules."""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "structattn"

# bottom to top; a module's layer is that of the longest prefix of its dotted path listed here
LAYERS: list[tuple[str, ...]] = [
    ("structattn.errors", "structattn.settings", "structattn.io", "structattn.config_io",
     "structattn.textcheck", "structattn.paths", "structattn.cli_grammar", "structattn.verbosity",
     "structattn.stopping", "structattn.integrity"),
    ("structattn.structure",),
    ("structattn.tasks",),
    ("structattn.dependency",),
    ("structattn.attention",),
    ("structattn.models",),
    ("structattn.train",),
    ("structattn.finetuning", "structattn.translation", "structattn.bna", "structattn.sgnet"),
    ("structattn.run_config", "structattn.trainers", "structattn.sweep"),
    ("structattn.analysis",),
    ("structattn.commands", "structattn.cli"),
]

# the systems (one folder each) and the other systems each may build on; any other import between two is sideways
SYSTEMS: dict[str, tuple[str, ...]] = {
    "structattn.finetuning": (),
    "structattn.translation": (),
    "structattn.bna": (),
    "structattn.sgnet": (),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The structattn modules ``name`` imports anywhere in its file (``from pkg import module`` counts as the
    module when it is one, else as the package)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {m for m in found if m in known and m != name}


def layer_of(name: str) -> int:
    best, level = -1, None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), i
    if level is None:
        raise AssertionError(f"{name} belongs to no layer; add it to LAYERS and the package docstring")
    return level


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    known = set(modules)
    return {name: imported_modules(name, path, known) for name, path in modules.items() if name != "structattn"}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None. Iterative DFS with colours."""
    colour = {n: 0 for n in graph}  # 0 unseen, 1 on the stack, 2 done
    for root in sorted(graph):
        if colour[root]:
            continue
        stack = [(root, iter(sorted(graph[root])))]
        path = [root]
        colour[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = 2
                stack.pop()
                path.pop()
            elif colour.get(child, 2) == 1:
                return path[path.index(child):] + [child]
            elif colour.get(child) == 0:
                colour[child] = 1
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
    return None


def test_every_module_has_a_layer():
    for name in import_graph():
        layer_of(name)


def test_no_upward_imports():
    upward = [f"{name} (layer {layer_of(name) + 1}) imports {dep} (layer {layer_of(dep) + 1})"
              for name, deps in sorted(import_graph().items()) for dep in sorted(deps) if layer_of(dep) > layer_of(name)]
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def system_of(name: str) -> str | None:
    return next((s for s in SYSTEMS if name == s or name.startswith(s + ".")), None)


def test_systems_import_only_the_core_and_their_bases():
    sideways = [f"{name} imports {dep}" for name, deps in sorted(import_graph().items()) for dep in sorted(deps)
                if system_of(name) and system_of(dep) not in (None, system_of(name), *SYSTEMS[system_of(name)])]
    assert not sideways, "a system imports another it does not build on:\n" + "\n".join(sideways)


def test_no_import_cycles():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


# the checker itself, on hand-made graphs
def test_find_cycle_finds_a_two_module_loop_and_a_long_one():
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_relative_and_lazy_imports_resolve_to_modules(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from ..io import atomic_write_text\nfrom . import engine\nimport structattn.tasks.squad\n\n"
                 "def g():\n    from ..models.encoder import apply_mechanism\n")
    known = {"structattn.io", "structattn.train.engine", "structattn.models.encoder", "structattn.train",
             "structattn.tasks.squad"}
    assert imported_modules("structattn.train.x", f, known) == {
        "structattn.io", "structattn.train.engine", "structattn.models.encoder", "structattn.tasks.squad"}


def test_layer_of_takes_the_longest_prefix():
    assert layer_of("structattn.io") == 0
    assert layer_of("structattn.bna.model") == 7
    assert layer_of("structattn.cli") == layer_of("structattn.commands.parse") == len(LAYERS) - 1
