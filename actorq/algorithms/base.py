"""What every algorithm package provides: the :class:`Algorithm` interface and the pieces it is made of.

An algorithm is one package under ``actorq/algorithms/`` (see :mod:`actorq.algorithms.d4pg`) or a plugin's package
found by entry point. Its ``__init__`` (numpy only, level 0) holds a subclass of :class:`Algorithm` that says which
kind of actions it learns, its config section and how to validate it, its actor policy's architecture and TF ->
torch mapping, its action head and exploration, its evaluation rule and its kernel-verification bound, and names
its framework pieces by :class:`Ref`: the TF learner builder and networks (``tf_*.py`` modules: TensorFlow and
Acme, never torch) and the torch policy (``torch_*.py``: torch, never TensorFlow). The references are resolved
only by the side that uses them (the learner resolves TensorFlow ones, actors torch ones), so neither ever imports
the other's framework (``tests/unit/test_import_rules.py`` enforces it by these file names).
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from actorq.algorithms.torso import MLP, Torso, conv_rows, resolve


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


def check_positive(key: str, value: float, allow_zero: bool = False) -> None:
    """A settings check: ``value`` must be > 0 (>= 0 with ``allow_zero``).

    Raises:
        ValueError: It is not; the message names ``key`` (the YAML key, e.g. ``d4pg.policy_lr``).
    """
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{key}={value!r} must be {'>= 0' if allow_zero else '> 0'}")


def check_widths(key: str, widths: tuple[int, ...]) -> None:
    """A settings check: ``widths`` must be a non-empty list of positive layer widths (ValueError naming ``key``)."""
    if not widths or any(w <= 0 for w in widths):
        raise ValueError(f"{key}={list(widths)} must be a non-empty list of positive widths")


class Algorithm(abc.ABC):
    """One learning algorithm. Subclasses set the class attributes and implement the methods; its package exports
    an instance as ``ALGORITHM`` (how :mod:`actorq.algorithms` finds it)."""

    name: ClassVar[str]
    """The ``algorithm:`` value of a config."""
    discrete: ClassVar[bool]
    """True when it learns discrete actions (integer action, policy outputs one value per action)."""
    summary: ClassVar[str]
    """One line for help texts and error messages."""
    section: ClassVar[type]
    """Its config section: a frozen dataclass, every field with a default and a docstring, holding only the settings
    it uses besides the shared sections. In YAML it is the section named after the algorithm (``d4pg:``); the
    loaded config carries it as ``config.settings`` (read it with :meth:`settings`)."""
    legacy_keys: ClassVar[dict[str, str]] = {}
    """Keys where configs written before algorithms had their own section kept its settings (``learner.policy_lr``)
    -> the section's field they now are (``policy_lr``): recorded runs' ``config.yaml`` still load."""
    network: ClassVar[PolicyNetwork]
    """The actor policy's architecture."""
    learner_builder: ClassVar[Ref]
    """``build(config, environment_spec, replay_address, counter, results, checkpoint_dir) -> AcmeLearner``
    (TensorFlow; resolved only in the learner; every builder takes exactly these argument names)."""
    tf_networks: ClassVar[Ref]
    """The TF network builder the learner builder uses (Acme's networks with stable variable names)."""
    torch_policy: ClassVar[Ref]
    """``make(obs_dim, out_dim, layers, action_low, action_high) -> torch.nn.Module``, the fp32 twin of the TF
    policy (torch; resolved only by actors); called with ``torso=`` (a conv :class:`Torso`) too when the
    algorithm has one in :attr:`torsos`."""
    verification_bounds: ClassVar[dict[str, float]]
    """Largest error :meth:`verify` accepts per precision (``fp32``, ``fp16``, ``int8``)."""
    checkpoint_policy: ClassVar[str] = "policy"
    """The name its learner builder saves the online policy (or Q-network) under in the learner checkpoint (a key of
    the ``objects_to_save`` it gives :class:`actorq.learners.AcmeLearner`): where ``actorq evaluate`` and ``actorq
    export`` read a trained run's weights (:mod:`actorq.learners.checkpoint`)."""
    torsos: ClassVar[tuple[str, ...]] = (MLP,)
    """The torsos (:mod:`actorq.algorithms.torso`) its networks can be built with, the default first; ``network.
    torso`` must be one of them or ``auto``. An algorithm with a conv torso builds it in its TF networks (Sonnet
    ``conv_{i}`` modules under its scope, as :func:`~actorq.algorithms.torso.conv_rows` names them) and its torch
    policy (``conv.{i}`` modules), and its ``torch_policy`` factory takes ``torso=``."""

    def torso(self, requested: str, obs_shape: tuple[int, ...], obs_dtype: Any) -> Torso:
        """The torso for ``network.torso=requested`` on this task's observations (see
        :func:`actorq.algorithms.torso.resolve`; ValueError naming ``network.torso`` when it can't be built)."""
        return resolve(requested, obs_shape, obs_dtype, self.name, self.torsos)

    def torso_rows(self, torso: Torso, prefix: str) -> list[tuple[str, str, bool]]:
        """The TF -> torch mapping rows of the torso's variables (none for ``mlp``), before :meth:`mapping_rows`.

        Raises:
            ValueError: The algorithm has no such torso.
        """
        if torso.kind not in self.torsos:
            raise ValueError(
                f"algorithm {self.name} has no {torso.kind} torso (it has: {', '.join(self.torsos)})"
            )
        return conv_rows(torso, prefix)

    def settings(self, config: Any) -> Any:
        """This algorithm's section (:attr:`section`) of an experiment config; its defaults when the config has none.

        Raises:
            ValueError: The config carries another algorithm's section.
        """
        settings = getattr(config, "settings", None)
        if settings is None:
            return self.section()
        if not isinstance(settings, self.section):
            raise ValueError(
                f"the config's settings are a {type(settings).__name__}, not {self.name}'s {self.section.__name__}"
            )
        return settings

    @abc.abstractmethod
    def validate(self, settings: Any) -> None:
        """Check the section's values (ranges, orderings) before any process starts.

        Raises:
            ValueError: A value is invalid; the message names its YAML key (``<name>.<field>``) and what is allowed.
        """

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
