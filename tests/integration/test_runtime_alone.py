"""The runtime imports and runs without the lab: every runtime module (README layer table) imports in a process
where the packages only the extras bring (lab, quarl, atari, energy, ray, dev) cannot be imported, as in a
`pip install -c requirements.lock .` environment; and Acme's TF networks import without the unmaintained `gym`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from packaging.utils import canonicalize_name

from tests.unit.test_import_rules import LAYERS, PACKAGE, ROOT

pytestmark = pytest.mark.integration

LAB_MODULES_SEEN = ("rliable", "lifelines", "stable_baselines3", "matplotlib", "pytest")
"""The issue's acceptance check: none of these may be loaded by ``import actorq.launchers.train``."""


def _pins(name: str) -> set[str]:
    return {
        canonicalize_name(line.split("==")[0])
        for line in (ROOT / name).read_text().splitlines()
        if "==" in line
    }


def extras_only_modules() -> list[str]:
    """Top-level import names of the distributions requirements.lock has and requirements-runtime.lock lacks."""
    import importlib.metadata

    names: set[str] = set()
    for dist in sorted(_pins("requirements.lock") - _pins("requirements-runtime.lock")):
        try:
            meta = importlib.metadata.distribution(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
        top = meta.read_text("top_level.txt")
        if top:
            names |= {t.strip() for t in top.split() if t.strip() and not t.startswith("_")}
        else:
            names |= {
                f.parts[0].removesuffix(".py")
                for f in meta.files or []
                if f.parts and not f.parts[0].endswith((".dist-info", ".data")) and f.parts[0] != ".."
            }
    return sorted(n for n in names if n.isidentifier())


def runtime_modules() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if LAYERS.get(parts[0].removesuffix(".py"), "runtime") != "runtime" or parts[-1] == "__main__":
            continue
        out.append(".".join(("actorq", *parts[:-1], *(() if parts[-1] == "__init__" else (parts[-1],)))))
    return out


BLOCKER = """
import importlib, importlib.abc, json, sys
BLOCKED = set(json.loads(sys.argv[1]))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the runtime install)", name=name)
        return None
sys.meta_path.insert(0, Blocker())
failed = {}
for module in json.loads(sys.argv[2]):
    try:
        importlib.import_module(module)
    except Exception as exc:
        failed[module] = f"{type(exc).__name__}: {exc}"
print(json.dumps({"failed": failed, "loaded": sorted({m.split(".")[0] for m in sys.modules} & BLOCKED)}))
"""


def _run(code: str, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_extras_are_told_apart_from_the_runtime():
    blocked = extras_only_modules()
    assert {"rliable", "lifelines", "stable_baselines3", "matplotlib", "pytest", "ray", "codecarbon"} <= set(
        blocked
    ), blocked
    assert not {"tensorflow", "torch", "reverb", "acme", "gymnasium", "numpy", "actorq"} & set(blocked)


def test_every_runtime_module_imports_without_the_extras():
    modules = runtime_modules()
    assert "actorq.launchers.train" in modules and "actorq.plan.cli" in modules
    assert not any(m.startswith(("actorq.report", "actorq.bench", "actorq.studies")) for m in modules)
    result = _run(BLOCKER, json.dumps(extras_only_modules()), json.dumps(modules))
    assert result == {"failed": {}, "loaded": []}


def test_importing_the_train_command_loads_no_lab_package():
    code = (
        "import sys, json, actorq.launchers.train\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {set(LAB_MODULES_SEEN)!r})))"
    )
    assert _run(code) == []


HIDE_GYM = """
import importlib, importlib.machinery, json, sys
find = importlib.machinery.PathFinder.find_spec
def hidden(name, path=None, target=None):
    return None if name.split(".")[0] in ("gym", "gym_notices") else find(name, path, target)
importlib.machinery.PathFinder.find_spec = staticmethod(hidden)
if sys.argv[1] == "actorq":
    import actorq
try:
    import acme.tf.networks
    import gym
    print(json.dumps(gym.__name__))
except ModuleNotFoundError as exc:
    print(json.dumps(str(exc)))
"""


def test_acme_networks_import_without_gym_once_actorq_is_imported():
    assert _run(HIDE_GYM, "actorq") == "gymnasium"
    assert "gym" in _run(HIDE_GYM, "acme-alone")  # without actorq's alias Acme's wrappers need the old gym
