"""Frames of a task for a video (``actorq evaluate --video``), headless: Gymnasium's ``rgb_array`` render mode,
dm_control's ``physics.render`` through MuJoCo's EGL backend when there is no display.

Training never renders (:mod:`actorq.envs` sets ``MUJOCO_GL=disable`` without a display); a process that records
calls :func:`enable_rendering` before dm_control loads and makes its environment with :func:`render_config`'s
settings.
"""

from __future__ import annotations

import dataclasses
import os
import sys

from actorq.config import EnvConfig
from actorq.errors import UsageError

HEADLESS_GL = "egl"
"""The MuJoCo GL backend chosen without a display: Mesa's EGL renders in software on a machine without a GPU or X
server (``osmesa`` needs libosmesa, often not installed)."""
FRAME_SIZE = (240, 320)
"""Height and width of a dm_control frame (camera 0); Gymnasium tasks render at their own size."""
RGB_ARRAY = "rgb_array"


class RenderingError(UsageError):
    """This process cannot render the task's frames (rendering disabled, a library missing): exit 2."""


def enable_rendering(env: EnvConfig) -> str:
    """Choose MuJoCo's GL backend (and pygame's drivers) for rendering ``env`` headless; returns ``MUJOCO_GL``.

    ``MUJOCO_GL`` set to a backend by the user wins; unset or ``disable`` (what training sets without a display)
    becomes :data:`HEADLESS_GL`.

    Raises:
        RenderingError: A dm_control task, and dm_control was already loaded here with rendering disabled.
    """
    if os.environ.get("MUJOCO_GL", "disable") == "disable":
        if "dm_control._render" in sys.modules and env.suite == "dmc":
            raise RenderingError(
                "dm_control was loaded with rendering disabled: set MUJOCO_GL=egl (or osmesa) to record video"
            )
        os.environ["MUJOCO_GL"] = (
            HEADLESS_GL  # Gymnasium's MuJoCo tasks read it when they make their renderer
        )
    if not os.environ.get(
        "DISPLAY"
    ):  # pygame (Gymnasium's classic-control renderer): no window, no sound card
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    return os.environ["MUJOCO_GL"]


def render_config(env: EnvConfig) -> EnvConfig:
    """``env`` made to render frames: Gymnasium's ``render_mode=rgb_array`` (dm_control renders any task)."""
    if env.suite != "gym":
        return env
    return dataclasses.replace(env, make_kwargs={**env.make_kwargs, "render_mode": RGB_ARRAY})
