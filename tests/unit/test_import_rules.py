"""The layering rules of DEVELOPERS.md, enforced on the source: imports flow one way.

types/config/core/metrics/hardware -> quantize, envs -> networks, replay -> learners, actors -> roles, report, studies ->
bench -> cli (and launch/). Only actorq/replay imports reverb; actors and quantize never import tensorflow; learners never
import torch; quantize imports torch only in its torch_modules package; nothing imports studies except the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "actorq"

LEVELS = {
    "types": 0,
    "config": 0,
    "core": 0,
    "metrics": 0,
    "hardware": 0,
    "quantize": 1,
    "envs": 1,
    "networks": 2,
    "replay": 2,
    "learners": 3,
    "actors": 3,
    "roles": 4,
    "bench": 5,
    "report": 4,
    "studies": 4,
    "cli": 6,
    "__init__": 0,
    "__main__": 6,
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.relative_to(PACKAGE).parts


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _top(parts: tuple[str, ...]) -> str:
    return parts[0].removesuffix(".py")


ALL = list(_modules())


@pytest.mark.parametrize("path,parts", ALL, ids=[str(p.relative_to(ROOT)) for p, _ in ALL])
def test_module_respects_layering(path, parts):
    layer = _top(parts)
    assert layer in LEVELS, f"{path}: new top-level module {layer!r}; give it a level in this test"
    for name in _imports(path):
        root = name.split(".")[0]
        if root == "reverb":
            assert layer == "replay", f"{path} imports reverb: only actorq/replay may"
        if (
            root == "tensorflow"
            or root in ("sonnet", "trfl")
            or name.startswith("acme.tf")
            or name.startswith("acme.agents.tf")
        ):
            assert layer not in ("actors", "quantize"), f"{path} imports TensorFlow ({name})"
        if root == "torch":
            assert layer != "learners", f"{path}: learners never import torch"
            if layer == "quantize":
                assert "torch_modules" in parts, (
                    f"{path}: in quantize only the torch_modules package imports torch"
                )
        if root == "launch":
            assert layer == "cli", f"{path}: only the CLI imports the launchers"
        if root != "actorq" or len(name.split(".")) < 2:
            continue
        target = name.split(".")[1]
        if target == layer:
            continue
        assert target in LEVELS, f"{path} imports unknown module actorq.{target}"
        if target == "studies":
            assert layer == "cli", f"{path} imports actorq.studies: nothing but the CLI may"
        assert LEVELS[target] < LEVELS[layer] or layer == "cli", (
            f"{path} (layer {layer}, level {LEVELS[layer]}) imports actorq.{target} (level {LEVELS[target]}): "
            "imports must flow downward"
        )
    if layer == "actors":
        assert not any(
            n.startswith("actorq.networks.tf_nets") or n.startswith("actorq.learners") for n in _imports(path)
        )


def test_launch_package_imports_only_downward():
    for path in sorted((ROOT / "launch").rglob("*.py")):
        for name in _imports(path):
            assert not name.startswith("actorq.cli"), f"{path}: launchers must not import the CLI"
            assert name.split(".")[0] != "reverb", (
                f"{path}: launchers reach reverb only through actorq.replay"
            )


def test_rules_catch_a_violation(tmp_path):
    """The checker itself fails on an upward import (so the rules above can fail)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import reverb\nfrom actorq.roles import main\n")
    assert "reverb" in _imports(bad) and "actorq.roles" in _imports(bad)
