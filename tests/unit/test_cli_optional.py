"""``actorq``'s optional subcommands: a missing third-party package hides one with the reason in the help; a missing
or broken internal module is a bug and raises instead of making a subcommand vanish."""

from __future__ import annotations

import argparse
import sys

import pytest

from actorq import cli


def _parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:
    parser = argparse.ArgumentParser(prog="actorq")
    return parser, parser.add_subparsers(dest="command")


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """A directory on sys.path for throwaway modules (removed from sys.modules afterwards)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("needs_missing_pkg", "imports_missing_actorq"):
        sys.modules.pop(name, None)


def test_missing_third_party_package_hides_the_command_and_says_why(modules, capsys):
    (modules / "needs_missing_pkg.py").write_text("import actorq_test_absent_package\n")
    parser, sub = _parser()
    cli._add_optional(parser, sub, "needs_missing_pkg", "add_parser")
    assert sub.choices == {}
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert (
        "unavailable: the subcommands of needs_missing_pkg need the package 'actorq_test_absent_package'"
        in shown
    )


def test_missing_internal_module_raises(modules):
    parser, sub = _parser()
    with pytest.raises(ModuleNotFoundError, match="actorq.no_such_module"):
        cli._add_optional(parser, sub, "actorq.no_such_module", "add_parser")
    (modules / "imports_missing_actorq.py").write_text("import actorq.no_such_module\n")
    with pytest.raises(ModuleNotFoundError, match="actorq.no_such_module"):
        cli._add_optional(parser, sub, "imports_missing_actorq", "add_parser")
    assert parser.epilog is None


def test_every_subcommand_is_registered_here():
    """Nothing is hidden on a complete install (the pinned stack has every optional package)."""
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert {"train", "role", "tasks", "bench", "experiment", "report"} <= set(sub.choices)
    assert parser.epilog is None
