"""The config reference (``docs/config.md``), written from the schema itself: every key, its type, its default and
the docstring under its field, section by section, each algorithm's own section included.

``python -m actorq.config.reference docs/config.md`` rewrites the page; ``tests/unit/test_config_reference.py``
fails when the page and the schema differ, and loads every key it lists.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from actorq import algorithms
from actorq.config.flags import field_docs
from actorq.config.schema import ExperimentConfig

HEADER = """# Config reference

Every key a config file (or a `section.key=value` override) takes, with its default and what it does. Generated
from the docstrings in `actorq/config/schema.py` and each algorithm's settings section by
`python -m actorq.config.reference docs/config.md` (`tests/unit/test_config_reference.py` checks it is current).
`actorq config CONFIG [overrides]` prints a config as a run resolves it, every default filled in;
`actorq config --defaults algorithm=NAME` prints the defaults alone.
"""


@dataclasses.dataclass(frozen=True)
class Key:
    """One documented key."""

    name: str
    """Dotted YAML key, e.g. ``actor.precision``."""
    type: str
    default: Any
    doc: str


def _type_name(hint: Any) -> str:
    text = getattr(hint, "__name__", None) if not typing.get_args(hint) else None
    return (text or str(hint).replace("typing.", "")).replace(" | None", " or null")


def keys_of(cls: type, prefix: str = "") -> Iterator[Key]:
    """Every scalar key of the dataclass ``cls`` (nested sections flattened), in field order."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    instance = cls()
    for f in dataclasses.fields(cls):
        if f.name == "settings":  # the algorithm's section: documented per algorithm
            continue
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            yield from keys_of(hint, f"{prefix}{f.name}.")
            continue
        default = getattr(instance, f.name)
        yield Key(
            f"{prefix}{f.name}",
            _type_name(hint),
            list(default) if isinstance(default, tuple) else default,
            docs.get(f.name, ""),
        )


def sections() -> list[tuple[str, str, list[Key]]]:
    """``(title, introduction, keys)`` per section: the shared ones, then each algorithm's."""
    hints = typing.get_type_hints(ExperimentConfig)
    top_docs = field_docs(ExperimentConfig)
    shared = [k for k in keys_of(ExperimentConfig) if "." not in k.name]
    out = [("Top level", "Keys outside any section.", shared)]
    for f in dataclasses.fields(ExperimentConfig):
        hint = hints[f.name]
        if dataclasses.is_dataclass(hint):
            intro = (
                (hint.__doc__ or "").strip()
                if hint.__doc__ and not hint.__doc__.startswith(hint.__name__)
                else ""
            )
            out.append(
                (
                    f"`{f.name}:`",
                    " ".join((top_docs.get(f.name, "") + " " + intro).split()),
                    list(keys_of(hint, f"{f.name}.")),
                )
            )
    for name in algorithms.names():
        algo = algorithms.get(name)
        intro = f"Only with `algorithm: {name}` ({algo.summary})."
        out.append((f"`{name}:`", intro, list(keys_of(algo.section, f"{name}."))))
    return out


def _value(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("...").strip()


def render() -> str:
    """The whole page."""
    lines = [HEADER]
    for title, intro, keys in sections():
        lines += [f"## {title}", ""]
        if intro:
            lines += [intro, ""]
        lines += ["| key | type | default | what |", "| --- | --- | --- | --- |"]
        for key in keys:
            doc = key.doc.replace("|", "\\|")
            lines.append(f"| `{key.name}` | {key.type} | `{_value(key.default)}` | {doc} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m actorq.config.reference [PATH]``: write the page to PATH (default: stdout)."""
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if argv:
        Path(argv[0]).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
