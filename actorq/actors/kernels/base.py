"""The interface every actor inference kernel implements, and the message-to-tensor helpers they share.

A kernel is one way of computing the policy network (:mod:`actorq.networks.torch_nets`) at one precision:
``prepare`` turns a weight message's tensors into whatever the kernel runs on (copies, casts, quantization,
prepacking, a new inference session) without touching the live weights, ``install`` swaps that in (a reference
swap), ``forward`` maps ``[B, obs_dim]`` float32 observations (``[B, *obs_shape]`` images for a conv torso, ``uint8``
frames for pixels: :meth:`PolicySpec.input_dtype`) to ``[B, out_dim]`` float32 outputs. Kernels are not
trusted: :mod:`actorq.actors.kernels.verify` checks each one against the fp32 reference on the machine that runs
it before an actor may use it.
"""

from __future__ import annotations

import abc
import queue
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from actorq import algorithms
from actorq.algorithms import Algorithm
from actorq.algorithms.torso import MLP, Torso
from actorq.networks.mapping import torch_state_shapes
from actorq.networks.torch_nets import conv_prefixes, linear_prefixes, quantize_rows
from actorq.quantize.message import EncodedTensor


@dataclass(frozen=True)
class PolicySpec:
    """The policy network a kernel computes.

    Attributes:
        algorithm: A registered algorithm's name (``"d4pg"``: action in bounds; ``"dqn"``: Q-values).
        obs_dim: Flat observation size.
        out_dim: Action dimensions (D4PG) or number of actions (DQN).
        layers: Hidden widths.
        action_low: Lower action bounds ``[out_dim]`` (used by policies with a bounded output).
        action_high: Upper action bounds ``[out_dim]``.
        threads: Intra-op threads the kernel may use.
        torso: What reads the observation (:mod:`actorq.algorithms.torso`); :meth:`build` makes it ``mlp`` on the
            flat observation when none is given.
    """

    algorithm: str
    obs_dim: int
    out_dim: int
    layers: tuple[int, ...]
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()
    threads: int = 1
    torso: Torso | None = None

    @classmethod
    def build(
        cls,
        algorithm: str,
        obs_dim: int,
        out_dim: int,
        layers: tuple[int, ...],
        action_low: float | np.ndarray | None = None,
        action_high: float | np.ndarray | None = None,
        threads: int = 1,
        torso: Torso | None = None,
    ) -> PolicySpec:
        """A spec with the bounds broadcast to ``[out_dim]`` (default [-1, 1]) and validated.

        Raises:
            ValueError: ``obs_dim`` is not the torso's observation size, or the algorithm has no such torso.
        """
        algo = algorithms.get(algorithm)  # an unknown name fails here, listing the registered ones
        torso = torso or Torso(MLP, (int(obs_dim),))
        if torso.obs_dim != int(obs_dim) or torso.kind not in algo.torsos:
            raise ValueError(
                f"{algorithm} has no {torso.kind} torso on {torso.obs_shape} for obs_dim {obs_dim}"
            )
        low = np.broadcast_to(np.asarray(-1.0 if action_low is None else action_low, np.float64), (out_dim,))
        high = np.broadcast_to(
            np.asarray(1.0 if action_high is None else action_high, np.float64), (out_dim,)
        )
        return cls(
            algorithm,
            int(obs_dim),
            int(out_dim),
            tuple(int(w) for w in layers),
            tuple(float(v) for v in low),
            tuple(float(v) for v in high),
            int(threads),
            torso,
        )

    @property
    def image(self) -> Torso | None:
        """The conv torso, None for an MLP policy."""
        return self.torso if self.torso is not None and self.torso.is_conv else None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """One observation's shape as the kernels take it: ``(obs_dim,)``, or the image's for a conv torso."""
        return self.image.obs_shape if self.image is not None else (self.obs_dim,)

    @property
    def input_dtype(self) -> np.dtype:
        """The kernels' input dtype: ``uint8`` for a conv torso on pixels, else float32."""
        return np.dtype(np.uint8 if self.image is not None and self.image.pixels else np.float32)

    def float_model(self) -> nn.Module:
        """The fp32 torch network (eval mode, no gradients)."""
        make = self.algo.torch_policy.load()
        bounds = np.asarray(self.action_low), np.asarray(self.action_high)
        extra = {"torso": self.image} if self.image is not None else {}
        model: nn.Module = make(self.obs_dim, self.out_dim, self.layers, *bounds, **extra)
        return model.eval().requires_grad_(False)

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        """``{torch key: shape}`` of the network (:func:`actorq.networks.mapping.torch_state_shapes`)."""
        return torch_state_shapes(self.algorithm, self.obs_dim, self.out_dim, self.layers, self.torso)

    def weight_shapes(self) -> list[tuple[str, tuple[int, ...]]]:
        """``(layer name, torch weight shape)`` of every conv and Linear layer, in network order."""
        shapes = self.state_shapes()
        return [(p, shapes[f"{p}.weight"]) for p in conv_names(self) + prefixes(self)]

    @property
    def algo(self) -> Algorithm:
        """The algorithm module's description (architecture, verification rule)."""
        return algorithms.get(self.algorithm)

    @property
    def action_range(self) -> np.ndarray:
        """``high - low`` per action dimension (D4PG errors are measured relative to it)."""
        return np.asarray(self.action_high, np.float64) - np.asarray(self.action_low, np.float64)

    def weight_count(self) -> int:
        """Number of conv and Linear weights (what a batch-1 forward has to read)."""
        return sum(int(np.prod(shape)) for _, shape in self.weight_shapes())


class Kernel(abc.ABC):
    """One way of computing a :class:`PolicySpec`'s network. Subclasses set the class attributes.

    Args:
        spec: The network.
    """

    name: ClassVar[str]
    """``precision/kernel``, e.g. ``int8/fbgemm``."""
    prepare_off_thread: ClassVar[bool] = False
    """True when ``prepare`` is dear (prepacking, a new session): actors then prepare on their updater thread."""

    def __init__(self, spec: PolicySpec):
        self.spec = spec

    @property
    def precision(self) -> str:
        return self.name.split("/", 1)[0]

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this machine or installation can't build this kernel (None when it can)."""
        return None

    @classmethod
    def inapplicable(cls, spec: PolicySpec) -> str | None:
        """Why this kernel is no candidate for ``spec``'s network (None when it is): a kernel that differs from
        another only in how it computes some kind of layer is left out of networks without such layers."""
        return None

    @abc.abstractmethod
    def prepare(self, tensors: Mapping[str, EncodedTensor]) -> Any:
        """Everything ``install`` needs, built from a validated message's tensors; never touches live weights."""

    @abc.abstractmethod
    def install(self, payload: Any) -> None:
        """Swap a prepared payload in (cheap; the caller holds the policy's lock)."""

    @abc.abstractmethod
    def forward(self, x: np.ndarray) -> np.ndarray:
        """``[B, obs_dim]`` C-contiguous float32 -> ``[B, out_dim]`` float32."""

    @property
    def module(self) -> nn.Module | None:
        """The torch module when the kernel is a torch model (tests and diagnostics), else None."""
        return None


_RETIRED: queue.SimpleQueue = queue.SimpleQueue()
_RETIRER: list[threading.Thread] = []
_RETIRER_LOCK = threading.Lock()


def _drop_forever() -> None:
    while True:
        _RETIRED.get()  # dropped at once: the last reference dies, and its memory is freed, on this thread


def retire(payload: Any) -> None:
    """Release replaced weights on a background thread: freeing a 34 MB session or packed weights takes ~1 ms
    that the acting thread should not pay inside ``install``."""
    with _RETIRER_LOCK:
        if not _RETIRER:
            thread = threading.Thread(target=_drop_forever, name="retired-weights", daemon=True)
            thread.start()
            _RETIRER.append(thread)
    _RETIRED.put(payload)


def float32(t: EncodedTensor) -> np.ndarray:
    """A float32 array owned by no one else: f32 data are views into the message buffer, so they are copied."""
    if t.encoding == "f32":
        return np.array(t.data, dtype=np.float32, order="C", copy=True)
    return np.ascontiguousarray(t.to_float32(), dtype=np.float32)  # fresh: cast or dequantized


def float16(t: EncodedTensor) -> np.ndarray:
    """The tensor's values as float16 (f16 messages as they travelled)."""
    if t.encoding == "f16":
        return np.array(t.data, dtype=np.float16, order="C", copy=True)
    return t.to_float32().astype(np.float16, order="C")


def int8_codes(t: EncodedTensor) -> tuple[np.ndarray, np.ndarray]:
    """Per-row int8 codes ``[out, in]`` (a convolution's ``[out, in, kh, kw]``: per output channel) in [-127, 127]
    and float32 scales ``[out]`` for a weight tensor.

    Symmetric codes of <= 8 bits along axis 0 (or per tensor) are exactly representable as int8 codes with their
    own scales, so they are used as they are: no dequantize/requantize round trip, no added error. Anything
    else (f32/f16 messages) is quantized per row here (``w ~= scale[:, None] * codes``).
    """
    out_features = t.shape[0]
    if t.encoding == "q" and t.bits <= 8 and t.axis in (0, None) and t.scale is not None:
        zero = t.zero_point
        if zero is None or not np.any(zero):
            codes = np.ascontiguousarray(t.data.astype(np.int8, copy=True))
            scale = np.broadcast_to(np.asarray(t.scale, np.float32).reshape(-1), (out_features,)).copy()
            return codes, scale
    codes_t, scale_t = quantize_rows(torch.from_numpy(float32(t).reshape(out_features, -1)))
    return codes_t.numpy().reshape(t.shape), scale_t.numpy()


def conv_matrix(t: EncodedTensor) -> EncodedTensor:
    """A ``[out, in, kh, kw]`` conv weight as the ``[out, kh * kw * in]`` matrix that
    :class:`~actorq.networks.torch_nets.Im2colConv` multiplies: the same values (codes and per-output-channel
    scales as they travelled), the patch elements in height-width-channel order."""
    out = t.shape[0]
    data = np.ascontiguousarray(np.asarray(t.data).transpose(0, 2, 3, 1).reshape(out, -1))
    return EncodedTensor(t.name, tuple(data.shape), t.encoding, data, t.bits, t.scale, t.zero_point, t.axis)


def prefixes(spec: PolicySpec) -> list[str]:
    """The Linear layers' names in network order (``torso.0`` ... ``head``)."""
    return [f"torso.{i}" for i in range(len(spec.layers))] + ["head"]


def conv_names(spec: PolicySpec) -> list[str]:
    """The convolutions' names in network order (``conv.0`` ...; none for an MLP policy)."""
    return [f"conv.{i}" for i in range(len(spec.image.conv))] if spec.image is not None else []


def check_prefixes(spec: PolicySpec, model: nn.Module) -> list[str]:
    """:func:`prefixes`, asserted equal to the torch model's own Linear names (one source of layer names)."""
    names = linear_prefixes(model)
    if names != prefixes(spec):
        raise AssertionError(f"layer names {names} differ from {prefixes(spec)}")
    return names


def check_conv_prefixes(spec: PolicySpec, model: nn.Module) -> list[str]:
    """:func:`conv_names`, asserted equal to the torch model's own convolutions' names."""
    names = conv_prefixes(model)
    if names != conv_names(spec):
        raise AssertionError(f"conv names {names} differ from {conv_names(spec)}")
    return names
