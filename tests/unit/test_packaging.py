"""pyproject.toml, the two locks and the installed metadata agree, and the runtime's dependencies carry no lab.

pyproject.toml states ranges (the runtime's `dependencies` and the extras); requirements.lock pins every package of
``.[all]`` (what `make venv` installs) and requirements-runtime.lock the runtime's alone (`make lock` writes both).
So a pin must satisfy its range, the runtime lock must be a part of the full one, and `pip install -c
requirements.lock .` must get no test tool, report or study package.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import tomli
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LAB_ONLY = {"rliable", "lifelines", "matplotlib", "stable-baselines3", "sb3-contrib", "codecarbon", "ray"}
LAB_ONLY |= {"pytest", "pytest-timeout", "pytest-xdist", "hypothesis", "ruff", "kubernetes-validate", "gym"}
"""Packages the runtime must not depend on (directly or not): the lab's, the studies', the tools', and gym."""


def project() -> dict:
    return tomli.loads((ROOT / "pyproject.toml").read_text())["project"]


def requirements(extra: str | None = None) -> list[Requirement]:
    """pyproject's runtime requirements, or one extra's (self-references like ``actorq[lab]`` left out)."""
    p = project()
    lines = p["dependencies"] if extra is None else p["optional-dependencies"][extra]
    return [r for r in map(Requirement, lines) if canonicalize_name(r.name) != "actorq"]


def lock(name: str = "requirements.lock") -> dict[str, str]:
    """``{canonical name: version}`` of a lock file."""
    out = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            pkg, version = line.split(";")[0].split("==")
            out[canonicalize_name(pkg)] = version.strip()
    return out


def out_of_range(reqs: list[Requirement], pins: dict[str, str]) -> list[str]:
    """Requirements whose pin is missing from ``pins`` or outside their range (markers that do not apply skipped)."""
    problems = []
    for req in reqs:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name not in pins:
            problems.append(f"{name}: no pin in the lock")
        elif not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{name}: pinned {pins[name]}, pyproject asks {req.specifier}")
    return problems


def test_every_pin_satisfies_its_range_in_pyproject():
    pins = lock()
    assert out_of_range(requirements(), pins) == []
    for extra in project()["optional-dependencies"]:
        assert out_of_range(requirements(extra), pins) == [], extra


def test_the_runtime_lock_is_the_runtime_part_of_the_full_lock():
    full, runtime = lock(), lock("requirements-runtime.lock")
    assert {n: v for n, v in runtime.items() if full.get(n) != v} == {}
    assert out_of_range(requirements(), runtime) == []


def test_the_runtime_carries_no_lab_no_tools_and_no_gym():
    assert LAB_ONLY & set(lock("requirements-runtime.lock")) == set()
    assert LAB_ONLY & {canonicalize_name(r.name) for r in requirements()} == set()
    assert "gym" not in lock()  # Acme's import of it is served by gymnasium (actorq/__init__.py)


def test_pyproject_ranges_are_ranges_and_extras_add_up():
    exact = [str(r) for r in requirements() if any(s.operator == "==" for s in r.specifier)]
    assert exact == []  # the lock pins; pyproject says what works
    extras = project()["optional-dependencies"]
    assert set(extras["all"][0].split("[")[1].rstrip("]").split(",")) == set(extras) - {"all"}


def test_a_pin_out_of_range_is_reported():
    reqs = [
        Requirement("onnxruntime>=1.17,<2"),
        Requirement("numpy<1.24"),
        Requirement("x; python_version<'3'"),
    ]
    assert out_of_range(reqs, {"onnxruntime": "1.16.0"}) == [
        "onnxruntime: pinned 1.16.0, pyproject asks <2,>=1.17",
        "numpy: no pin in the lock",
    ]


def test_the_installed_metadata_is_this_pyproject():
    """A stale install (pyproject changed, not reinstalled) fails here: reinstall with ``pip install -e .``."""
    installed = {
        str(Requirement(r))
        for r in importlib.metadata.requires("actorq") or []
        if Requirement(r).marker is None or "extra" not in str(Requirement(r).marker)
    }
    assert installed == {str(r) for r in requirements()}
