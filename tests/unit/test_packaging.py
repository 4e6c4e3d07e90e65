"""The installed package's metadata lists what requirements.in pins, so `pip install .` (how most users install a
library) gets every kernel (ONNX Runtime) and zoo loader (sb3-contrib) the README measures, at the same versions
as `make venv`. Reads the metadata of the installed ``actorq`` (importlib.metadata), not pyproject.toml: a stale
install fails here too (reinstall with ``pip install -e .``)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]

# requirements.in's test and lint tools: in the ``dev`` extra rather than the runtime dependencies.
DEV_ONLY = {"pytest", "pytest-timeout", "hypothesis", "ruff", "kubernetes-validate", "jsonschema"}
DEV_ONLY |= {"jsonschema-specifications", "pytest-xdist"}


def pinned(text: str) -> dict[str, Requirement]:
    """requirements.in's requirements by canonical name (comments and blank lines skipped; a repeat must agree)."""
    out: dict[str, Requirement] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name not in out or str(out[name].specifier) == str(req.specifier), (
            f"{name} pinned twice, differently"
        )
        out[name] = req
    return out


def installed() -> tuple[dict[str, Requirement], dict[str, Requirement]]:
    """(runtime, dev extra) requirements from the installed actorq's metadata, by canonical name."""
    runtime: dict[str, Requirement] = {}
    dev: dict[str, Requirement] = {}
    for line in importlib.metadata.requires("actorq") or []:
        req = Requirement(line)
        is_dev = (
            req.marker is not None and req.marker.evaluate({"extra": "dev"}) and "extra" in str(req.marker)
        )
        (dev if is_dev else runtime)[canonicalize_name(req.name)] = req
    return runtime, dev


def disagreements(wanted: dict[str, Requirement], runtime: dict, dev: dict) -> list[str]:
    problems = []
    for name, req in sorted(wanted.items()):
        where = dev if name in DEV_ONLY else runtime
        got = where.get(name)
        section = "dev extra" if name in DEV_ONLY else "dependencies"
        if got is None:
            problems.append(f"{name}: in requirements.in, not in pyproject's {section}")
        elif str(got.specifier) != str(req.specifier):
            problems.append(
                f"{name}: requirements.in {req.specifier or '(any)'}, installed {got.specifier or '(any)'}"
            )
    return problems


def test_installed_metadata_lists_what_requirements_in_pins() -> None:
    runtime, dev = installed()
    assert disagreements(pinned((ROOT / "requirements.in").read_text()), runtime, dev) == []


def test_the_measured_kernels_and_zoo_loaders_are_runtime_dependencies() -> None:
    runtime, _ = installed()
    for name in ("onnxruntime", "onnx", "sb3-contrib", "stable-baselines3"):
        assert name in runtime, f"`pip install .` would not get {name}"


def test_a_missing_or_different_pin_is_reported() -> None:
    wanted = pinned("onnxruntime==1.23.2\nsb3-contrib==2.8.0  # zoo\npytest\n")
    runtime = {"onnxruntime": Requirement("onnxruntime==1.22.0")}
    assert disagreements(wanted, runtime, {}) == [
        "onnxruntime: requirements.in ==1.23.2, installed ==1.22.0",
        "pytest: in requirements.in, not in pyproject's dev extra",
        "sb3-contrib: in requirements.in, not in pyproject's dependencies",
    ]
