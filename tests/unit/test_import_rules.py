"""The layering rules, enforced on the source: imports flow one way, as the README's layer table says.

Every module under ``actorq/`` is parsed, and three kinds of reference to another module are checked against the
levels read from the README's table: ``import`` statements, modules loaded by name (``importlib.import_module
("...")``, ``__import__("...")``, or any string that names an ``actorq`` module, such as the CLI's list of optional
subcommand modules) and modules started as processes (``[sys.executable, "-m", "..."]``). A module may use modules
of a lower level and of its own package; level 0 modules may use each other; no modules import each other around a
circle (every import statement counted, in functions too). Besides: only ``actorq/replay``
imports reverb; actors and quantize never import TensorFlow; learners and quantize never import torch; nothing
imports ``actorq.studies`` but the CLI; nothing imports the ``launch/`` scripts, which are not installed.

An algorithm package ``actorq/algorithms/<name>/`` holds TensorFlow and torch code, so its modules' rules go by
file name (the convention every algorithm package follows):

* ``tf_*.py`` (its TF networks and learner builder): level 3½, just above ``learners`` and ``actors``: it may use
  TensorFlow, Acme and every level up to 3 (the generic learner in ``actorq/learners``, ``actorq/replay``,
  ``actorq/networks``), never torch, never ``actorq.actors`` and never a ``torch_*`` module;
* ``torch_*.py`` (its actor policy): level 3½ too: torch and levels up to 3, never TensorFlow/Sonnet/Acme's TF
  parts, never ``actorq.learners``, ``actorq.networks.tf_nets`` or a ``tf_*`` module;
* every other module (the package ``__init__``: the ``Algorithm`` and its settings) is level 0 like
  ``actorq/algorithms`` itself: numpy only (no TensorFlow, Acme, torch or reverb) and only level-0 modules. It may
  *name* (not import) its ``tf_*``/``torch_*`` modules in ``Ref``s, which only the learner (TF ones) and actors
  (torch ones) resolve (``tests/unit/test_algorithms.py`` checks each side).

Level 3½ means nothing at level 3 or below may import those modules (the learner and actors only resolve ``Ref``s);
roles and above may.
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


def readme_table(readme: str) -> tuple[dict[str, int], dict[str, str]]:
    """``({"config": 0, ..., "cli": 10}, {"config": "runtime", ..., "report": "lab"})`` from the README's
    ``| level | modules | layer | what |`` table."""
    levels: dict[str, int] = {}
    layers: dict[str, str] = {}
    for line in readme.splitlines():
        m = re.match(r"\|\s*(\d+)\s*\|([^|]*)\|\s*(runtime|lab)\s*\|", line)
        if not m:
            continue
        for path in re.findall(r"`actorq/([A-Za-z_0-9]+)(?:\.py|/)`", m.group(2)):
            assert path not in levels, f"README layer table names actorq/{path} twice"
            levels[path] = int(m.group(1))
            layers[path] = m.group(3)
    return levels, layers


def readme_levels(readme: str) -> dict[str, int]:
    """The levels of :func:`readme_table`."""
    return readme_table(readme)[0]


LEVELS, LAYERS = readme_table((ROOT / "README.md").read_text())
LEVELS["__init__"] = 0  # actorq/__init__.py: the package's own docstring and version
LAYERS["__init__"] = "runtime"
LAB_OPTIONAL = "cli"
"""The one runtime module that names lab modules: the CLI registers their commands where the lab is installed
(by name, through ``_add_optional``, which leaves a command out when its packages are missing)."""


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
            if node.module.startswith("actorq.algorithms."):  # ``from actorq.algorithms.x import tf_learner``
                found += [
                    ("import", f"{node.module}.{a.name}")
                    for a in node.names
                    if algorithm_side(tuple(f"{node.module}.{a.name}".split(".")[1:]))
                ]
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


def algorithm_side(parts: tuple[str, ...]) -> str | None:
    """``"tf"`` or ``"torch"`` for an algorithm package's framework module (``algorithms/<name>/tf_*.py`` or
    ``torch_*.py``, or a dotted name ``actorq.algorithms.<name>.tf_*``), else None (numpy-only, level 0)."""
    if len(parts) < 3 or parts[0] != "algorithms":
        return None
    leaf = parts[2]
    return "tf" if leaf.startswith("tf_") else "torch" if leaf.startswith("torch_") else None


def framework_level(levels: dict[str, int]) -> float:
    """Level of an algorithm package's ``tf_*``/``torch_*`` modules: just above the learner's and actors' level."""
    return max(levels["learners"], levels["actors"]) + 0.5


def level_of(parts: tuple[str, ...], levels: dict[str, int]) -> float:
    """A module's level: its top-level package's row in the table, or :func:`framework_level` for an algorithm
    package's framework module."""
    return framework_level(levels) if algorithm_side(parts) else levels[parts[0]]


def _uses_tf(name: str) -> bool:
    root = name.split(".")[0]
    return root in ("tensorflow", "sonnet", "trfl", "reverb") or name.startswith(
        ("acme.tf", "acme.agents.tf")
    )


def _algorithm_violations(parts: tuple[str, ...], what: str, kind: str, name: str) -> list[str]:
    """The file-name rules inside ``actorq/algorithms`` (module docstring)."""
    side, root = algorithm_side(parts), name.split(".")[0]
    target = tuple(name.split(".")[1:]) if root == "actorq" else ()
    target_side = algorithm_side(target)
    out = []
    if side is None and kind == "import":
        if root in ("tensorflow", "sonnet", "trfl", "torch", "acme", "reverb", "onnxruntime"):
            out.append(
                f"{what}: an algorithm's __init__ and settings are numpy only (TF in tf_*.py, torch in torch_*.py)"
            )
        if target_side:
            out.append(
                f"{what}: a level-0 algorithm module names its {target_side} modules by Ref, never imports them"
            )
    if side == "tf" and (root == "torch" or target[:1] == ("actors",) or target_side == "torch"):
        out.append(f"{what}: an algorithm's tf_*.py never uses torch, actors or its torch_*.py")
    if side == "torch":
        if _uses_tf(name) or target[:1] == ("learners",) or target[:2] == ("networks", "tf_nets"):
            out.append(
                f"{what}: an algorithm's torch_*.py never uses TensorFlow, Acme's TF parts or the learner"
            )
        if target_side == "tf":
            out.append(f"{what}: an algorithm's torch_*.py never uses its tf_*.py")
    return out


def violations(
    parts: tuple[str, ...], source: str, levels: dict[str, int] = LEVELS, layers: dict[str, str] = LAYERS
) -> list[str]:
    """What module ``actorq/<parts...>`` with this ``source`` does against the layering rules (empty: nothing)."""
    layer = parts[0].removesuffix(".py")
    where = "actorq/" + "/".join(parts)
    if layer not in levels:
        return [
            f"{where}: top-level module {layer!r} is not in the README's layer table; give it a level there"
        ]
    parts = (layer, *parts[1:-1], parts[-1].removesuffix(".py")) if len(parts) > 1 else (layer,)
    own = level_of(parts, levels)
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
        if layer == "algorithms":
            out += _algorithm_violations(parts, what, kind, name)
        if root != "actorq" or "." not in name:
            continue
        target_parts = tuple(name.split(".")[1:])
        target = target_parts[0]
        if target == layer and layer != "algorithms":
            continue
        if target not in levels:
            out.append(f"{what}: actorq.{target} is not in the README's layer table")
            continue
        if target == "studies" and layer != "cli":
            out.append(f"{what}: nothing but the CLI may use actorq.studies")
        if layers.get(layer) == "runtime" and layers.get(target) == "lab" and layer != LAB_OPTIONAL:
            out.append(
                f"{what}: the runtime never uses the lab (actorq.{target} is lab code; the run directory is "
                "their interface)"
            )
        if kind == "string" and layer == "algorithms" and algorithm_side(target_parts):
            continue  # an algorithm's lazy Ref: named here, imported only by the layer that resolves it
        theirs = level_of(target_parts, levels)
        upward = theirs > own or (theirs == own and own > 0 and target != layer)
        if upward:
            out.append(
                f"{what}: actorq.{'.'.join(target_parts)} is level {theirs:g}, {where} is level {own:g}; "
                "modules use only lower levels (README layer table; algorithm packages: module docstring)"
            )
    return out


ALL = [(p, p.relative_to(PACKAGE).parts) for p in sorted(PACKAGE.rglob("*.py"))]


@pytest.mark.parametrize("path,parts", ALL, ids=[str(p.relative_to(ROOT)) for p, _ in ALL])
def test_module_respects_layering(path, parts):
    assert violations(parts, path.read_text()) == []


def test_readme_table_gives_every_layer_a_level():
    assert LEVELS["usage"] == 0 and LEVELS["quantize"] < LEVELS["networks"] < LEVELS["actors"]
    assert LEVELS["roles"] < LEVELS["launchers"] < LEVELS["plan"] < LEVELS["report"] < LEVELS["cli"]
    assert {LAYERS[p] for p in ("report", "bench", "experiments", "studies")} == {"lab"}
    assert set(LAYERS) == set(LEVELS) and set(LAYERS.values()) == {"runtime", "lab"}
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


def test_checker_fails_when_the_runtime_names_the_lab():
    """Even where the level would allow it (a made-up table with the lab below), the runtime never uses the lab."""
    levels, layers = {**LEVELS, "report": 1}, LAYERS
    found = violations(("launchers", "x.py"), "from actorq.report.stats import smooth\n", levels, layers)
    assert any("the runtime never uses the lab" in v for v in found), found
    assert violations(("experiments", "x.py"), "from actorq.launchers.train import cmd_train\n") == []
    assert violations(("cli",), "m = 'actorq.report.cli'\n") == []


def test_checker_fails_on_same_level_packages_and_unknown_layers():
    assert violations(("roles", "x.py"), "import actorq.report.runs\n")  # both level 4, neither below
    assert violations(("brand_new", "x.py"), "") and violations(("roles", "x.py"), "import actorq.nowhere\n")
    # what is allowed passes: own package, lower levels, level 0 among themselves, launchers spawning roles
    assert (
        violations(("roles", "x.py"), "from actorq.roles.base import RoleBase\nimport actorq.replay\n") == []
    )
    assert violations(("config", "loading.py"), "from actorq.usage import run_command\n") == []
    assert violations(("launchers", "x.py"), "cmd = ['py', '-m', 'actorq.roles', 'actor']\n") == []


D4PG = ("algorithms", "d4pg")


@pytest.mark.parametrize(
    "parts,source,expected",
    [
        ((*D4PG, "__init__.py"), "import torch\n", "numpy only"),
        ((*D4PG, "__init__.py"), "import tensorflow as tf\n", "numpy only"),
        (
            (*D4PG, "__init__.py"),
            "from actorq.algorithms.d4pg.tf_learner import build\n",
            "by Ref, never imports",
        ),
        ((*D4PG, "__init__.py"), "from actorq.learners import AcmeLearner\n", "actorq.learners is level 3"),
        ((*D4PG, "tf_learner.py"), "import torch\n", "tf_*.py never uses torch"),
        ((*D4PG, "tf_learner.py"), "from actorq.algorithms.d4pg import torch_policy\n", "never uses torch"),
        ((*D4PG, "tf_learner.py"), "import actorq.algorithms.d4pg.torch_policy\n", "never uses torch"),
        ((*D4PG, "tf_learner.py"), "from actorq.roles import learner\n", "actorq.roles is level 4"),
        ((*D4PG, "torch_policy.py"), "import tensorflow\n", "torch_*.py never uses TensorFlow"),
        ((*D4PG, "torch_policy.py"), "from acme.tf import networks\n", "torch_*.py never uses TensorFlow"),
        ((*D4PG, "torch_policy.py"), "from actorq.learners import AcmeLearner\n", "never uses TensorFlow"),
        ((*D4PG, "torch_policy.py"), "from actorq.networks.tf_nets import create_variables\n", "the learner"),
        (
            (*D4PG, "torch_policy.py"),
            "from actorq.algorithms.d4pg.tf_networks import make_networks\n",
            "tf_*.py",
        ),
        (
            ("learners", "__init__.py"),
            "from actorq.algorithms.d4pg.tf_learner import build\n",
            "is level 3.5",
        ),
        (("actors", "policy.py"), "import actorq.algorithms.dqn.torch_policy\n", "is level 3.5"),
        (
            ("networks", "mapping.py"),
            "m = importlib.import_module('actorq.algorithms.dqn.tf_learner')\n",
            "3.5",
        ),
    ],
)
def test_checker_enforces_an_algorithm_packages_file_name_rules(parts, source, expected):
    found = violations(parts, source)
    assert any(expected in v for v in found), found


def test_checker_allows_what_an_algorithm_package_is_made_of():
    tf_learner = (
        "import tensorflow as tf\nfrom acme.agents.tf.d4pg import learning\nfrom actorq.learners import AcmeLearner\n"
        "from actorq.replay.experience import make_dataset_iterator\nfrom actorq.algorithms.d4pg import ALGORITHM\n"
        "from actorq.algorithms.d4pg.tf_networks import make_networks\nfrom actorq.config import ExperimentConfig\n"
    )
    assert violations((*D4PG, "tf_learner.py"), tf_learner) == []
    torch_policy = "import torch\nfrom actorq.networks.torch_nets import layer_widths\n"
    assert violations((*D4PG, "torch_policy.py"), torch_policy) == []
    refs = "import numpy as np\nfrom actorq.algorithms.base import Ref\nR = Ref('actorq.algorithms.d4pg.tf_learner', 'b')\n"
    assert violations((*D4PG, "__init__.py"), refs) == []
    assert violations(("roles", "learner.py"), "from actorq.algorithms.d4pg import tf_learner\n") == []
    assert (
        violations(("bench", "x.py"), "from actorq.algorithms.d4pg.tf_networks import make_networks\n") == []
    )


def imported_names(source: str, module: str, is_package: bool) -> set[str]:
    """Every module name an ``import`` statement of ``module`` may load, at module level or inside a function
    (``from a import b`` names both ``a`` and ``a.b``; relative imports resolved). Not :func:`references`: that one
    also counts strings naming a module (no import happens) and skips relative imports, which a circle may use."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    anchor = anchor.rpartition(".")[0]
                base = f"{anchor}.{base}" if node.module else anchor
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_cycles(sources: dict[str, tuple[str, bool]]) -> list[list[str]]:
    """The import circles among ``{module: (source, is_package)}``: each a sorted list of modules that import each
    other, directly or around a loop. A package importing its own submodules, or a module its parent packages,
    is no circle of files."""
    import networkx as nx

    def resolve(name: str) -> str | None:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name or None

    graph = nx.DiGraph()
    graph.add_nodes_from(sources)
    for module, (source, is_package) in sources.items():
        for name in imported_names(source, module, is_package):
            target = resolve(name)
            if target is None or target == module or module.startswith(target + "."):
                continue
            if is_package and target.startswith(module + "."):
                continue
            graph.add_edge(module, target)
    return sorted(sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1)


def test_no_import_circles_in_actorq():
    sources = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        sources[".".join(parts[:-1] if is_package else parts)] = (path.read_text(), is_package)
    assert len(sources) > 100
    assert import_cycles(sources) == []


def test_the_circle_finder_sees_a_function_level_circle_and_ignores_a_package_loading_its_modules():
    sources = {
        "p": ("from p import a\nfrom . import b\n", True),
        "p.a": ("import os\nfrom p import b\n", False),
        "p.b": ("def f():\n    from .c import X\n", False),
        "p.c": ("def g():\n    from p.a import Y\n", False),
        "p.d": ("from p import c\n", False),
    }
    assert import_cycles(sources) == [["p.a", "p.b", "p.c"]]
    sources["p.c"] = ("import p\n", False)
    assert import_cycles(sources) == []
