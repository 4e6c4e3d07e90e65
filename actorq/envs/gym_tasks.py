"""Finding and making a Gymnasium task: any registered id (Gymnasium's own, ALE's, MinAtar's, a plugin's) or an import
path to a user's environment class or factory, with ALE's standard preprocessing.

``env.task`` is one of:

* a registered id (``Hopper-v4``, ``ALE/Pong-v5``, ``MinAtar/Breakout-v1``). Packages that register ids only when
  asked are asked first, by the id's namespace (:data:`REGISTRARS`: ``ALE/`` -> ale-py, ``MinAtar/`` -> minatar),
  then every one of them and every ``actorq.envs`` entry point of an installed distribution (a callable that
  registers ids, or a module whose import does) when the id is still unknown;
* ``module:attribute``: the module is imported (in every role's process: it must be importable there, installed or
  on ``PYTHONPATH``); ``attribute`` is a ``gymnasium.Env`` class or a factory returning one, called with
  ``env.make_kwargs``, or an id the module registers on import (Gymnasium's own ``module:id`` form).

Every ALE game with image observations gets the standard Atari preprocessing (as SB3's and Acme's Atari setups):
the game made with ``frameskip=1``, then Gymnasium's ``AtariPreprocessing`` (up to 30 no-op actions at reset, frame
skip 4 with the max over the last two frames, 84x84 grayscale, uint8) and ``FrameStackObservation(4)``, so an
observation is ``[4, 84, 84]`` uint8. While training, rewards are clipped to [-1, 1] and a lost life ends the
discounting (discount 0, the episode goes on: Acme's ``zero_discount_on_life_loss``); the evaluator's environments
do neither, so evaluations report the game's own score. Sticky actions stay the id's own (v5: 0.25).
"""

from __future__ import annotations

import difflib
import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actorq.envs import wrappers
from actorq.envs.errors import UnknownTaskError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "actorq.envs"
"""Entry-point group of a distribution that registers Gymnasium ids: each entry is a callable that registers them
(called once, without arguments) or a module whose import does."""

ATARI_FRAME_SKIP = 4
ATARI_SCREEN = 84
ATARI_NOOP_MAX = 30
ATARI_STACK = 4


def _register_ale() -> None:
    import ale_py
    import gymnasium

    gymnasium.register_envs(ale_py)  # importing ale_py registers its ids; this names why it is imported


def _register_minatar() -> None:
    import gymnasium
    from minatar.gym import register_envs

    if not any(name.startswith("MinAtar/") for name in gymnasium.registry):  # registering twice warns
        register_envs()


REGISTRARS: dict[str, tuple[str, Callable[[], None]]] = {
    "ALE": ("ale-py", _register_ale),
    "MinAtar": ("minatar", _register_minatar),
}
"""Packages of the pinned stack that register Gymnasium ids only when asked, by the namespace of their ids: how they
are asked (what ids they register is read from Gymnasium's registry afterwards)."""


def register_plugins(namespace: str | None = None) -> list[str]:
    """Have the packages that register ids on demand register them: the one for ``namespace``, or (None) all of
    them and every ``actorq.envs`` entry point. Returns a note for each that could not (not installed, failed)."""
    notes = []
    chosen = [namespace] if namespace in REGISTRARS else list(REGISTRARS)
    for name in chosen:
        package, register = REGISTRARS[name]
        try:
            register()
        except ImportError as exc:
            notes.append(
                f"{name}/ ids need {package}, which did not import ({exc}): pip install 'actorq[atari]'"
            )
    if namespace is None or namespace not in REGISTRARS:
        notes.extend(_entry_points())
    return notes


def _entry_points() -> list[str]:
    from importlib.metadata import entry_points

    notes = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = point.load()
            if callable(loaded):
                loaded()
        except Exception as exc:  # a broken plugin must not hide the others' ids
            notes.append(f"entry point {point.name} = {point.value} ({ENTRY_POINT_GROUP}) failed: {exc}")
    return notes


def gym_ids() -> tuple[list[str], list[str]]:
    """Every registered Gymnasium id once the plugins registered theirs (sorted), and the plugins' notes."""
    import gymnasium

    notes = register_plugins()
    return sorted(gymnasium.registry), notes


@dataclass(frozen=True)
class GymTask:
    """How to make one ``env.task``."""

    task: str
    """The ``env.task`` it was resolved from."""
    registered_id: str | None
    """The Gymnasium id it makes (None: a class or factory)."""
    factory: Callable[..., Any] | None
    """The class or factory (None: a registered id)."""

    @property
    def ale(self) -> bool:
        """An ALE game (its registered entry point is ale-py's)."""
        import gymnasium

        if self.registered_id is None:
            return False
        return str(gymnasium.spec(self.registered_id).entry_point).startswith("ale_py")


def resolve(task: str) -> GymTask:
    """The :class:`GymTask` an ``env.task`` names.

    Raises:
        UnknownTaskError: A module that does not import (named), an attribute it lacks, an unregistered id (with the
            nearest registered ones).
    """
    import gymnasium

    if ":" in task:
        module_name, _, attribute = task.partition(":")
        module = _import(module_name, task)
        if attribute in gymnasium.registry:
            return GymTask(task, attribute, None)
        target: Any = module
        for part in attribute.split("."):
            target = getattr(target, part, None)
        if target is None or not callable(target):
            raise UnknownTaskError(
                f"env.task={task!r}: module {module_name} has no environment class or factory {attribute!r}, and "
                f"{attribute!r} is not a Gymnasium id it registers"
            )
        return GymTask(task, None, target)
    notes: list[str] = []
    if task not in gymnasium.registry:
        namespace = task.split("/", 1)[0] if "/" in task else None
        notes = register_plugins(namespace)
        if task not in gymnasium.registry and namespace in REGISTRARS:
            notes = register_plugins()
    if task not in gymnasium.registry:
        near = difflib.get_close_matches(task, list(gymnasium.registry), n=5, cutoff=0.6)
        raise UnknownTaskError(
            f"env.task={task!r} is not a registered Gymnasium id"
            + (f" (nearest: {', '.join(near)})" if near else "")
            + "".join(f"; {note}" for note in notes)
            + "; `actorq tasks` lists the installed ones, and module:Class names your own environment"
        )
    return GymTask(task, task, None)


def _import(module_name: str, task: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UnknownTaskError(
                f"env.task={task!r}: no module named {exc.name!r}; install the package that provides "
                f"{module_name} or put its directory on PYTHONPATH (every role's process imports it)"
            ) from None
        raise UnknownTaskError(f"env.task={task!r}: importing {module_name} failed: {exc}") from None
    except Exception as exc:
        raise UnknownTaskError(
            f"env.task={task!r}: importing {module_name} raised {type(exc).__name__}: {exc}"
        ) from None


def make_gym(
    task: GymTask,
    make_kwargs: dict[str, Any],
    wrapper_names: tuple[str, ...],
    max_episode_steps: int,
    evaluation: bool,
) -> Any:
    """The Gymnasium environment of ``task``: made with ``make_kwargs``, ALE games preprocessed, the named
    ``wrappers`` applied, episodes truncated at ``max_episode_steps`` steps (0: the task's own limit)."""
    import gymnasium

    kwargs = dict(make_kwargs)
    outer_limit = max_episode_steps
    if task.registered_id is None:
        env = task.factory(**kwargs)
        if not isinstance(env, gymnasium.Env):
            raise UnknownTaskError(
                f"env.task={task.task!r} returned a {type(env).__name__}, not a gymnasium.Env"
            )
    else:
        image_atari = task.ale and _obs_type(task.registered_id, kwargs) in ("rgb", "grayscale")
        if image_atari:
            if "frameskip" in kwargs:
                raise UnknownTaskError(
                    f"env.make_kwargs.frameskip: ALE games skip {ATARI_FRAME_SKIP} frames in their standard "
                    "preprocessing (AtariPreprocessing); leave frameskip out"
                )
            kwargs["frameskip"] = 1
        elif max_episode_steps and not task.ale:
            kwargs["max_episode_steps"] = max_episode_steps  # replaces the id's own limit
            outer_limit = 0
        env = gymnasium.make(task.registered_id, **kwargs)
        if image_atari:
            env = atari_preprocessing(env)
        if task.ale and not evaluation:
            env = gymnasium.wrappers.ClipReward(env, -1.0, 1.0)
    env = wrappers.apply(env, wrapper_names, evaluation)
    if outer_limit:
        env = gymnasium.wrappers.TimeLimit(env, outer_limit)
    return env


def atari_preprocessing(env: Any) -> Any:
    """The standard Atari preprocessing of an ALE game made with ``frameskip=1``: ``[4, 84, 84]`` uint8 frames."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    env = AtariPreprocessing(
        env,
        noop_max=ATARI_NOOP_MAX,
        frame_skip=ATARI_FRAME_SKIP,
        screen_size=ATARI_SCREEN,
        terminal_on_life_loss=False,
        grayscale_obs=True,
        scale_obs=False,
    )
    return FrameStackObservation(env, ATARI_STACK)


def _obs_type(registered_id: str, kwargs: dict[str, Any]) -> str:
    import gymnasium

    return str(kwargs.get("obs_type", gymnasium.spec(registered_id).kwargs.get("obs_type", "rgb")))
