"""The learning algorithms: one package each, and the registry everything else asks (never a string compare).

``get(config.algorithm)`` returns the :class:`~actorq.algorithms.base.Algorithm` that knows the algorithm's kind
of actions, config section and its checks, policy architecture and TF -> torch mapping, action head and
exploration, evaluation rule, kernel bound and (by lazy reference) its TF learner builder, TF networks and torch
policy. An algorithm is one package ``<name>/`` that exports its instance as ``ALGORITHM``:

* ``__init__.py`` (numpy only, level 0): the ``Algorithm`` subclass and its settings section;
* ``tf_*.py`` (TensorFlow and Acme, never torch): its TF networks and learner builder, resolved only in the learner;
* ``torch_*.py`` (torch, never TensorFlow): its actor policy, resolved only by actors;
* its configs under ``configs/<name>/`` and its tests.

Found, in this order, without any list to edit: the built-in packages here (every subpackage of
``actorq.algorithms``), then the entry points of group ``actorq.algorithms`` of the installed distributions (a
plugin declares ``[project.entry-points."actorq.algorithms"] name = "its_package:ALGORITHM"``), then what a test
passes to :func:`register`. Every process that asks (a role started by any placement) finds the same ones.

Level 0 of the layering (numpy only): config validation, networks, actors, learners and roles may all ask it.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
from importlib import metadata

from actorq.algorithms.base import Algorithm, PolicyNetwork, Ref, VerificationResult
from actorq.errors import UsageError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "actorq.algorithms"
"""Entry-point group a third-party algorithm is declared under (its value: ``module:ALGORITHM``)."""

_REGISTRY: dict[str, Algorithm] = {}
_BROKEN: dict[str, str] = {}
"""Entry points that failed to load: name -> why (reported when a config asks for that name)."""
_discovered = False


class UnknownAlgorithmError(UsageError):
    """No algorithm of that name is registered; the message lists the registered ones."""


def _add(algorithm: object, origin: str) -> None:
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"{origin} is a {type(algorithm).__name__}, not an actorq.algorithms.base.Algorithm")
    if algorithm.name in _REGISTRY and _REGISTRY[algorithm.name] is not algorithm:
        raise ValueError(f"{origin}: algorithm name {algorithm.name!r} is already taken")
    _REGISTRY[algorithm.name] = algorithm


def _discover() -> None:
    """Register the built-in packages and the installed entry points, once per process."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.ispkg:
            module = importlib.import_module(f"{__name__}.{info.name}")
            _add(getattr(module, "ALGORITHM", None), f"{module.__name__}.ALGORITHM")
    for entry in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            algorithm = entry.load()
            _add(algorithm, f"entry point {entry.name} = {entry.value}")
            if algorithm.name != entry.name:
                log.warning("entry point %s names algorithm %r", entry.name, algorithm.name)
        except Exception as exc:  # noqa: BLE001  (a broken plugin must not take the built-ins down)
            _BROKEN[entry.name] = f"{type(exc).__name__}: {exc}"
            log.warning("algorithm entry point %s = %s failed to load: %s", entry.name, entry.value, exc)


def register(algorithm: Algorithm, replace: bool = False) -> Algorithm:
    """Make ``algorithm`` available as ``algorithm: <name>`` in this process's configs (tests); returns it.

    Raises:
        ValueError: The name is taken (pass ``replace=True`` to swap it).
    """
    _discover()
    if algorithm.name in _REGISTRY and not replace:
        raise ValueError(f"algorithm {algorithm.name!r} is already registered")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def unregister(name: str) -> None:
    """Remove a registered algorithm (tests that register their own)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered algorithms' names: built-ins (alphabetical), entry points (alphabetical), then registered."""
    _discover()
    return tuple(_REGISTRY)


def get(name: str) -> Algorithm:
    """The algorithm registered as ``name``.

    Raises:
        UnknownAlgorithmError: None is; the message lists the registered ones (and why a plugin of that name failed
            to load, if one did).
    """
    _discover()
    try:
        return _REGISTRY[name]
    except KeyError:
        why = f" (its entry point failed to load: {_BROKEN[name]})" if name in _BROKEN else ""
        raise UnknownAlgorithmError(f"algorithm {name!r} is not one of {names()}{why}") from None


__all__ = [
    "ENTRY_POINT_GROUP",
    "Algorithm",
    "PolicyNetwork",
    "Ref",
    "UnknownAlgorithmError",
    "VerificationResult",
    "get",
    "names",
    "register",
    "unregister",
]
