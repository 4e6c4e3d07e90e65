"""The private Acme/Sonnet (actorq/learners/acme_adapter.py) and Launchpad (actorq/launchers/launchpad_adapter.py)
surfaces: present in the installed packages (each member its own test, so a failure names it), each check fails
on a class that lost or reshaped its member, and no other module under actorq/ touches those names."""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

import pytest

from actorq.launchers import launchpad_adapter
from actorq.learners import acme_adapter

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = {"actorq/learners/acme_adapter.py", "actorq/launchers/launchpad_adapter.py"}


@pytest.mark.parametrize("entry", acme_adapter._SURFACE, ids=lambda e: f"{e[0].rsplit('.', 1)[1]}.{e[1]}")
def test_installed_acme_has_member(entry: tuple[str, str, str]) -> None:
    assert acme_adapter._problem(*entry) is None


def test_installed_launchpad_has_members() -> None:
    assert launchpad_adapter.missing_surface() == []
    launchpad_adapter.check_surface()


class _NewStyleLearner:
    """Acme after 0.4.0: ``_step(self, sample)``, and no ``_iterator``."""

    def __init__(self) -> None:
        self._num_steps = 0

    def _step(self, sample):
        return sample


class _TfFunction:
    def __init__(self, fn) -> None:
        self.python_function = fn

    def __call__(self, *args):
        return self.python_function(*args)


_NewStyleLearner._step = _TfFunction(_NewStyleLearner._step)


def test_check_names_a_reshaped_step_and_a_missing_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acme_adapter, "_resolve", lambda path: _NewStyleLearner)
    monkeypatch.setattr(
        acme_adapter,
        "_SURFACE",
        (
            ("x.Learner", "_step", "step"),
            ("x.Learner", "_iterator", "attribute"),
            ("x.Learner", "_num_steps", "attribute"),
        ),
    )
    with pytest.raises(acme_adapter.AcmeSurfaceError) as err:
        acme_adapter.check_surface()
    text = str(err.value)
    assert "x.Learner._step: takes (self, sample)" in text
    assert "x.Learner._iterator: no longer assigned" in text
    assert "_num_steps" not in text


def test_check_names_a_missing_method(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acme_adapter, "_resolve", lambda path: object)
    monkeypatch.setattr(acme_adapter, "_SURFACE", (("x.Adam", "_initialize", "method"),))
    assert acme_adapter.missing_surface() == ["x.Adam._initialize: no longer a method"]


def test_launchpad_check_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from launchpad.launch import worker_manager

    class Renamed:
        def __init__(self) -> None:
            self._workers = {}

    monkeypatch.setattr(worker_manager, "WorkerManager", Renamed)
    with pytest.raises(launchpad_adapter.LaunchpadSurfaceError) as err:
        launchpad_adapter.check_surface()
    assert "WorkerManager._disable_signals" in str(err.value)
    assert "WorkerManager._active_workers" in str(err.value)


def test_iterator_replaced_restores_on_error() -> None:
    class Learner:
        _iterator = iter([1])

    learner, real = Learner(), Learner._iterator
    with pytest.raises(ValueError), acme_adapter.iterator_replaced(learner, iter([2])):
        assert next(learner._iterator) == 2
        raise ValueError
    assert learner._iterator is real


FOREIGN = ("acme", "reverb", "launchpad", "sonnet")
"""The packages whose private members ActorQ may touch only through the adapters."""

ALLOWED: dict[str, set[str]] = {
    "actorq/learners/acme_adapter.py": {member for _, member, _ in acme_adapter._SURFACE},
    "actorq/launchers/launchpad_adapter.py": {"_active_workers", "_disable_signals"},
}
"""The private members each adapter deliberately uses (the Acme ones are exactly its checked ``_SURFACE``)."""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name != "_"


@functools.cache
def _foreign_private_names() -> frozenset[str]:
    """Every private name the installed foreign packages define: functions, classes, methods, ``self._x``
    assignments, class and module variables."""
    names: set[str] = set()
    for package in FOREIGN:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
        for directory in spec.submodule_search_locations:
            for path in Path(directory).rglob("*.py"):
                try:
                    tree = ast.parse(path.read_bytes())
                except SyntaxError:
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        names.add(node.name)
                    elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                        names.add(node.attr)
                    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        names.add(node.id)
    return frozenset(n for n in names if _private(n))


def _foreign_bound(tree: ast.Module) -> set[str]:
    """Names this module binds to a foreign package or something imported from one (``snt``, ``reverb``, ...)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FOREIGN:
                    bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in FOREIGN:
            bound.update(alias.asname or alias.name for alias in node.names)
    return bound


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def foreign_private_uses(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every private member of a foreign package this source touches: ``x._name`` and
    ``getattr(x, "_name")`` on anything but the object itself, ``self._name`` in a class deriving from a foreign
    class that it does not define itself, and imports of private foreign modules or names."""
    tree = ast.parse(source)
    foreign, bound, found = _foreign_private_names(), _foreign_bound(tree), []

    def own_receiver(node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in ("self", "cls")
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"

    def visit(node: ast.AST, inherited: set[str] | None) -> None:
        # inherited: in a class deriving from a foreign class, the private names it defines itself; else None
        if isinstance(node, ast.ClassDef):
            if any(_root(b) in bound for b in node.bases):
                inherited = {
                    n.attr if isinstance(n, ast.Attribute) else n.name
                    for n in ast.walk(node)
                    if (
                        isinstance(n, ast.Attribute)
                        and isinstance(n.ctx, ast.Store)
                        and own_receiver(n.value)
                    )
                    or isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                }
            else:
                inherited = None
        receiver, name = None, None
        if isinstance(node, ast.Attribute) and _private(node.attr):
            receiver, name = node.value, node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            receiver, name = node.args[0], node.args[1].value
        if name in foreign and (
            not own_receiver(receiver) or (inherited is not None and name not in inherited)
        ):
            found.append((node.lineno, name))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            )
            names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
            for module in modules:
                if module.split(".")[0] in FOREIGN:
                    found.extend((node.lineno, part) for part in module.split(".") + names if _private(part))
        for child in ast.iter_child_nodes(node):
            visit(child, inherited)

    visit(tree, None)
    return found


def test_the_private_use_scan_finds_each_kind_of_use() -> None:
    source = """
import sonnet as snt
from acme.agents.tf.d4pg import learning
from launchpad.launch import worker_manager
from launchpad.launch.worker_manager import _private_helper
import reverb._private_module


class Own:
    def __init__(self):
        self._iterator = 1  # its own attribute, however Acme names its own

    def use(self, learner, manager):
        a = learner._iterator
        b = getattr(learner, "_num_steps")
        manager._active_workers.clear()
        return a, b, self._iterator


class Derived(snt.Linear):
    def __init__(self):
        super().__init__(2)
        self._mine = 1

    def __call__(self, x):
        self._initialize(x)
        return super()._initialize(x), self._mine
"""
    found = sorted(foreign_private_uses(source))
    assert found == [
        (5, "_private_helper"),
        (6, "_private_module"),
        (14, "_iterator"),
        (15, "_num_steps"),
        (16, "_active_workers"),
        (26, "_initialize"),
        (27, "_initialize"),
    ], found


def test_private_foreign_members_only_through_the_adapters() -> None:
    """Any private member of Acme, Reverb, Launchpad or Sonnet that a module under actorq/ touches must be one its
    adapter lists (ALLOWED); every listed one must still be used (the list stays exact)."""
    found, used = [], {rel: set() for rel in ALLOWED}
    for path in sorted((ROOT / "actorq").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, name in foreign_private_uses(path.read_text()):
            if name in ALLOWED.get(rel, ()):
                used[rel].add(name)
            else:
                found.append(f"{rel}:{line} {name}")
    assert found == [], (
        "private Acme/Reverb/Launchpad/Sonnet members are used only in actorq/learners/acme_adapter.py (listed in "
        "its _SURFACE, checked against the installed Acme) or actorq/launchers/launchpad_adapter.py"
    )
    assert used == ALLOWED, "an adapter no longer uses a member its allowlist names: drop it from the list"


def test_a_learner_class_is_checked_for_the_members_actorq_uses():
    from acme.agents.tf.d4pg.learning import D4PGLearner
    from acme.agents.tf.dqn.learning import DQNLearner

    assert acme_adapter.missing_learner_members(D4PGLearner, acme_adapter.ACTOR_CRITIC_MEMBERS) == []
    acme_adapter.check_learner_class(D4PGLearner, acme_adapter.ACTOR_CRITIC_MEMBERS)
    missing = acme_adapter.missing_learner_members(DQNLearner, acme_adapter.ACTOR_CRITIC_MEMBERS)
    assert missing == [
        "acme.agents.tf.dqn.learning.DQNLearner._policy_optimizer: no longer assigned in __init__",
        "acme.agents.tf.dqn.learning.DQNLearner._critic_optimizer: no longer assigned in __init__",
    ]
    with pytest.raises(acme_adapter.AcmeSurfaceError, match="DQNLearner._policy_optimizer"):
        acme_adapter.check_learner_class(DQNLearner, acme_adapter.ACTOR_CRITIC_MEMBERS)
