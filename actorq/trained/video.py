"""Recording an evaluation episode as an H.264 MP4 (imageio with imageio-ffmpeg's bundled ffmpeg; headless).

Frames come from the environment's own renderer (:meth:`render_frame`: gymnasium's ``rgb_array`` mode, dm_control's
``physics.render`` through MuJoCo's EGL backend without a display), one per step, written as they come (never held
in memory), in yuv420p so that browsers and common players play the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from actorq.errors import UsageError


class VideoError(UsageError):
    """The video cannot be written (no encoder installed, an unwritable path): ``error:``, exit 2."""


def check_video_path(path: str | Path) -> Path:
    """``path`` as an MP4 the command can write, checked before any episode is played.

    Raises:
        VideoError: Not ``.mp4``, its folder does not exist, or imageio-ffmpeg is not installed.
    """
    path = Path(path)
    if path.suffix.lower() != ".mp4":
        raise VideoError(f"--video {path}: write an .mp4 file")
    if not path.parent.is_dir():
        raise VideoError(f"--video {path}: the folder {path.parent} does not exist")
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise VideoError(
            "--video needs imageio-ffmpeg (and pygame for gymnasium's classic-control tasks): "
            "pip install -c requirements.lock '.[video]'"
        ) from None
    return path


class VideoRecorder:
    """Appends RGB frames to an MP4 at ``fps`` frames per second; :meth:`close` finishes the file."""

    def __init__(self, path: str | Path, fps: float):
        import imageio

        self.path = Path(path)
        self.frames = 0
        # macro_block_size=2: yuv420p needs even sides; larger blocks would rescale the frames.
        self._writer: Any = imageio.get_writer(
            str(self.path), fps=fps, codec="libx264", pixelformat="yuv420p", macro_block_size=2
        )

    def add(self, frame: np.ndarray) -> None:
        """One ``[H, W, 3]`` uint8 frame (odd sides are padded by one pixel)."""
        h, w = frame.shape[:2]
        if h % 2 or w % 2:
            frame = np.pad(frame, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
        self._writer.append_data(frame)
        self.frames += 1

    def close(self) -> None:
        self._writer.close()
