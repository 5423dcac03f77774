"""Command-line flags generated from settings dataclasses, so that each setting is declared once.

A field made by `setting(...)` (labeler/labeling/config.py) carries its help, choices and flag
spelling in its metadata. `add_flags` turns the fields of a dataclass into flags and
`flag_values` reads them back from the parsed arguments as constructor keywords:

- the flag is `--name-with-dashes`, or the metadata's `flag` (`--split` for split_rule);
- a bool is a switch: `--name` storing True, or `--no-name` storing False when it defaults to True;
- a tuple is a repeatable flag (required when the field has no default); a dict gets one flag per
  key of the metadata's `keys`;
- int, float and str (or `X | None`) take a value of that type; a field without a default (and no
  `cli_default`) is a required flag; every other flag's help ends with "(default: ...)", which
  reads the metadata's `default_text` where the default alone would say nothing (None, empty);
- a number's declared range shows in its help ("must be in (0, 1]"); the config checks it, and that
  the value is finite (argparse's float() takes "nan"), when it is built from the flags.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from dataclasses import MISSING


def cli_fields(cls, only: tuple[str, ...] | None = None, exclude: tuple[str, ...] = ()) -> list[dataclasses.Field]:
    """The fields of `cls` that have a flag, in declaration order (or in the order of `only`)."""
    by_name = {f.name: f for f in dataclasses.fields(cls) if f.metadata.get("cli", False)}
    names = only if only is not None else tuple(by_name)
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ValueError(f"{cls.__name__} has no flag for {', '.join(unknown)}")
    return [by_name[name] for name in names if name not in exclude]


def add_flags(parser: argparse.ArgumentParser, cls, only=None, exclude=(), into=None) -> None:
    """Add the flags of `cls`'s fields to `parser`, each in the --help section its metadata names
    (created on first use), or all `into` one given argument group."""
    hints = typing.get_type_hints(cls)
    for f in cli_fields(cls, only, exclude):
        target = into if into is not None else _group(parser, f.metadata.get("group"))
        kind = _base_type(hints[f.name])
        meta = f.metadata
        default = _cli_default(f)
        if kind is dict:
            for key in meta["keys"]:
                target.add_argument(
                    meta["flag"].format(key=key),
                    dest=_key_dest(f, key),
                    default=None,
                    metavar=meta.get("metavar"),
                    help=_help(meta["help"].format(key=key), default, meta),
                )
        elif kind is bool:
            target.add_argument(
                flag_name(f),
                dest=f.name,
                action="store_false" if default else "store_true",
                help=_help(meta["help"], MISSING, meta),
            )
        elif kind is tuple:
            target.add_argument(
                flag_name(f),
                dest=f.name,
                action="append",
                default=None,
                required=default is MISSING,
                metavar=meta.get("metavar"),
                help=_help(meta["help"], default, meta),
            )
        else:
            target.add_argument(
                flag_name(f),
                dest=f.name,
                type=kind,
                choices=meta.get("choices"),
                default=None if default is MISSING else default,
                required=default is MISSING,
                metavar=meta.get("metavar"),
                help=_help(meta["help"], default, meta),
            )


def flag_values(args: argparse.Namespace, cls, only=None, exclude=()) -> dict:
    """{field: value} of the flags `add_flags` made, ready for `cls(**values)`."""
    hints = typing.get_type_hints(cls)
    values = {}
    for f in cli_fields(cls, only, exclude):
        kind = _base_type(hints[f.name])
        if kind is dict:
            given = {key: getattr(args, _key_dest(f, key)) for key in f.metadata["keys"]}
            values[f.name] = {key: value for key, value in given.items() if value is not None}
        elif kind is tuple:
            values[f.name] = tuple(getattr(args, f.name) or ())
        else:
            values[f.name] = getattr(args, f.name)
    return values


def flags_for(values: dict, cls) -> list[str]:
    """The flags of `cls` that give its settings `values` (a job's, as its manifest keeps them), in
    declaration order: those whose value differs from the flag's default; a setting absent from
    `values` is left to its default. The inverse of `flag_values`, to rebuild a job's command."""
    hints = typing.get_type_hints(cls)
    argv: list[str] = []
    for f in cli_fields(cls):
        if f.name not in values:
            continue
        value, default, kind = values[f.name], _cli_default(f), _base_type(hints[f.name])
        if kind is dict:
            given = value or {}
            argv += [f"{f.metadata['flag'].format(key=key)}={given[key]}" for key in f.metadata["keys"] if given.get(key) is not None]
        elif kind is bool:
            if value != default:
                argv.append(flag_name(f))
        elif kind is tuple:
            argv += [f"{flag_name(f)}={entry}" for entry in value or ()]
        elif value is not None and value != default:
            argv.append(f"{flag_name(f)}={value}")  # one word: a value that starts with "-" stays a value
    return argv


def flag_name(f: dataclasses.Field) -> str:
    if f.metadata.get("flag"):
        return f.metadata["flag"]
    name = f.name.replace("_", "-")
    return f"--no-{name}" if f.default is True else f"--{name}"


def flag_names(cls, only=None, exclude=()) -> list[str]:
    """Every flag the fields of `cls` make (a dict field: one per key)."""
    names = []
    for f in cli_fields(cls, only, exclude):
        keys = f.metadata.get("keys")
        names += [f.metadata["flag"].format(key=key) for key in keys] if keys else [flag_name(f)]
    return names


def _cli_default(f: dataclasses.Field):
    if f.metadata.get("cli_default", MISSING) is not MISSING:
        return f.metadata["cli_default"]
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


def _help(text: str, default, meta) -> str:
    if meta.get("bounds") is not None:
        text = f"{text}; must be {meta['bounds']}"
    text = text.replace("%", "%%")  # argparse formats help with %
    if default is MISSING:  # a switch, or a required flag
        return text
    shown = meta.get("default_text")
    if shown is None:
        if default is None or default in ((), {}, ""):
            raise ValueError(f"setting {text!r}: its default {default!r} needs a default_text for --help")
        shown = default
    return f"{text} (default: {str(shown).replace('%', '%%')})"


def _base_type(hint) -> type:
    """int, float, str, bool, tuple or dict: what the annotation is, without `| None`."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    hint = typing.get_origin(hint) or hint
    if hint not in (int, float, str, bool, tuple, dict):
        raise TypeError(f"no flag for a setting of type {hint!r}")
    return hint


def _key_dest(f: dataclasses.Field, key: str) -> str:
    return f.metadata["flag"].format(key=key).lstrip("-").replace("-", "_")


def _group(parser: argparse.ArgumentParser, title: str | None):
    if title is None:
        return parser
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title)
