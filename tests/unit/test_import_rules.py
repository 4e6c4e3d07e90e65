"""The layering rules, enforced on the source: imports flow one way, as the README's layer table says.

Every module under ``actorq/`` is parsed, and three kinds of reference to another module are checked against the
levels read from the README's table: ``import`` statements, modules loaded by name (``importlib.import_module
("...")``, ``__import__("...")``, or any string that names an ``actorq`` module, such as the CLI's list of optional
subcommand modules) and modules started as processes (``[sys.executable, "-m", "..."]``). A module may use modules
of a lower level and of its own package; level 0 modules may use each other. Besides: only ``actorq/replay``
imports reverb; actors and quantize never import TensorFlow; learners and quantize never import torch; nothing
imports ``actorq.studies`` but the CLI; nothing imports the ``launch/`` scripts, which are not installed.
``actorq/algorithms`` (level 0) may *name* modules of any level: its ``Ref``s to an algorithm's TF learner and
torch policy, which only the learner and the actors resolve (``tests/unit/test_algorithms.py`` checks each side);
it imports only level 0.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import tomli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "actorq"
MODULE_NAME = re.compile(r"actorq(\.[A-Za-z_][A-Za-z0-9_]*)+")


def readme_levels(readme: str) -> dict[str, int]:
    """``{"config": 0, "quantize": 1, ..., "cli": 7}`` from the README's ``| level | modules | what |`` table."""
    levels: dict[str, int] = {}
    for line in readme.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|", line)
        if not m:
            continue
        for path in re.findall(r"`actorq/([A-Za-z_0-9]+)(?:\.py|/)`", m.group(2)):
            assert path not in levels, f"README layer table names actorq/{path} twice"
            levels[path] = int(m.group(1))
    return levels


LEVELS = readme_levels((ROOT / "README.md").read_text())
LEVELS["__init__"] = 0  # actorq/__init__.py: the package's own docstring and version


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def references(source: str, filename: str = "<source>") -> list[tuple[str, str]]:
    """``(kind, module)`` for every module ``source`` imports, loads by name or starts with ``-m``.

    kind is ``import``, ``string`` (importlib/``__import__`` or a string naming an actorq module) or ``subprocess``.
    """
    tree = ast.parse(source, filename=filename)
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [("import", a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(("import", node.module))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            target = _string(node.args[0])
            if name in ("import_module", "__import__") and target:
                found.append(("string", target))
        elif isinstance(node, (ast.List, ast.Tuple)):
            items = [_string(e) for e in node.elts]
            for flag, module in zip(items, items[1:], strict=False):
                if flag == "-m" and module:
                    found.append(("subprocess", module))
        elif (text := _string(node)) and MODULE_NAME.fullmatch(text):
            found.append(("string", text))
    return found


def violations(parts: tuple[str, ...], source: str, levels: dict[str, int] = LEVELS) -> list[str]:
    """What module ``actorq/<parts...>`` with this ``source`` does against the layering rules (empty: nothing)."""
    layer = parts[0].removesuffix(".py")
    where = "actorq/" + "/".join(parts)
    if layer not in levels:
        return [
            f"{where}: top-level module {layer!r} is not in the README's layer table; give it a level there"
        ]
    out = []
    for kind, name in references(source, where):
        root = name.split(".")[0]
        what = f"{where} ({kind}) uses {name}"
        if root == "launch":
            out.append(f"{what}: launch/ holds user scripts; nothing in actorq may use them")
        if root == "reverb" and layer != "replay":
            out.append(f"{what}: only actorq/replay may use reverb")
        tf = root in ("tensorflow", "sonnet", "trfl") or name.startswith(("acme.tf", "acme.agents.tf"))
        if tf and layer in ("actors", "quantize"):
            out.append(f"{what}: actors and quantize never use TensorFlow")
        if root == "torch" and layer in ("learners", "quantize"):
            out.append(f"{what}: learners and quantize (pure numpy maths) never use torch")
        if layer == "actors" and name.startswith(("actorq.networks.tf_nets", "actorq.learners")):
            out.append(f"{what}: actors never reach the TensorFlow networks or learners")
        if root != "actorq" or "." not in name:
            continue
        target = name.split(".")[1]
        if target == layer:
            continue
        if target not in levels:
            out.append(f"{what}: actorq.{target} is not in the README's layer table")
            continue
        if target == "studies" and layer != "cli":
            out.append(f"{what}: nothing but the CLI may use actorq.studies")
        if kind == "string" and layer == "algorithms":
            continue  # an algorithm's lazy Ref: named here, imported only by the layer that resolves it
        upward = levels[target] > levels[layer] or (levels[target] == levels[layer] and levels[layer] > 0)
        if upward:
            out.append(
                f"{what}: actorq.{target} is level {levels[target]}, {layer} is level {levels[layer]}; "
                "modules use only lower levels (README layer table)"
            )
    return out


ALL = [(p, p.relative_to(PACKAGE).parts) for p in sorted(PACKAGE.rglob("*.py"))]


@pytest.mark.parametrize("path,parts", ALL, ids=[str(p.relative_to(ROOT)) for p, _ in ALL])
def test_module_respects_layering(path, parts):
    assert violations(parts, path.read_text()) == []


def test_readme_table_gives_every_layer_a_level():
    assert LEVELS["usage"] == 0 and LEVELS["quantize"] < LEVELS["networks"] < LEVELS["actors"]
    assert LEVELS["roles"] < LEVELS["launchers"] < LEVELS["bench"] < LEVELS["cli"]
    on_disk = {p.name.removesuffix(".py") for p in PACKAGE.iterdir() if p.suffix == ".py" or p.is_dir()}
    assert on_disk - {"__pycache__"} <= set(LEVELS)


def test_launch_scripts_only_call_the_actorq_command():
    """launch/ holds thin scripts: no package, nothing but actorq's public command."""
    scripts = sorted((ROOT / "launch").glob("*.py"))
    assert scripts and not (ROOT / "launch" / "__init__.py").exists()
    for path in scripts:
        roots = {name.split(".")[0] for kind, name in references(path.read_text()) if kind == "import"}
        assert roots <= {"sys", "actorq"}, f"{path}: {roots}"


def test_only_actorq_is_installed():
    """No generic top-level ``launch`` (or any other) package goes into site-packages."""
    find = tomli.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["actorq*"]
    from setuptools import find_packages

    assert {p.split(".")[0] for p in find_packages(str(ROOT), include=find["include"])} == {"actorq"}


@pytest.mark.parametrize(
    "source,expected",
    [
        ("from actorq.roles import main\n", "(import) uses actorq.roles: actorq.roles is level 4"),
        ("import actorq.launchers.local as l\n", "(import) uses actorq.launchers.local"),
        (
            "import importlib\nm = importlib.import_module('actorq.bench.policy')\n",
            "(string) uses actorq.bench",
        ),
        ("m = __import__('actorq.cli')\n", "(string) uses actorq.cli"),
        ("MODULES = ['actorq.roles.actor']\n", "(string) uses actorq.roles.actor"),
        ("cmd = [sys.executable, '-m', 'actorq.roles', 'actor']\n", "(subprocess) uses actorq.roles"),
        ("subprocess.run(('python', '-m', 'actorq.cli', 'train'))\n", "(subprocess) uses actorq.cli"),
        ("import reverb\n", "only actorq/replay may use reverb"),
        ("cmd = ['python', '-m', 'reverb.server']\n", "only actorq/replay may use reverb"),
        ("import torch\n", "never use torch"),
        ("from launch.train_local import main\n", "nothing in actorq may use them"),
        ("import actorq.studies.ptq\n", "nothing but the CLI may use actorq.studies"),
    ],
)
def test_checker_fails_on_an_upward_reference(source, expected):
    """The checker run on a quantize module (level 1) that reaches upward, by import, by name or as a process."""
    found = violations(("quantize", "bad.py"), source)
    assert any(expected in v for v in found), found


def test_checker_fails_on_same_level_packages_and_unknown_layers():
    assert violations(("roles", "x.py"), "import actorq.report.runs\n")  # both level 4, neither below
    assert violations(("brand_new", "x.py"), "") and violations(("roles", "x.py"), "import actorq.nowhere\n")
    # what is allowed passes: own package, lower levels, level 0 among themselves, launchers spawning roles
    assert (
        violations(("roles", "x.py"), "from actorq.roles.common import EXIT_OK\nimport actorq.replay\n") == []
    )
    assert violations(("config", "loading.py"), "from actorq.usage import CliError\n") == []
    assert violations(("launchers", "x.py"), "cmd = ['py', '-m', 'actorq.roles', 'actor']\n") == []
