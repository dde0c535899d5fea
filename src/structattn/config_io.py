"""Typed dataclass configurations saved as JSON: the shared reading, checking and writing.

A configuration class is a ``@dataclass`` that also derives from `JsonConfig`. Reading a dict (a JSON
file or command-line flags) refuses unknown keys, listing the valid ones, and converts every value to its
field's type (``"true"`` -> True, ``"bimsa,nsa"`` -> ["bimsa", "nsa"], ``"3"`` -> 3), naming the key when a
value does not fit.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any, get_type_hints

from .errors import UserError


class JsonConfig:
    """Mixin for configuration dataclasses: ``to_json``, ``save``, ``from_dict`` and ``load``."""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    def save(self, path: str | Path) -> None:
        from .io import atomic_write_text
        atomic_write_text(Path(path), self.to_json() + "\n")

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config"):
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise UserError(f"{source}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(known))}")
        cfg = cls()
        hints = get_type_hints(cls)
        for key, value in data.items():
            setattr(cfg, key, coerce_field(key, value, hints[key], source))
        return cfg

    @classmethod
    def load(cls, path: str | Path):
        return cls.from_dict(read_config_file(path), source=str(path))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The JSON object of a configuration file, unchecked against any class; UserError if missing or not one."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file {path} does not exist")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"config file {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UserError(f"config file {path} must hold a JSON object")
    return data


def coerce_field(key: str, value: Any, hint: Any, source: str) -> Any:
    """Check/convert one value to its field type (bool, int, float, str, dict, list[str], or those | None);
    a [`UserError`][structattn.errors.UserError] naming the key otherwise."""
    text = str(hint)
    if value is None:
        if "None" in text:
            return None
        raise UserError(f"{source}: {key} may not be null")
    try:
        if hint is bool or text == "bool":
            if isinstance(value, str):
                if value.lower() in ("1", "true", "yes"):
                    return True
                if value.lower() in ("0", "false", "no"):
                    return False
                raise ValueError(value)
            return bool(value)
        if "list" in text:
            if isinstance(value, str):  # command line: "bimsa,nsa"
                value = [part.strip() for part in value.split(",") if part.strip()]
            if not isinstance(value, (list, tuple)):
                raise ValueError(value)
            return [str(v) for v in value]
        if "int" in text and "float" not in text:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(value)
            return int(value)
        if "float" in text:
            return float(value)
        if "dict" in text:
            if not isinstance(value, dict):
                raise ValueError(value)
            return value
        return str(value)
    except (TypeError, ValueError):
        raise UserError(f"{source}: {key}={value!r} is not a valid {text.replace('typing.', '')}") from None


def read_json(path: str | Path, what: str = "JSON file", missing: str = "") -> Any:
    """The value in a UTF-8 JSON file; [`UserError`][structattn.errors.UserError] naming the file (and line:column for
    bad JSON).

    ``what`` names the file in the not-found message, ``missing`` adds what to do about it."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{path}: is a folder, not a {what}; give the file")
    if not path.is_file():
        raise UserError(f"{path}: {what} not found" + (f" ({missing})" if missing else ""))
    return parse_json_text(path.read_bytes(), str(path))


def parse_json_text(data: bytes, where: str) -> Any:
    """The value of UTF-8 JSON bytes; [`UserError`][structattn.errors.UserError] naming ``where`` (and line:column) for
    bytes that are not UTF-8, text that is not JSON, or a control character (raw or escaped as ``\\u0000``-``\\u001f``,
    tab and line ends aside; `structattn.textcheck.check_json_text`)."""
    from .textcheck import check_json_text

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: not valid UTF-8 (JSON files are UTF-8)") from None
    check_json_text(text, where)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})") from None


# ---------------------------------------------------------------------------------------------- command line


#: The word that gives a field that may be null no value on the command line (``--m none``); a text field keeps
#: the word (``--sgnet none``).
NONE_WORD = "none"


def field_descriptions(cls) -> dict[str, str]:
    """What each field of the dataclass ``cls`` means: the comment on its line in the source of the class (or
    base) that declares it, or the comment lines just above it (none where the source is not available)."""
    import inspect

    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(base):
            continue
        try:
            source = inspect.getsource(base)
        except (OSError, TypeError):
            continue
        out.update(_source_comments(source, names))
    return out


def _source_comments(source: str, names: set[str]) -> dict[str, str]:
    """Field name -> the comment on its declaration line (or the comment lines above it) in a class's source."""
    import re

    out: dict[str, str] = {}
    above: list[str] = []
    for line in source.splitlines():
        comment = re.match(r"\s+#\s*(.*)$", line)
        if comment:
            above.append(comment.group(1))
            continue
        declared = re.match(r"\s+(\w+)\s*:[^#]*?(?:#\s*(.*))?$", line)
        if declared and declared.group(1) in names:
            text = declared.group(2) or " ".join(above)
            if text:
                out[declared.group(1)] = text
        above = []
    return out


class _StoreWithChoicesInHelp(argparse.Action):
    """A plain store action whose help ends with the names a field accepts, looked up only when the help is shown
    (``names`` may be a function: the registries that hold them can be slow to import)."""

    def __init__(self, option_strings, dest, names=(), **kwargs):
        self._names = names
        super().__init__(option_strings, dest, **kwargs)

    @property
    def help(self):
        names = self._names() if callable(self._names) else self._names
        listed = f"; one of: {', '.join(map(str, names))}"
        # the command line rewrites every help once (cli: plain text), names included
        return self._help if self._help.endswith(listed) else self._help + listed

    @help.setter
    def help(self, text):
        self._help = text

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


def _default_of(f: dataclasses.Field, preset: dict[str, Any]) -> Any:
    if f.name in preset:
        return preset[f.name]
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def add_dataclass_arguments(parser: argparse.ArgumentParser, cls, presets: dict[str, dict] | None = None, *,
                            flag_names: dict[str, str] | None = None, descriptions: dict[str, str] | None = None,
                            choices: dict[str, Any] | None = None, default_notes: dict[str, str] | None = None,
                            skip: tuple[str, ...] = ()) -> None:
    """``--config FILE`` plus one ``--<field>`` flag per field of the `JsonConfig` dataclass ``cls``
    (all default to None = not given; values are converted by `JsonConfig.from_dict`).

    ``presets`` (name -> field values; the first name is the command line's default) adds ``--preset NAME``: a
    named set of values applied over the dataclass's defaults, under ``--config`` and the flags. Each flag's help
    says what the field means (``descriptions``, else the comment beside the field in the source), its type, the
    default preset's value (with ``default_notes[field]`` after it) and its ``choices`` (field -> names, or a
    function giving them, called only when the help is shown).
    ``flag_names`` (field -> flag) spells a field's flag as the rest of the command line does (``encoder`` ->
    ``--model``); the field's own spelling is no flag (`structattn.cli_grammar.RETIRED`).
    Fields in ``skip`` get no flag (``--config`` still sets them)."""
    if presets:
        names = list(presets)
        defaults = dataclasses.asdict(cls())
        keys = list(dict.fromkeys(k for values in presets.values() for k in values))  # what any preset sets
        described = "; ".join(f"{name}: " + ", ".join(f"{k}={values.get(k, defaults[k])!r}" for k in keys)
                              for name, values in presets.items())
        parser.add_argument("--preset", choices=names, default=names[0],
                            help=f"named settings under --config and the flags (default {names[0]}): {described}")
    parser.add_argument("--config", help="JSON file with the configuration's keys (the field names, e.g. "
                                         f"{dataclasses.fields(cls)[0].name}); the flags given override it")
    hints = get_type_hints(cls)
    preset = next(iter(presets.values())) if presets else {}
    texts = field_descriptions(cls) | (descriptions or {})
    flag_names, choices, default_notes = flag_names or {}, choices or {}, default_notes or {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + flag_names.get(f.name, f.name).replace("_", "-")
        hint = hints[f.name]
        kind = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")  # int, list[str] | None
        kind += ", comma-separated" if "list" in kind else ""
        kind += ", true or false" if kind == "bool" else ""
        kind += f", {NONE_WORD} = null" if "None" in kind else ""
        help_text = (f"{texts.get(f.name, f.name.replace('_', ' '))}: {kind} (default "
                     f"{_default_of(f, preset)!r}{default_notes.get(f.name, '')})")
        extra = {"action": _StoreWithChoicesInHelp, "names": choices[f.name]} if f.name in choices else {}
        parser.add_argument(flag, dest=f.name, default=None, metavar=flag[2:].replace("-", "_").upper(), help=help_text,
                            **extra)


def given_dataclass_flags(args: argparse.Namespace, cls) -> dict[str, Any]:
    """The fields of ``cls`` given as flags, uncoerced. `NONE_WORD` means null for the fields that may be
    null."""
    hints = get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        value = getattr(args, f.name, None)
        if value is None:
            continue
        if "None" in str(hints[f.name]) and isinstance(value, str) and value.lower() == NONE_WORD:
            value = None
        out[f.name] = value
    return out


def dataclass_from_args(args: argparse.Namespace, cls, presets: dict[str, dict] | None = None,
                        later_defaults=None):
    """A ``cls`` from the defaults, then ``--preset``'s values (when ``presets`` is given), then ``--config``'s
    keys (if given), then every flag that was given. ``later_defaults(config, given) -> {field: value}`` (e.g. the
    defaults of the task family a config names; ``given``: the fields ``--config`` or a flag set) then sets the
    fields that neither ``--config`` nor a flag gave."""
    data = dataclasses.asdict(cls())
    if presets:
        data |= dataclasses.asdict(cls.from_dict(presets[getattr(args, "preset", None) or next(iter(presets))],
                                                 source="preset"))
    explicit: set[str] = set()
    if getattr(args, "config", None):
        given = read_config_file(args.config)
        checked = cls.from_dict(given, source=str(args.config))  # the file's keys and types
        data |= {k: getattr(checked, k) for k in given}
        explicit |= set(given)
    flags = given_dataclass_flags(args, cls)
    data |= flags
    explicit |= set(flags)
    config = cls.from_dict(data, source="command line")
    if later_defaults is not None:
        extra = {k: v for k, v in later_defaults(config, frozenset(explicit)).items() if k not in explicit}
        if extra:
            config = cls.from_dict(data | extra, source="command line")
    return config
