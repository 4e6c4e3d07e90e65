"""Command-line flags generated from the config dataclasses: a command lists ``(flag, config key)`` pairs, and
each flag gets its type, its default (none: the config file's value stands) and its help text from the field
(the help is the field's docstring, so the two cannot drift apart). A pair naming a key the schema does not have
fails when the parser is built, not when a user passes the flag.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Sequence
from functools import cache
from typing import Any

from actorq.config.schema import ExperimentConfig


@dataclasses.dataclass(frozen=True)
class ConfigFlag:
    """One convenience flag for one config key (``--actors`` sets ``actor.num_actors``)."""

    flag: str
    key: str
    choices: tuple[Any, ...] | None = None
    """Allowed values when the field's own validation allows more than the flag should offer (or to list them)."""

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` of a config dataclass: the string literal under each annotated field."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        named = isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
        if named and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
            docs[node.target.id] = re.sub(r"\s+", " ", str(after.value.value)).strip()
    return docs


def resolve_key(key: str, root: type = ExperimentConfig) -> tuple[type, dataclasses.Field, Any]:
    """``(dataclass, field, type)`` of a dotted config key such as ``actor.num_actors``.

    Raises:
        KeyError: naming the key and the part of it the schema does not have.
    """
    cls: type = root
    parts = key.split(".")
    for i, part in enumerate(parts):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if part not in fields:
            raise KeyError(f"config key {key!r}: {cls.__name__} has no field {part!r} (has {sorted(fields)})")
        hint = typing.get_type_hints(cls)[part]
        if i == len(parts) - 1:
            return cls, fields[part], hint
        cls = hint
    raise KeyError(f"config key {key!r} is empty")


def _scalar(hint: Any) -> type:
    """The argparse type of a field: ``int``, ``float`` or ``str`` (``float | None`` gives ``float``)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _scalar(args[0])
    if hint in (int, float, str):
        return hint
    raise TypeError(f"no command-line flag for a field of type {hint!r}: use a section.key=value override")


def flag_help(item: ConfigFlag) -> str:
    """The flag's help: the field's docstring and the key it sets (``%`` escaped for argparse)."""
    cls, field, _ = resolve_key(item.key)
    doc = field_docs(cls).get(field.name)
    if not doc:
        raise ValueError(f"config field {item.key} has no docstring to use as the help of {item.flag}")
    return f"{doc} ({item.key})".replace("%", "%%")


def add_config_flags(parser: argparse.ArgumentParser, flags: Sequence[ConfigFlag]) -> None:
    """Add one option per :class:`ConfigFlag`: default None (the config's value stands), type from the field."""
    for item in flags:
        _, _, hint = resolve_key(item.key)
        parser.add_argument(
            item.flag, dest=item.dest, type=_scalar(hint), choices=item.choices, help=flag_help(item)
        )


def flag_overrides(args: argparse.Namespace, flags: Sequence[ConfigFlag]) -> dict[str, Any]:
    """``{config key: value}`` for every flag the user passed (for :func:`actorq.config.replace`)."""
    return {item.key: getattr(args, item.dest) for item in flags if getattr(args, item.dest) is not None}
