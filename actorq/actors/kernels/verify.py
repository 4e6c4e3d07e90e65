"""Check a kernel against the fp32 reference on the machine that runs it, before an actor may act with it.

The probe is a weight message shaped like the real one (the policy's own layer sizes) whose weights are
**full-range int8 codes** (uniform in [-127, 127], per-row scales ``sqrt(3 / fan_in) / 127``, so each layer keeps
unit activation variance) and observations ~ N(0, 1), evaluated at the actor's batch size. Full-range codes are
what exposes int16 saturation in int8 GEMMs on CPUs without VNNI; a learner's real weights may only do so later,
which is why the same check runs again on the first real weight message
(:meth:`actorq.actors.policy.ActorPolicy.prepare`).

A second probe, the **saturation probe** (:func:`saturation_tensors`), is built so that an int8 GEMM whose
int16 pair sums clip cannot hide within the bounds: every activation entering a layer after the first (a
convolution of a conv torso or a Linear) is the same
positive value (so per-tensor quantization puts it on the top code of its grid: 255 for 8-bit u8, 127 for
7-bit) and every weight code there is +127. Exact int32 accumulation computes this network exactly (constants are
on the grid); a ``vpmaddubsw`` kernel fed 8-bit activations clips each pair sum ``2 * 255 * 127 = 64770`` to
32767 and halves every such layer's output. The random probe alone let such a kernel pass on small DQN networks
(measured on an AMD EPYC Zen 2, 2x256: ``int8/ort-s8`` at 4.9% Q error against a 10% bound, 18x the exact
kernel's). A kernel must pass both probes.

Bounds (what a correct kernel of each precision stays within; a wrong one, e.g. a saturating int8 GEMM, is far
outside them) are the algorithm's: ``Algorithm.verify`` and ``verification_bounds`` in its module
(:mod:`actorq.algorithms.d4pg`: error relative to the action range; :mod:`actorq.algorithms.dqn`: error relative to
max |Q| plus greedy-action agreement for int8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from actorq.actors.kernels.base import Kernel, PolicySpec
from actorq.actors.kernels.torch_kernels import Fp32Torch
from actorq.errors import ActorQError
from actorq.quantize.message import EncodedTensor

PROBES = 128
"""Probe observations per check."""


class KernelVerificationError(ActorQError, RuntimeError):
    """A named kernel does not compute the policy within its precision's bound on this machine."""


@dataclass(frozen=True)
class Check:
    """The outcome of one verification."""

    kernel: str
    ok: bool
    error: float
    """The algorithm's error measure (D4PG: relative to the action range; DQN: to max |Q|)."""
    detail: str
    """Human-readable: the measure, the bound and whatever else the algorithm's rule checked."""


def _codes(prefix: str, codes: np.ndarray, scale: np.ndarray) -> EncodedTensor:
    """A weight as an 8-bit message carries it: int8 codes, one scale per output channel (axis 0)."""
    fan_out = codes.shape[0]
    return EncodedTensor(
        f"{prefix}.weight", tuple(codes.shape), "q", codes, 8, scale, np.zeros(fan_out, np.int32), 0
    )


def probe_tensors(spec: PolicySpec, seed: int = 0) -> dict[str, EncodedTensor]:
    """A message's tensors with full-range int8 weight codes (see the module docstring)."""
    rng = np.random.default_rng(seed)
    tensors: dict[str, EncodedTensor] = {}
    for prefix, shape in spec.weight_shapes():
        fan_out, fan_in = shape[0], int(np.prod(shape[1:]))
        codes = rng.integers(-127, 128, size=shape, dtype=np.int8)
        scale = np.full(fan_out, np.sqrt(3.0 / fan_in) / 127.0, np.float32)
        tensors[f"{prefix}.weight"] = _codes(prefix, codes, scale)
        bias = (0.1 * rng.standard_normal(fan_out)).astype(np.float32)
        tensors[f"{prefix}.bias"] = EncodedTensor(f"{prefix}.bias", (fan_out,), "f32", bias, 32)
    if spec.algo.network.first_layer_norm:
        width = spec.layers[0]
        norm_w = (1.0 + 0.2 * rng.standard_normal(width)).astype(np.float32)
        norm_b = (0.1 * rng.standard_normal(width)).astype(np.float32)
        tensors["norm.weight"] = EncodedTensor("norm.weight", (width,), "f32", norm_w, 32)
        tensors["norm.bias"] = EncodedTensor("norm.bias", (width,), "f32", norm_b, 32)
    return tensors


SATURATION_HEAD_OUTPUT = 0.3
"""The saturation probe's head output: inside tanh's near-linear range, so a halved input moves the action."""


def _white_frames(spec: PolicySpec) -> bool:
    """The saturation probe feeds white frames (every pixel 255, 1.0 in the network) to a conv torso on pixels,
    so its first convolution sees top-of-grid activations too."""
    return spec.image is not None and spec.image.pixels


def saturation_inputs(spec: PolicySpec, rows: np.ndarray) -> np.ndarray:
    """The saturation probe's observations: ``rows`` (any: layer 0's zero weights ignore them), or white frames
    for a conv torso on pixels."""
    return np.full_like(rows, 255) if _white_frames(spec) else rows


def saturation_tensors(spec: PolicySpec) -> dict[str, EncodedTensor]:
    """A message whose int8 layers see constant top-of-grid activations and +127 codes (module docstring).

    With a conv torso on pixels the probe's frames are white (:func:`saturation_inputs`): every layer, the first
    convolution included, has codes +127 and outputs 1 as the later layers below. Otherwise layer 0 has zero
    weights and bias 1, so the next activation is ``tanh(1)`` (a first LayerNorm, D4PG's, outputs
    its bias 1 on a constant input) or ``relu(1) = elu(1) = 1``, whatever the observation. Each later
    hidden layer has codes +127 and per-row scale ``1 / (a * 127 * fan_in)`` for its constant input ``a``, so it
    outputs 1 (and ``elu(1) = relu(1) = 1``); head row ``j`` outputs ``SATURATION_HEAD_OUTPUT * (j + 1) /
    out_dim`` the same way.
    """
    layers = spec.weight_shapes()
    tensors: dict[str, EncodedTensor] = {}
    activation = float(np.tanh(1.0)) if spec.algo.network.first_layer_norm else 1.0
    for i, (prefix, shape) in enumerate(layers):
        fan_out, fan_in = shape[0], int(np.prod(shape[1:]))
        if i == 0 and not _white_frames(spec):
            codes = np.zeros(shape, np.int8)
            scale = np.ones(fan_out, np.float32)
            bias = np.ones(fan_out, np.float32)
        else:
            codes = np.full(shape, 127, np.int8)
            target = np.ones(fan_out, np.float64)
            if i == len(layers) - 1:
                target = SATURATION_HEAD_OUTPUT * np.arange(1, fan_out + 1) / fan_out
            scale = (target / (activation * 127.0 * fan_in)).astype(np.float32)
            bias = np.zeros(fan_out, np.float32)
            activation = 1.0
        tensors[f"{prefix}.weight"] = _codes(prefix, codes, scale)
        tensors[f"{prefix}.bias"] = EncodedTensor(f"{prefix}.bias", (fan_out,), "f32", bias, 32)
    if spec.algo.network.first_layer_norm:
        width = spec.layers[0]
        for name in ("norm.weight", "norm.bias"):
            tensors[name] = EncodedTensor(name, (width,), "f32", np.ones(width, np.float32), 32)
    return tensors


@dataclass(frozen=True)
class Probe:
    """Weights, observations and the fp32 outputs a kernel is checked against."""

    name: str
    tensors: Mapping[str, EncodedTensor]
    x: np.ndarray
    ref: np.ndarray


def standard_probes(spec: PolicySpec, batch: int = 1) -> list[Probe]:
    """The random full-range probe and the saturation probe (whose outputs don't depend on the observation,
    so a few batches of rows suffice)."""
    x = probe_inputs(spec)
    probes = []
    for name, tensors, rows in (
        ("random", probe_tensors(spec), x),
        ("saturation", saturation_tensors(spec), saturation_inputs(spec, x[: max(2 * batch, 8)])),
    ):
        probes.append(Probe(name, tensors, rows, reference_outputs(spec, tensors, rows)))
    return probes


def verify_probes(kernel: Kernel, probes: list[Probe], batch: int) -> Check:
    """:func:`verify` on each probe in turn; the first failure, else the check with the largest error (the
    detail names the probe)."""
    worst: Check | None = None
    for probe in probes:
        check = verify(kernel, probe.tensors, probe.x, probe.ref, batch)
        check = Check(check.kernel, check.ok, check.error, f"{probe.name} probe: {check.detail}")
        if not check.ok:
            return check
        if worst is None or check.error > worst.error:
            worst = check
    assert worst is not None, "no probes"
    return worst


def probe_inputs(spec: PolicySpec, n: int = PROBES, seed: int = 1) -> np.ndarray:
    """``[n, obs_dim]`` float32 observations ~ N(0, 1); for a conv torso ``[n, *obs_shape]`` images, uniform
    ``uint8`` frames when it reads pixels."""
    rng = np.random.default_rng(seed)
    shape = (n, *spec.input_shape)
    if spec.input_dtype == np.uint8:
        return rng.integers(0, 256, size=shape, dtype=np.uint8)
    return rng.standard_normal(shape).astype(np.float32)


def run_batched(kernel: Kernel, x: np.ndarray, batch: int) -> np.ndarray:
    """``kernel.forward`` over ``x`` in chunks of ``batch`` rows (the actor's batch size decides the GEMM path)."""
    outs = [kernel.forward(np.ascontiguousarray(x[i : i + batch])) for i in range(0, len(x), max(batch, 1))]
    return np.concatenate(outs, axis=0)


def reference_outputs(spec: PolicySpec, tensors: Mapping[str, EncodedTensor], x: np.ndarray) -> np.ndarray:
    """What the fp32 torch network computes with these weights (dequantized when they are codes)."""
    ref = Fp32Torch(spec)
    ref.install(ref.prepare(tensors))
    return ref.forward(x)


def compare(spec: PolicySpec, name: str, got: np.ndarray, ref: np.ndarray) -> Check:
    """Judge ``got`` against the fp32 ``ref`` with the bounds of ``name``'s precision."""
    precision = name.split("/", 1)[0]
    if got.shape != ref.shape or not np.all(np.isfinite(got)):
        return Check(name, False, float("inf"), f"output shape {got.shape} or non-finite values")
    result = spec.algo.verify(got, ref, precision, spec.action_range)
    return Check(name, result.ok, result.error, result.detail)


def verify(
    kernel: Kernel,
    tensors: Mapping[str, EncodedTensor],
    x: np.ndarray,
    ref: np.ndarray,
    batch: int,
    installed: bool = False,
) -> Check:
    """Install ``tensors`` in ``kernel`` (unless ``installed``) and compare its outputs on ``x`` with ``ref``."""
    try:
        if not installed:
            kernel.install(kernel.prepare(tensors))
        got = run_batched(kernel, x, batch)
    except Exception as exc:  # a kernel that can't even run these shapes here is rejected, not fatal
        return Check(kernel.name, False, float("inf"), f"failed to run: {type(exc).__name__}: {exc}")
    return compare(kernel.spec, kernel.name, got, ref)
