"""The actor's policy network at a precision, computed by a kernel verified on this machine, fed by weight messages.

Precisions: ``fp32``, ``fp16`` (fp16 weights), ``int8`` (int8 per-row weights and dynamically quantized int8
activations; LayerNorm, activations and the action rescaling stay float32), or ``auto`` (the fastest that
verifies; fp32 unless another is >= 3% faster). Each precision has several kernels
(:mod:`actorq.actors.kernels`: torch fp32, ONNX Runtime, fbgemm, x86, oneDNN, qnnpack, ``torch._int_mm``) whose
exactness depends on the CPU, so none is chosen by assumption: the policy verifies every candidate against fp32
on a probe with the real shapes and full-range codes, times the verified ones at the actor's batch size and
runs the fastest; it checks the choice again on the first real weight message and falls back to the next
verified kernel if that one fails. :attr:`ActorPolicy.selection` records the outcome.

Updating is split so that an updater thread can do the work off the acting thread: :meth:`prepare` builds
every new tensor (copies, casts, quantization, prepacking, a new session) without touching the live weights,
and :meth:`install` swaps references under a lock (microseconds). :meth:`apply` does both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch import nn

from actorq.actors.kernels import (
    Kernel,
    KernelVerificationError,
    PolicySpec,
    build_kernel,
    probe_inputs,
    select_kernel,
    verify,
)
from actorq.actors.kernels.verify import reference_outputs
from actorq.algorithms.torso import Torso
from actorq.quantize.codec import (
    EncodedTensor,
    MissingTensorError,
    ShapeMismatchError,
    UnknownTensorError,
    WeightMessage,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedWeights:
    """New weights built by :meth:`ActorPolicy.prepare`, ready for an O(1) :meth:`ActorPolicy.install`."""

    version: int
    learner_step: int
    comm_bits: int
    payload: Any
    """What the kernel's ``install`` takes."""
    owner: int = 0
    kernel: Kernel | None = None
    """A kernel to switch to (the first real message's verified kernel, already holding ``payload``)."""
    checks: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    """The first-message checks: ``{"kernel", "ok", "error", "reason"}`` each."""


class ActorPolicy:
    """The actor's policy network at one precision (fp32 included: the evaluator runs one), fed by weight messages.

    Args:
        algorithm: A registered algorithm's name (``"d4pg"``: action in bounds; ``"dqn"``: Q-values).
        obs_dim: Flat observation size.
        out_dim: Action dimensions (D4PG) or number of actions (DQN).
        layers: Hidden widths (must match the learner's).
        precision: ``"fp32"``, ``"fp16"``, ``"int8"`` or ``"auto"``.
        action_low: D4PG lower action bound(s) (scalar or ``[out_dim]``); default -1.
        action_high: D4PG upper action bound(s); default 1.
        threads: Intra-op threads (torch's setting is process-wide).
        kernel: ``"auto"``/None (verify, time, pick the fastest) or one kernel of ``precision`` (see
            :data:`actorq.config.KERNELS`), which must verify.
        batch: Rows per forward the actor will run (the timing and the check use it).
        use_cache: Reuse (and record) the kernel choice in the kernel cache.
        obs_shape: Shape of one observation as the environment gives it (default: the torso's, else
            ``(obs_dim,)``); for an MLP, frames (e.g. ``(10, 10, 4)`` uint8) are cast to float32 and flattened to
            ``obs_dim`` values before it, as the learner's networks do.
        torso: What reads the observation (:mod:`actorq.algorithms.torso`); None: an MLP on the flattened
            observation. A conv torso takes ``[B, *obs_shape]`` images (uint8 frames stay uint8: the network
            divides them by 255).

    Raises:
        ValueError: Unknown algorithm, precision or kernel name.
        KernelVerificationError: The named kernel (or every candidate) is wrong or unavailable on this machine.
    """

    def __init__(
        self,
        algorithm: str,
        obs_dim: int,
        out_dim: int,
        layers: tuple[int, ...],
        precision: str = "int8",
        action_low: float | np.ndarray | None = None,
        action_high: float | np.ndarray | None = None,
        threads: int = 1,
        kernel: str | None = None,
        batch: int = 1,
        use_cache: bool = True,
        obs_shape: tuple[int, ...] | None = None,
        torso: Torso | None = None,
    ):
        image = torso if torso is not None and torso.is_conv else None
        default = image.obs_shape if image is not None else (int(obs_dim),)
        self.obs_shape = tuple(int(d) for d in obs_shape) if obs_shape is not None else default
        if int(np.prod(self.obs_shape)) != int(obs_dim) or (image is not None and self.obs_shape != default):
            raise ValueError(
                f"obs_shape {self.obs_shape} does not hold obs_dim={obs_dim} values (torso: {torso})"
            )
        self.spec = PolicySpec.build(
            algorithm, obs_dim, out_dim, layers, action_low, action_high, threads, torso
        )
        self.algorithm = algorithm
        self.obs_dim, self.out_dim, self.layers = self.spec.obs_dim, self.spec.out_dim, self.spec.layers
        self.batch = max(int(batch), 1)
        self._kernel, self.selection = select_kernel(
            self.spec, precision, self.batch, kernel or "auto", use_cache=use_cache
        )
        self._fixed = (kernel or "auto") != "auto"
        self._expected = self.spec.state_shapes()
        self._lock = threading.Lock()
        self._token = id(self)
        self._checked_real = False
        self.version = -1
        self.learner_step = -1

    @property
    def kernel_name(self) -> str:
        """``precision/kernel`` now in use (e.g. ``int8/fbgemm``)."""
        return self._kernel.name

    @property
    def precision(self) -> str:
        """The precision now in use (resolved when ``auto`` was asked for)."""
        return self._kernel.precision

    @property
    def kernel(self) -> str:
        """The kernel's short name (``fbgemm``)."""
        return self._kernel.name.split("/", 1)[1]

    @property
    def prepare_off_thread(self) -> bool:
        """True when an update is dear enough (prepacking, a new session) to prepare on an updater thread."""
        return self._kernel.prepare_off_thread

    # -- inference ---------------------------------------------------------------------------------------------
    @property
    def module(self) -> nn.Module | None:
        """The torch module of a torch kernel (read-only use: tests and diagnostics), else None."""
        return self._kernel.module

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Actions (D4PG, in bounds, before exploration noise) or Q-values (DQN) as float32 numpy.

        Args:
            obs: One observation (``obs_shape``) or a batch (``[B, *obs_shape]``), any numeric dtype (frames are
                uint8); for an MLP cast to float32 and flattened to ``[B, obs_dim]``, for a conv torso kept in
                shape and cast to its input dtype (uint8 for pixels).

        Returns:
            ``[out_dim]`` or ``[B, out_dim]`` float32.
        """
        x = np.asarray(obs)
        single = x.shape == self.obs_shape
        if not single and x.shape[1:] != self.obs_shape:
            raise ValueError(
                f"expected observations {list(self.obs_shape)} or [B, *{list(self.obs_shape)}] "
                f"(obs_dim={self.obs_dim}), got {x.shape}"
            )
        rows = 1 if single else x.shape[0]
        if self.spec.image is None:
            x = x.astype(np.float32, copy=False).reshape(rows, self.obs_dim)
        else:
            x = x.astype(self.spec.input_dtype, copy=False).reshape(rows, *self.obs_shape)
        if not (x.flags.c_contiguous and x.flags.writeable):
            x = np.array(x, order="C")  # torch.from_numpy warns on read-only arrays
        with self._lock:
            out = self._kernel.forward(x)
        return out[0] if single else out

    # -- weights -----------------------------------------------------------------------------------------------
    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """``{torch key: shape}`` the policy needs; pass as ``decode_message(buf, expected=...)``."""
        return dict(self._expected)

    def apply(self, message: WeightMessage) -> None:
        """Install a decoded message's weights (:meth:`prepare` then :meth:`install`).

        Raises:
            UnknownTensorError, MissingTensorError, ShapeMismatchError: The message doesn't fit this network;
                the current weights are left untouched.
        """
        self.install(self.prepare(message))

    def prepare(self, message: WeightMessage) -> PreparedWeights:
        """Build the new weights for this policy's kernel without touching the live weights (thread-safe).

        The first message is also a check of the kernel on real weights (see :meth:`_check_first`).

        Raises:
            UnknownTensorError, MissingTensorError, ShapeMismatchError: As :meth:`apply`.
            KernelVerificationError: No verified kernel computes the first real weights within its bound.
        """
        self._validate({name: t.shape for name, t in message.tensors.items()})
        meta = (message.version, message.learner_step, message.comm_bits)
        if self._checked_real:
            return PreparedWeights(*meta, self._kernel.prepare(message.tensors), self._token)
        kernel, payload, checks = self._check_first(message.tensors)
        return PreparedWeights(*meta, payload, self._token, kernel, tuple(checks))

    def _check_first(self, tensors: Mapping[str, EncodedTensor]) -> tuple[Kernel, Any, list[dict[str, Any]]]:
        """Verify the kernel on the first real weights against fp32; fall back along the verified order.

        Each try builds a fresh kernel (the live one is not touched), installs the weights in it and compares it
        with the fp32 network on the probe observations at the actor's batch size.
        """
        x = probe_inputs(self.spec)
        ref = reference_outputs(self.spec, tensors, x)
        names = [self._kernel.name]
        if not self._fixed:
            names += [n for n in self.selection.order if n != self._kernel.name]
        checks = []
        for name in names:
            kernel = build_kernel(name, self.spec)
            payload = kernel.prepare(tensors)
            kernel.install(payload)
            check = verify(kernel, tensors, x, ref, self.batch, installed=True)
            checks.append({"kernel": name, "ok": check.ok, "error": check.error, "reason": check.detail})
            if check.ok:
                return kernel, payload, checks
            logger.error("kernel %s fails on the first real weights: %s", name, check.detail)
        raise KernelVerificationError(
            f"no verified kernel computes this {self.algorithm} policy's first real weights within bounds: "
            + "; ".join(f"{c['kernel']}: {c['reason']}" for c in checks)
            + ". Set actor.precision=fp32 (or another actor.kernel)."
        )

    def install(self, prepared: PreparedWeights) -> None:
        """Swap prepared weights in (reference swaps under the inference lock; no copies)."""
        if prepared.owner != self._token:
            raise ValueError("these weights were prepared by another ActorPolicy")
        with self._lock:
            if prepared.kernel is not None:
                self._switch(prepared)
            else:
                self._kernel.install(prepared.payload)
            self.version, self.learner_step = prepared.version, prepared.learner_step

    def _switch(self, prepared: PreparedWeights) -> None:
        """Adopt the kernel checked on the first real weights, and record the checks in :attr:`selection`."""
        assert prepared.kernel is not None
        self._kernel, self._checked_real = prepared.kernel, True
        sel = self.selection
        sel.first_message = list(prepared.checks)
        for check in prepared.checks:
            if not check["ok"]:
                sel.rejected.append(
                    {
                        "kernel": check["kernel"],
                        "error": check["error"],
                        "reason": f"first message: {check['reason']}",
                    }
                )
        if sel.kernel != prepared.kernel.name:
            logger.warning("falling back from kernel %s to %s", sel.kernel, prepared.kernel.name)
            sel.kernel = prepared.kernel.name
            sel.time_us = sel.timings_us.get(sel.kernel)
            # The probe's error stays the headline (full-range codes are the hard case); first_message has the rest.
            sel.error = sel.errors.get(sel.kernel, prepared.checks[-1]["error"])
            sel.detail = prepared.checks[-1]["reason"]

    def load_state(self, state: Mapping[str, np.ndarray], version: int = 0, learner_step: int = 0) -> None:
        """Install float weights keyed by torch name (e.g. ``mapping.tf_to_torch_state``'s output) directly.

        Raises:
            UnknownTensorError, MissingTensorError, ShapeMismatchError: As :meth:`apply`.
        """
        tensors = {}
        for name, value in state.items():
            arr = np.asarray(value)
            tensors[name] = EncodedTensor(
                name, tuple(arr.shape), "f32", arr.astype(np.float32, copy=False), 32
            )
        self.apply(WeightMessage(version, learner_step, "fp32", 32, tensors, 0))

    def _validate(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        unknown = sorted(set(shapes) - set(self._expected))
        if unknown:
            raise UnknownTensorError(
                f"message carries {unknown} that this {self.algorithm} policy does not have"
            )
        missing = [k for k in self._expected if k not in shapes]
        if missing:
            raise MissingTensorError(
                f"this {self.algorithm} policy expects {missing} but the message lacks them"
            )
        for key, want in self._expected.items():
            if tuple(shapes[key]) != want:
                raise ShapeMismatchError(
                    f"tensor {key!r} has shape {tuple(shapes[key])} but this policy (obs_dim={self.obs_dim}, "
                    f"layers={self.layers}, out_dim={self.out_dim}) expects {want}"
                )
