"""What every algorithm module provides: the :class:`Algorithm` interface and the pieces it is made of.

An algorithm is one module under ``actorq/algorithms/`` (see :mod:`actorq.algorithms.d4pg`): a subclass of
:class:`Algorithm` that says which kind of actions it learns, its config section, its actor policy's architecture,
its action head and exploration, its evaluation rule and its kernel-verification bound, and names its framework
pieces (the TF learner builder and networks, the torch policy) by :class:`Ref`. This package sits at level 0 of the
layering (numpy only), so every other layer can ask it; the references are resolved only by the side that uses
them (the learner resolves TensorFlow ones, actors torch ones), so neither ever imports the other's framework.
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True)
class Ref:
    """A lazy reference to ``module.attribute``, resolved on first use by the layer that needs it.

    Attributes:
        module: Dotted module path, e.g. ``actorq.learners``.
        attribute: Name of the object in that module.
    """

    module: str
    attribute: str

    def load(self) -> Any:
        """Import ``module`` and return its ``attribute``.

        Raises:
            ImportError: The module or the attribute does not exist (the message names both).
        """
        obj = getattr(importlib.import_module(self.module), self.attribute, None)
        if obj is None:
            raise ImportError(f"{self.module} has no {self.attribute!r} (an algorithm's reference is stale)")
        return obj

    def __str__(self) -> str:
        return f"{self.module}:{self.attribute}"


@dataclass(frozen=True)
class PolicyNetwork:
    """The actor policy's architecture, as the torch and ONNX Runtime kernels build it (layers: ``network.
    policy_layers``; weights named as in :mod:`actorq.networks.mapping`).

    Attributes:
        first_layer_norm: The first hidden layer is Linear -> LayerNorm (``norm.weight``/``norm.bias``) -> tanh
            (Acme's ``LayerNormMLP``); otherwise every hidden layer is Linear -> ``activation``.
        activation: Activation after the (other) hidden layers: ``relu`` or ``elu``.
        bounded_output: The head's output goes through tanh into the action bounds (Acme's ``TanhToSpec``);
            otherwise the head's outputs are returned as they are (e.g. Q-values).
        tf_scope: Name scope the TF learner builds the policy variables under.
    """

    first_layer_norm: bool
    activation: str
    bounded_output: bool
    tf_scope: str

    def __post_init__(self) -> None:
        if self.activation not in ("relu", "elu"):
            raise ValueError(f"activation {self.activation!r} is not one of relu, elu")


@dataclass(frozen=True)
class VerificationResult:
    """One kernel's outputs judged against fp32: within the algorithm's bound or not."""

    ok: bool
    error: float
    """The algorithm's error measure (e.g. relative to the action range, or to max |Q|)."""
    detail: str
    """Human-readable: the measure, the bound and anything else the rule checked."""


class Algorithm(abc.ABC):
    """One learning algorithm. Subclasses set the class attributes and implement the methods; register an
    instance with :func:`actorq.algorithms.register`."""

    name: ClassVar[str]
    """The ``algorithm:`` value of a config."""
    discrete: ClassVar[bool]
    """True when it learns discrete actions (integer action, policy outputs one value per action)."""
    summary: ClassVar[str]
    """One line for help texts and error messages."""
    section: ClassVar[type]
    """Its config section: a frozen dataclass with only the settings it uses (built by :meth:`settings`)."""
    network: ClassVar[PolicyNetwork]
    """The actor policy's architecture."""
    learner_builder: ClassVar[Ref]
    """``build(config, environment_spec, replay_address, counter, results, checkpoint_dir) -> AcmeLearner``
    (TensorFlow; resolved only in the learner)."""
    tf_networks: ClassVar[Ref]
    """The TF network builder the learner builder uses (Acme's networks with stable variable names)."""
    torch_policy: ClassVar[Ref]
    """``make(obs_dim, out_dim, layers, action_low, action_high) -> torch.nn.Module``, the fp32 twin of the TF
    policy (torch; resolved only by actors)."""
    verification_bounds: ClassVar[dict[str, float]]
    """Largest error :meth:`verify` accepts per precision (``fp32``, ``fp16``, ``int8``)."""

    @abc.abstractmethod
    def settings(self, config: Any) -> Any:
        """This algorithm's section (:attr:`section`) read from an experiment config."""

    @abc.abstractmethod
    def mapping_rows(self, layers: tuple[int, ...], prefix: str) -> list[tuple[str, str, bool]]:
        """The TF -> torch mapping of the policy's variables: ``(tf name, torch key, transpose)`` in network
        order; ``prefix`` is the root scope followed by ``/`` (or empty)."""

    @abc.abstractmethod
    def exploration_levels(self, stream_ids: list[int], streams: int, config: Any) -> np.ndarray:
        """Each exploration stream's noise level (``streams`` in all over the run's actors), from ``config``."""

    @abc.abstractmethod
    def explore(
        self,
        outputs: np.ndarray,
        rng: np.random.Generator,
        levels: np.ndarray,
        action_low: np.ndarray | None,
        action_high: np.ndarray | None,
    ) -> list[Any]:
        """Action head plus exploration: ``[B, out_dim]`` policy outputs -> B environment actions, row ``j``
        explored at ``levels[j]``."""

    @abc.abstractmethod
    def greedy(self, outputs: np.ndarray) -> Any:
        """The evaluation rule: the action for one observation's ``[out_dim]`` policy outputs, no exploration."""

    @abc.abstractmethod
    def verify(
        self, got: np.ndarray, ref: np.ndarray, precision: str, action_range: np.ndarray
    ) -> VerificationResult:
        """Judge a kernel's outputs ``got`` against the fp32 ``ref`` at ``precision`` (``[B, out_dim]`` both)."""
