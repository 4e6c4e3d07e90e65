"""The standard Gymnasium wrappers a config can name in ``env.wrappers``, applied in the listed order.

Each entry is ``name`` or ``name:argument`` (``frame_stack:4``, ``resize:84x84``). They wrap the task as Gymnasium
made it (after its own preprocessing: Atari's for ALE ids, :mod:`actorq.envs.gym_tasks`), in every role's
process; a training-only wrapper (``clip_reward``) is left out of the evaluator's environments, so evaluations report
the task's own returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actorq.envs.errors import UnknownTaskError


@dataclass(frozen=True)
class NamedWrapper:
    """One wrapper a config can name."""

    summary: str
    """What it does (``actorq tasks`` and error messages show it)."""
    build: Callable[[Any, str], Any]
    """``build(env, argument) -> wrapped env`` (``argument`` is "" when it takes none)."""
    argument: str = ""
    """What its argument is (e.g. ``N``); empty when it takes none."""
    training_only: bool = False
    """Left out of the evaluator's environments."""


def _positive(argument: str, what: str) -> int:
    try:
        value = int(argument)
    except ValueError:
        value = 0
    if value <= 0:
        raise UnknownTaskError(f"{what} needs a positive integer, got {argument!r}")
    return value


def _size(argument: str) -> tuple[int, int]:
    height, _, width = argument.lower().partition("x")
    return _positive(height, "resize:HxW"), _positive(width or height, "resize:HxW")


def _frame_stack(env: Any, argument: str) -> Any:
    from gymnasium.wrappers import FrameStackObservation

    return FrameStackObservation(env, _positive(argument, "frame_stack:N"))


def _resize(env: Any, argument: str) -> Any:
    from gymnasium.wrappers import ResizeObservation

    return ResizeObservation(env, _size(argument))


def _simple(name: str, **kwargs: Any) -> Callable[[Any, str], Any]:
    def build(env: Any, _argument: str) -> Any:
        import gymnasium.wrappers

        return getattr(gymnasium.wrappers, name)(env, **kwargs)

    return build


WRAPPERS: dict[str, NamedWrapper] = {
    "flatten": NamedWrapper(
        "the observation flattened into a vector (FlattenObservation)", _simple("FlattenObservation")
    ),
    "grayscale": NamedWrapper(
        "RGB frames to one gray channel, HxWx3 -> HxW (GrayscaleObservation)",
        _simple("GrayscaleObservation", keep_dim=False),
    ),
    "resize": NamedWrapper("frames resized to H x W pixels (ResizeObservation)", _resize, "HxW"),
    "frame_stack": NamedWrapper(
        "the last N observations stacked on a new first axis (FrameStackObservation)", _frame_stack, "N"
    ),
    "clip_reward": NamedWrapper(
        "rewards clipped to [-1, 1] while training (ClipReward); evaluations report unclipped returns",
        _simple("ClipReward", min_reward=-1.0, max_reward=1.0),
        training_only=True,
    ),
    "clip_action": NamedWrapper(
        "actions clipped into the action space's bounds (ClipAction)", _simple("ClipAction")
    ),
    "rescale_action": NamedWrapper(
        "the policy acts in [-1, 1], rescaled into the action space's bounds (RescaleAction)",
        _simple("RescaleAction", min_action=-1.0, max_action=1.0),
    ),
    "time_aware": NamedWrapper(
        "the elapsed fraction of the episode's time limit appended to the observation (TimeAwareObservation)",
        _simple("TimeAwareObservation"),
    ),
}
"""The wrappers ``env.wrappers`` may name."""


def describe() -> list[str]:
    """One line per wrapper: its name (with its argument) and what it does."""
    return [
        f"{name}{':' + w.argument if w.argument else ''}: {w.summary}" for name, w in sorted(WRAPPERS.items())
    ]


def parse(entries: tuple[str, ...]) -> list[tuple[NamedWrapper, str]]:
    """The wrappers ``env.wrappers`` names, with their arguments, checked.

    Raises:
        UnknownTaskError: An unknown name, a missing or unexpected argument, or a bad one.
    """
    out = []
    for entry in entries:
        name, colon, argument = str(entry).partition(":")
        wrapper = WRAPPERS.get(name.strip())
        if wrapper is None:
            raise UnknownTaskError(
                f"env.wrappers: unknown wrapper {entry!r}; choose from: {'; '.join(describe())}"
            )
        if bool(wrapper.argument) != bool(colon and argument):
            form = f"{name}:{wrapper.argument}" if wrapper.argument else name
            raise UnknownTaskError(f"env.wrappers: {entry!r} must be written {form}")
        if name == "resize":
            _size(argument)
        elif wrapper.argument:
            _positive(argument, f"{name}:{wrapper.argument}")
        out.append((wrapper, argument.strip()))
    return out


def apply(env: Any, entries: tuple[str, ...], evaluation: bool) -> Any:
    """``env`` wrapped by ``entries`` in order (training-only ones left out when ``evaluation``)."""
    for wrapper, argument in parse(entries):
        if not (evaluation and wrapper.training_only):
            env = wrapper.build(env, argument)
    return env
