"""Config dataclasses: declared once, read back strictly, turned into command-line flags.

An unknown key in a stored config is an error, never ignored (a typo in a stored config.json must not
silently fall back to a default); each option field carries its help, so the CLI is generated from it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any


def reject_unknown_keys(cls: type, d: dict) -> None:
    """ValueError naming the unknown keys of `d` for dataclass `cls` and listing the known ones."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}.from_dict: unknown keys {unknown}; known keys are {sorted(known)}")


# ---------------------------------------------------------------------------------------------------------
# One declaration per option: dataclass fields -> command-line flags (SAELens / simple_parsing style)
# ---------------------------------------------------------------------------------------------------------
# A config dataclass declares each option once, with its help in the field's metadata:
#     tokens: int = option(16384, "model positions to run, rounded down to a multiple of --seq-len")
# and every command that embeds the config gets the flag from add_arguments(parser, Config); a new field
# appears on every such command at once. The config module must stay torch-free (`interp --help` is fast).



def option(default: Any = dataclasses.MISSING, help: str = "", *, choices: Iterable[Any] | None = None,
           parse: Callable[[str], Any] | None = None, metavar: str | None = None, flag: str | None = None,
           aliases: Iterable[str] = (), section: str | None = None,
           cli: bool = True, default_factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field carrying its command-line description.

    choices: allowed values (shown in --help and enforced by argparse); parse: str -> value for types
    argparse cannot build (e.g. "3" | "17,247"); flag: the flag name when it is not --field-name;
    aliases: older flag names that still work (permanent; --help names them); section: the --help section
    the flag is listed under (add_arguments groups a config's flags by it); cli=False: a field that is never a
    flag (set from Python or derived)."""
    metadata = {"help": help, "choices": tuple(choices) if choices is not None else None, "parse": parse,
                "metavar": metavar, "flag": flag, "aliases": tuple(aliases), "section": section, "cli": cli}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def flag_name(field: dataclasses.Field) -> str:
    return field.metadata.get("flag") or "--" + field.name.replace("_", "-")


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def _split_list(item_type: type) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        return tuple(item_type(p.strip()) for p in text.split(",") if p.strip())
    return parse


def cli_fields(cls: type, exclude: Iterable[str] = ()) -> list[dataclasses.Field]:
    """The fields of `cls` that are command-line options, in declaration order."""
    skip = set(exclude)
    return [f for f in dataclasses.fields(cls) if f.name not in skip and f.metadata.get("cli", True)]


def add_sections(parser: argparse.ArgumentParser, sections: Mapping[str, str | None] | Sequence[str]
                 ) -> dict[str, Any]:
    """{section: argument group} for `sections` (a mapping gives each its description), created in that order so
    --help lists them so whatever the fields' order; argparse hides a section left empty. Pass the result to
    add_arguments(groups=...), after adding a command's own flags that should come first in a section."""
    described = sections if isinstance(sections, Mapping) else dict.fromkeys(sections)
    return {title: parser.add_argument_group(title, description) for title, description in described.items()}


def add_arguments(parser: argparse.ArgumentParser | Any, cls: type, exclude: Iterable[str] = (),
                  defaults: dict[str, Any] | None = None, groups: dict[str, Any] | None = None) -> dict[str, Any]:
    """Add one flag per option field of dataclass `cls` to `parser` (or an argument group).

    Every flag defaults to None ("not given"), so dataclass_from_args can tell an explicit value from the
    config's default; --help shows the config's default. bool fields become --x / --no-x. Fields with a
    `section` are listed under that heading: its group in `groups` (add_sections), else a new group, in first-use
    order. Returns the groups, those created here added, so a command can add its own flags to a section."""
    hints = typing.get_type_hints(cls)
    groups = {} if groups is None else groups
    shown = {f.name: (f.default if f.default is not dataclasses.MISSING else
                      f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
             for f in dataclasses.fields(cls)}
    shown.update(defaults or {})
    for field in cli_fields(cls, exclude):
        meta = field.metadata
        tp, _optional = _unwrap_optional(hints[field.name])
        kwargs: dict[str, Any] = {"dest": field.name, "default": None}
        default_note = f" (default: {shown[field.name]!r})" if shown[field.name] not in (None, "", ()) else ""
        aliases = tuple(meta.get("aliases") or ())
        alias_note = f" (also: {', '.join(aliases)}, the older name)" if aliases else ""
        kwargs["help"] = (meta.get("help") or "") + default_note + alias_note
        if meta.get("metavar"):
            kwargs["metavar"] = meta["metavar"]
        if tp is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            if meta.get("parse") is not None:
                kwargs["type"] = meta["parse"]
            elif typing.get_origin(tp) in (tuple, list) or tp in (tuple, list):
                item = (typing.get_args(tp) or (str,))[0]
                kwargs["type"] = _split_list(item if isinstance(item, type) else str)
                kwargs.setdefault("metavar", "A[,B]")
            elif tp in (int, float, str):
                kwargs["type"] = tp
            if meta.get("choices"):
                kwargs["choices"] = meta["choices"]
        target = parser
        if meta.get("section") and hasattr(parser, "add_argument_group"):
            if meta["section"] not in groups:
                groups[meta["section"]] = parser.add_argument_group(meta["section"])
            target = groups[meta["section"]]
        target.add_argument(flag_name(field), *aliases, **kwargs)
    return groups


def given_options(cls: type, args: argparse.Namespace, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """{field: value} of the option flags of `cls` that were given on the command line."""
    return {f.name: getattr(args, f.name) for f in cli_fields(cls, exclude)
            if getattr(args, f.name, None) is not None}


def dataclass_from_args(cls: type, args: argparse.Namespace, exclude: Iterable[str] = (), **extra: Any) -> Any:
    """cls(**given flags, **extra): the config's own defaults for every flag not given."""
    return cls(**{**given_options(cls, args, exclude), **extra})


def parse_set_overrides(items: Iterable[str], where: str, cls: type | None = None,
                        extra_fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """--set FIELD=JSON items -> {field: value}.

    With `cls` (a config dataclass), each FIELD must be one of its fields (or of `extra_fields`: name -> type,
    e.g. the WidthSpec fields a TrainConfig accepts), VALUE is parsed as JSON and checked against the field's
    type (coerce_to_type), and anything else is a ValueError naming the field and the expected type. A value
    that is not JSON is kept as a bare string only where the field takes a string. Without `cls`: JSON, else
    the bare string (for callers that validate later)."""
    types_by_field = dict(typing.get_type_hints(cls)) if cls is not None else {}
    types_by_field.update(extra_fields or {})
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{where}: --set {item!r} must look like FIELD=VALUE (VALUE as JSON)")
        if cls is not None and key not in types_by_field:
            raise ValueError(f"{where}: --set {key}: no such field; known fields: {', '.join(sorted(types_by_field))}")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as err:
            if cls is not None and not _accepts_str(types_by_field[key]):
                raise ValueError(f"{where}: --set {key}={value!r} is not valid JSON ({err.msg}); {key} expects "
                                 f"{type_label(types_by_field[key])}") from err
            parsed = value
        if cls is not None:
            parsed = coerce_to_type(parsed, types_by_field[key], f"{where}: --set {key}")
        overrides[key] = parsed
    return overrides


def type_label(tp: Any) -> str:
    """'int', 'float', 'str | None', 'tuple[float, ...]': how a field's type reads in an error message."""
    if isinstance(tp, type) and typing.get_origin(tp) is None:
        return tp.__name__
    return str(tp).replace("typing.", "")


def _accepts_str(tp: Any) -> bool:
    base, _ = _unwrap_optional(tp)
    return base is str or base is Any or (typing.get_origin(base) in (typing.Union, types.UnionType)
                                          and str in typing.get_args(base))


def coerce_to_type(value: Any, tp: Any, where: str) -> Any:
    """`value` (parsed JSON) as the field type `tp`, or a ValueError naming `where` and the expected type:
    int (not bool), float (an int is accepted), str, bool, None for optional fields, tuple/list (from a JSON
    list, items checked), dict, and dataclasses with from_dict (from a JSON object)."""
    base, optional = _unwrap_optional(tp)
    if value is None:
        if optional or base is Any:
            return None
        raise ValueError(f"{where}: null is not allowed; expects {type_label(tp)}")
    fail = ValueError(f"{where}={json.dumps(value)}: expects {type_label(tp)}, got {type(value).__name__}")
    origin = typing.get_origin(base)
    if base is Any:
        return value
    if base is bool:
        if not isinstance(value, bool):
            raise fail
        return value
    if base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail
        return value
    if base is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail
        return float(value)
    if base is str:
        if not isinstance(value, str):
            raise fail
        return value
    if origin in (tuple, list) or base in (tuple, list):
        if not isinstance(value, list | tuple):  # a JSON list, or a tuple from Python
            raise fail
        args = [a for a in typing.get_args(base) if a is not Ellipsis]
        if args and (len(args) == 1 or Ellipsis in typing.get_args(base)):  # tuple[X, ...] / list[X]
            value = [coerce_to_type(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
        elif args:  # a fixed-length tuple[X, Y]
            if len(value) != len(args):
                raise ValueError(f"{where}={json.dumps(value)}: expects {type_label(tp)} ({len(args)} items)")
            value = [coerce_to_type(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args))]
        return tuple(value) if (origin or base) is tuple else list(value)
    if origin is dict or base is dict:
        if not isinstance(value, dict):
            raise fail
        return value
    if dataclasses.is_dataclass(base) and hasattr(base, "from_dict"):
        if not isinstance(value, dict):
            raise fail
        try:
            return base.from_dict(value)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from err
    return value  # a type this checker does not know: the config's own validate() decides


def comma_list(item_type: Callable[[str], Any] = str, choices: Iterable[Any] | None = None
               ) -> Callable[[str], tuple]:
    """`parse=` for a comma-separated list option: "a,b" -> ("a", "b"), each item converted by `item_type`
    and, with `choices`, checked against them (argparse reports the bad items)."""
    allowed = tuple(choices) if choices is not None else None

    def parse(text: str) -> tuple:
        items = tuple(item_type(p.strip()) for p in text.split(",") if p.strip())
        bad = [i for i in items if allowed is not None and i not in allowed]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad} not in {allowed}")
        return items
    return parse


# One directory name: what a user-given name may be where it becomes a path component (an experiment under
# its root, a variant under its experiment), so a name can never leave the root ("..", "/", absolute paths).
PATH_COMPONENT = re.compile(r"[\w.-]+")


def check_path_component(name: Any, what: str) -> str:
    """`name` if it is one safe directory name (letters, digits, '.', '_', '-'; not '.' or '..'), else a
    ValueError naming `what` (the flag or field), so an output never lands outside the root it was given."""
    if not isinstance(name, str) or not PATH_COMPONENT.fullmatch(name) or name in (".", ".."):
        raise ValueError(f"{what}={name!r} must be a single directory name (letters, digits, '.', '_', '-'; "
                         "not '.' or '..', no '/'): it becomes a folder under the run root")
    return name


def path_component(text: str) -> str:
    """`parse=` for an option whose value becomes one directory name (check_path_component)."""
    try:
        return check_path_component(text, "value")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def json_object(text: str) -> dict:
    """`parse=` for an option given as a JSON object, e.g. '{"titans": {"chunk_size": 64}}'."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid JSON ({err.msg})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r}: expects a JSON object {{...}}, got {type(value).__name__}")
    return value
