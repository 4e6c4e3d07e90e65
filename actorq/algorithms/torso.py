"""The policy's torso: what turns an observation into the vector its dense layers read (numpy only, level 0).

``network.torso`` (:data:`TORSOS`) picks it per run; :func:`resolve` turns the choice and the task's observation
shape into a :class:`Torso` that the TF learner (an algorithm's ``tf_*`` networks), the TF -> torch mapping and
the actors' kernels all read, so both sides build the same function from one description:

* ``mlp``: the observation, flattened (row-major), is the dense layers' input. Every algorithm has it.
* ``nature_cnn``: the Nature DQN CNN (Mnih et al. 2015; Acme's ``AtariTorso`` shape, with VALID padding):
  conv 32 8x8 stride 4, conv 64 4x4 stride 2, conv 64 3x3 stride 1, each followed by relu, flattened in
  height-width-channel order (TensorFlow's NHWC); the dense layers (``network.policy_layers``, [512] for the
  Nature network) and the head follow. On 84x84 frames the flattened features are 7 x 7 x 64 = 3136.
* ``auto``: ``nature_cnn`` for image observations (rank 3, both spatial sides at least :data:`MIN_IMAGE_SIDE`)
  when the algorithm has a conv torso, ``mlp`` otherwise.

Images arrive in the environment's layout, ``HWC`` (``[height, width, channels]``, Acme's ``AtariWrapper``) or
``CHW`` (``[channels, height, width]``, Gymnasium's ``FrameStackObservation`` on grayscale frames): the channel
axis is the smaller of the first and last (:func:`channels_first`; a tie is HWC). Both networks transpose CHW to
HWC first and compute in NHWC (TensorFlow's only CPU conv layout; torch convs read the same memory as
channels-last). ``uint8`` observations are cast to float32 and divided by 255 inside the network, on both sides,
so replay and weight messages carry raw frames and the actors quantize nothing extra.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

TORSOS = ("auto", "mlp", "nature_cnn")
"""Choices of ``network.torso``."""

MLP = "mlp"
NATURE_CNN = "nature_cnn"
IMAGE_RANK = 3
"""Observations of this rank are images (HWC or CHW)."""
PIXEL_SCALE = 255.0
"""uint8 observations are divided by this inside the network (both sides, float32 division)."""


@dataclass(frozen=True)
class ConvLayer:
    """One square convolution (VALID padding) followed by relu."""

    channels: int
    """Output channels."""
    kernel: int
    """Kernel height and width."""
    stride: int
    """Stride in both directions."""


NATURE_CNN_LAYERS = (ConvLayer(32, 8, 4), ConvLayer(64, 4, 2), ConvLayer(64, 3, 1))
"""The Nature DQN convolutions."""


def _side_after(side: int, layers: tuple[ConvLayer, ...]) -> int:
    for layer in layers:
        side = (side - layer.kernel) // layer.stride + 1
    return side


MIN_IMAGE_SIDE = next(s for s in range(1, 1000) if _side_after(s, NATURE_CNN_LAYERS) >= 1)
"""Smallest height and width the Nature CNN's three VALID convolutions leave at least one output for (36)."""


def channels_first(shape: tuple[int, ...]) -> bool:
    """True when a rank-3 image shape is CHW: its first axis is smaller than its last (ties are HWC)."""
    return len(shape) == IMAGE_RANK and shape[0] < shape[-1]


@dataclass(frozen=True)
class Torso:
    """The torso resolved for one observation shape and dtype.

    Attributes:
        kind: ``mlp`` or ``nature_cnn``.
        obs_shape: The observation's shape as the environment gives it (HWC or CHW images).
        pixels: The observations are ``uint8``: the network divides them by :data:`PIXEL_SCALE` (conv torsos).
    """

    kind: str
    obs_shape: tuple[int, ...]
    pixels: bool = False

    def __post_init__(self) -> None:
        if self.kind not in (MLP, NATURE_CNN):
            raise ValueError(f"torso {self.kind!r} is not one of {MLP}, {NATURE_CNN}")
        object.__setattr__(self, "obs_shape", tuple(int(d) for d in self.obs_shape))
        if self.kind == NATURE_CNN:
            reason = image_problem(self.obs_shape)
            if reason:
                raise ValueError(reason)

    @property
    def is_conv(self) -> bool:
        return self.kind != MLP

    @property
    def obs_dim(self) -> int:
        """Elements in one observation."""
        return math.prod(self.obs_shape)

    @property
    def conv(self) -> tuple[ConvLayer, ...]:
        """The convolutions (none for ``mlp``)."""
        return NATURE_CNN_LAYERS if self.kind == NATURE_CNN else ()

    @property
    def channels_first(self) -> bool:
        """The environment's images are CHW (the networks transpose them to HWC first)."""
        return self.is_conv and channels_first(self.obs_shape)

    @property
    def hwc(self) -> tuple[int, int, int]:
        """``(height, width, channels)`` of a conv torso's input."""
        if not self.is_conv:
            raise ValueError("an mlp torso has no image")
        s = self.obs_shape
        return (s[1], s[2], s[0]) if self.channels_first else (s[0], s[1], s[2])

    def conv_geometry(self) -> list[tuple[int, int, int, int, int]]:
        """Per convolution: ``(in_channels, height_in, width_in, height_out, width_out)``."""
        if not self.is_conv:
            return []
        h, w, c = self.hwc
        out = []
        for layer in self.conv:
            ho, wo = (h - layer.kernel) // layer.stride + 1, (w - layer.kernel) // layer.stride + 1
            out.append((c, h, w, ho, wo))
            h, w, c = ho, wo, layer.channels
        return out

    def conv_weight_shapes(self) -> list[tuple[int, int, int, int]]:
        """torch's ``[out, in, kh, kw]`` shape of each convolution's weight."""
        return [
            (layer.channels, geometry[0], layer.kernel, layer.kernel)
            for layer, geometry in zip(self.conv, self.conv_geometry(), strict=True)
        ]

    @property
    def features(self) -> int:
        """Width of the vector the first dense layer reads: the flattened observation, or the last conv's
        ``height * width * channels``."""
        if not self.is_conv:
            return self.obs_dim
        _, _, _, ho, wo = self.conv_geometry()[-1]
        return ho * wo * self.conv[-1].channels

    def multiply_adds(self) -> list[int]:
        """Multiply-adds of each convolution for one observation (what a conv layer's forward computes)."""
        return [
            ho * wo * layer.channels * c * layer.kernel * layer.kernel
            for layer, (c, _, _, ho, wo) in zip(self.conv, self.conv_geometry(), strict=True)
        ]


def image_problem(shape: tuple[int, ...]) -> str | None:
    """Why the Nature CNN can't read observations of ``shape`` (None when it can)."""
    if len(shape) != IMAGE_RANK:
        return (
            f"the nature_cnn torso reads images (rank {IMAGE_RANK}, HWC or CHW); this task's observations have "
            f"shape {tuple(shape)}"
        )
    side = min(shape[1:]) if channels_first(shape) else min(shape[:2])
    if side < MIN_IMAGE_SIDE:
        return (
            f"the nature_cnn torso needs images of at least {MIN_IMAGE_SIDE}x{MIN_IMAGE_SIDE} pixels (its three "
            f"VALID convolutions); this task's observations are {tuple(shape)}"
        )
    return None


def resolve(
    requested: str, obs_shape: tuple[int, ...], obs_dtype: Any, algorithm: str, supported: tuple[str, ...]
) -> Torso:
    """The torso for ``network.torso=requested`` on observations of ``obs_shape`` and ``obs_dtype``.

    Args:
        requested: ``auto``, ``mlp`` or ``nature_cnn``.
        obs_shape: The environment's observation shape.
        obs_dtype: Its dtype (anything ``numpy.dtype`` takes); ``uint8`` observations are pixels.
        algorithm: The algorithm's name (for messages).
        supported: The torsos the algorithm has (``Algorithm.torsos``).

    Raises:
        ValueError: An unknown choice, a torso the algorithm does not have, or observations it can't read; the
            message names ``network.torso``, the shape and what to use instead.
    """
    shape = tuple(int(d) for d in obs_shape)
    pixels = np.dtype(obs_dtype) == np.uint8
    if requested not in TORSOS:
        raise ValueError(f"network.torso={requested!r} is not valid; choose one of: {', '.join(TORSOS)}")
    if requested == "auto":
        conv = NATURE_CNN in supported and image_problem(shape) is None
        return Torso(NATURE_CNN if conv else MLP, shape, pixels)
    if requested not in supported:
        raise ValueError(
            f"network.torso={requested}: algorithm {algorithm} has no {requested} torso (it has: "
            f"{', '.join(supported)}); use network.torso=auto or {supported[0]}"
        )
    if requested == NATURE_CNN and (reason := image_problem(shape)):
        raise ValueError(f"network.torso={requested}: {reason}; use network.torso=auto or mlp")
    return Torso(requested, shape, pixels)


def conv_rows(torso: Torso, prefix: str) -> list[tuple[str, str, bool]]:
    """The TF -> torch mapping rows of a conv torso's variables: Sonnet ``{prefix}conv_{i}/w`` ``[kh, kw, in,
    out]`` -> torch ``conv.{i}.weight`` ``[out, in, kh, kw]`` (transposed), ``conv_{i}/b`` -> ``conv.{i}.bias``."""
    rows: list[tuple[str, str, bool]] = []
    for i in range(len(torso.conv)):
        rows += [
            (f"{prefix}conv_{i}/w", f"conv.{i}.weight", True),
            (f"{prefix}conv_{i}/b", f"conv.{i}.bias", False),
        ]
    return rows
