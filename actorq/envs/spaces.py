"""What ActorQ makes of a Gymnasium task's spaces: the observation it passes on, and the kind of action it takes.

Observations (:func:`observation_layout`):

* a ``Box`` of ``uint8`` or ``bool`` (images: HWC or CHW frames, frame stacks, MinAtar's channels) keeps its shape
  and travels as ``uint8`` through actors, adders and replay; the learner and the actors' policies cast it;
* any other ``Box``, of any shape, becomes a flat ``float32`` vector (C order);
* ``Discrete``, ``MultiDiscrete``, ``MultiBinary``, ``Dict`` and ``Tuple`` observations become a flat ``float32``
  vector in Gymnasium's ``spaces.flatten`` order: a ``Dict``'s entries in its key order (sorted by key unless it was
  built from an ordered mapping), a ``Tuple``'s in position order, each flattened in turn (a ``Discrete`` one-hot, a
  ``Box`` in C order, nested ``Dict``/``Tuple`` the same way);
* anything else (``Text``, ``Graph``, ``Sequence``, ``OneOf``: no fixed size) is refused.

Actions (:func:`action_kind`): ``Discrete`` is ``discrete`` (DQN), a ``Box`` with finite bounds is ``continuous``
(D4PG, DDPG); anything else is refused. The algorithms that take each kind come from :mod:`actorq.algorithms`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from actorq.envs.errors import UnsupportedSpaceError

FRAME_DTYPES = (np.dtype(np.uint8), np.dtype(np.bool_))
"""Box observation dtypes kept as ``uint8`` frames of their own shape (everything else is a float32 vector)."""


@dataclass(frozen=True)
class ObservationLayout:
    """How one task's observations are passed on."""

    shape: tuple[int, ...]
    """Shape of each observation ActorQ passes on."""
    dtype: np.dtype
    """``uint8`` (frames) or ``float32`` (vectors)."""
    convert: Callable[[Any], np.ndarray]
    """The environment's observation -> an array of ``shape`` and ``dtype``."""


def _frames(shape: tuple[int, ...]) -> Callable[[Any], np.ndarray]:
    def convert(obs: Any) -> np.ndarray:
        return np.asarray(obs).astype(np.uint8, copy=False).reshape(shape)

    return convert


def _vector(obs: Any) -> np.ndarray:
    return np.asarray(obs, dtype=np.float32).reshape(-1)


def observation_layout(space: Any) -> ObservationLayout:
    """The layout of observations from ``space`` (a ``gymnasium.spaces.Space``).

    Raises:
        UnsupportedSpaceError: The space has no fixed-size array form.
    """
    from gymnasium import spaces

    if isinstance(space, spaces.Box):
        if space.shape is None or int(np.prod(space.shape)) == 0:
            raise UnsupportedSpaceError(f"observation space {space} is empty")
        if np.dtype(space.dtype) in FRAME_DTYPES:
            shape = tuple(int(d) for d in space.shape)
            return ObservationLayout(shape, np.dtype(np.uint8), _frames(shape))
        return ObservationLayout((int(np.prod(space.shape)),), np.dtype(np.float32), _vector)
    if isinstance(
        space, (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Dict, spaces.Tuple)
    ):
        try:
            flat = spaces.flatten_space(space)
        except (NotImplementedError, TypeError, ValueError) as exc:
            raise UnsupportedSpaceError(_refusal(space, f"it cannot be flattened: {exc}")) from None
        if not isinstance(flat, spaces.Box) or flat.shape is None or int(np.prod(flat.shape)) == 0:
            raise UnsupportedSpaceError(_refusal(space, "it has no fixed-size flat form"))
        size = int(np.prod(flat.shape))

        def convert(obs: Any) -> np.ndarray:
            return np.asarray(spaces.flatten(space, obs), dtype=np.float32).reshape(size)

        return ObservationLayout((size,), np.dtype(np.float32), convert)
    raise UnsupportedSpaceError(_refusal(space, "it has no fixed-size array form"))


def _refusal(space: Any, why: str) -> str:
    return (
        f"observation space {space} is not supported ({why}); ActorQ takes Box observations of any shape and "
        "Discrete, MultiDiscrete, MultiBinary, Dict and Tuple ones (flattened)"
    )


def action_kind(space: Any, takers: Callable[[str], list[str]]) -> str:
    """``discrete`` or ``continuous``: the kind of the action ``space`` (a ``gymnasium.spaces.Space``).

    ``takers(kind)`` names the algorithms that learn a kind (for the messages).

    Raises:
        UnsupportedSpaceError: Neither kind, or a Box without finite bounds.
    """
    from gymnasium import spaces

    taken = f"Discrete ({', '.join(takers('discrete'))}) or Box ({', '.join(takers('continuous'))})"
    if isinstance(space, spaces.Discrete):
        return "discrete"
    if isinstance(space, spaces.Box):
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise UnsupportedSpaceError(
                f"action space {space} has unbounded dimensions: the algorithms taking Box actions "
                f"({', '.join(takers('continuous'))}) scale their tanh output into finite bounds; give the "
                "environment bounded actions"
            )
        return "continuous"
    raise UnsupportedSpaceError(
        f"action space {space} is not supported: ActorQ's algorithms take {taken} actions"
    )
