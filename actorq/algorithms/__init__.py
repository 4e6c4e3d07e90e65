"""The learning algorithms: one module each, and the registry everything else asks (never a string compare).

``get(config.algorithm)`` returns the :class:`~actorq.algorithms.base.Algorithm` that knows the algorithm's kind
of actions, config section, policy architecture, action head and exploration, evaluation rule, kernel bound and
(by lazy reference) its TF learner builder, TF networks and torch policy. Built in: :mod:`actorq.algorithms.d4pg`
and :mod:`actorq.algorithms.dqn`. A new algorithm is one module with an ``Algorithm`` subclass, registered with
:func:`register`, plus its configs under ``configs/<name>/``.

Level 0 of the layering (numpy only): config validation, networks, actors, learners and roles may all ask it.
"""

from __future__ import annotations

from actorq.algorithms import d4pg, dqn
from actorq.algorithms.base import Algorithm, PolicyNetwork, Ref, VerificationResult

_REGISTRY: dict[str, Algorithm] = {}


class UnknownAlgorithmError(ValueError):
    """No algorithm of that name is registered; the message lists the registered ones."""


def register(algorithm: Algorithm, replace: bool = False) -> Algorithm:
    """Make ``algorithm`` available as ``algorithm: <name>`` in configs; returns it.

    Raises:
        ValueError: The name is taken (pass ``replace=True`` to swap it, e.g. in a test).
    """
    if algorithm.name in _REGISTRY and not replace:
        raise ValueError(f"algorithm {algorithm.name!r} is already registered")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def unregister(name: str) -> None:
    """Remove a registered algorithm (tests that register their own)."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """The registered algorithms' names, in registration order."""
    return tuple(_REGISTRY)


def get(name: str) -> Algorithm:
    """The algorithm registered as ``name``.

    Raises:
        UnknownAlgorithmError: None is; the message lists the registered ones.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownAlgorithmError(f"algorithm {name!r} is not one of {names()}") from None


for _builtin in (d4pg.ALGORITHM, dqn.ALGORITHM):
    register(_builtin)

__all__ = [
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
