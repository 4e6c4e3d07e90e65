"""``actorq export RUN_DIR``: a trained run's policy as one self-contained file, at fp32, fp16 or int8.

The weights are those an actor of that precision gets (the quantizer's encoding of the learner checkpoint,
:mod:`actorq.trained.weights`), and the file is what one of the actors' kernels computes with them:

* ``onnx``: the ONNX Runtime kernel's graph (:meth:`~actorq.actors.kernels.ort_kernels.OrtKernel.onnx_model`):
  int8 codes with per-row scales as initializers, activations quantized at run time. For int8 the 7-bit-activation
  graph (``int8/ort-s8r``) is preferred: exact on AVX2-only CPUs as on AVX512-VNNI ones (docs/kernels.md).
* ``torchscript``: the torch kernel's module, traced (int8: torch's dynamic quantized Linear).
* ``state-dict``: the tensors for ``torch.load(path, weights_only=True)``: int8 weights as their codes and
  per-row scales (``KEY`` and ``KEY.scale``, weight ~= scale[:, None] * codes), fp16 as float16, the rest float32.

Every file carries the same JSON record (ONNX: metadata ``actorq``; TorchScript: extra file ``actorq.json``;
state dict: key ``actorq``): the observation and action spec, what the output means and the rule that turns it into
an action, the precision and quantization parameters, the run, its learner step, and how far the file's outputs
are from the learner's fp32 policy on probe observations. The file is checked that way after it is written.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch

import actorq
from actorq import algorithms
from actorq.actors.kernels import CANDIDATES, PolicySpec, build_kernel, compare, probe_inputs, verify
from actorq.actors.kernels.base import float16, float32, int8_codes, prefixes
from actorq.actors.kernels.ort_kernels import OrtKernel
from actorq.actors.kernels.torch_kernels import TorchKernel
from actorq.actors.kernels.verify import reference_outputs
from actorq.envs import environment_spec
from actorq.errors import UsageError
from actorq.quantize.codec import WeightMessage
from actorq.trained import FORMATS
from actorq.trained.weights import TrainedWeights, fp32_reference, policy_message, precision_config

log = logging.getLogger(__name__)

EXPORT_PRECISIONS = ("fp32", "fp16", "int8")
RECORD_NAME = "actorq"
"""The record's name: ONNX metadata key, ``actorq.json`` extra file, state-dict key."""
RECORD_VERSION = 1
STATE_DICT_KERNEL = "fp32/torch on the stored values"
"""What computes a state dict's policy when it is checked: the fp32 network on its (dequantized) values."""
PREFERRED = {"int8": ("int8/ort-s8r", "int8/ort-u8", "int8/fbgemm", "int8/x86")}
"""Kernels tried first, per precision: the portable ones (exact on AVX2 and AVX512-VNNI CPUs alike)."""


class ExportError(UsageError):
    """The policy cannot be exported so (no kernel of that precision and format verifies here): exit 2."""


def _kernels(precision: str, family: type) -> list[str]:
    names = [c.name for c in CANDIDATES if c.name.startswith(f"{precision}/") and issubclass(c, family)]
    first = [n for n in PREFERRED.get(precision, ()) if n in names]
    return first + [n for n in names if n not in first]


def verified_kernel(spec: PolicySpec, message: WeightMessage, family: type) -> tuple[Any, Any]:
    """The first kernel of ``family`` at the message's precision that computes its weights within the bound on
    this machine, with them installed, and its check.

    Raises:
        ExportError: None does (each one's reason is listed).
    """
    precision = message.precision
    x = probe_inputs(spec)
    ref = reference_outputs(spec, message.tensors, x)
    reasons = []
    for name in _kernels(precision, family):
        cls = next(c for c in CANDIDATES if c.name == name)
        if why := cls.unavailable():
            reasons.append(f"{name}: {why}")
            continue
        kernel = build_kernel(name, spec)
        check = verify(kernel, message.tensors, x, ref, batch=1)
        if check.ok:
            return kernel, check
        reasons.append(f"{name}: {check.detail}")
    kind = "ONNX Runtime" if family is OrtKernel else "torch"
    raise ExportError(
        f"no {precision} {kind} kernel computes this policy within its bound here: "
        + ("; ".join(reasons) or f"the {kind} kernels have no {precision} variant; try another --format")
    )


def record(
    weights: TrainedWeights,
    spec: PolicySpec,
    message: WeightMessage,
    kernel: str,
    observation: tuple[tuple[int, ...], str],
) -> dict[str, Any]:
    """The JSON record every exported file carries (see the module docstring)."""
    config = weights.config
    algo = spec.algo
    obs_shape, obs_dtype = observation
    quantized = {
        key: {"bits": t.bits, "axis": t.axis, "symmetric": t.zero_point is None or not np.any(t.zero_point)}
        for key, t in message.tensors.items()
        if t.encoding == "q"
    }
    return {
        "format": RECORD_VERSION,
        "actorq_version": actorq.__version__,
        "run_dir": str(weights.run_dir),
        "algorithm": config.algorithm,
        "task": {"suite": config.env.suite, "task": config.env.task},
        "checkpoint": weights.checkpoint,
        "learner_step": weights.learner_step,
        "observation": {"shape": list(obs_shape), "dtype": obs_dtype},
        "input": {
            "name": "obs",
            "shape": [None, *spec.input_shape],
            "dtype": str(spec.input_dtype),
            "how": "a batch of observations as the policy reads them: "
            + ("images" if spec.image is not None else "each flattened (C order) to float32"),
        },
        "torso": {"kind": spec.torso.kind if spec.torso else "mlp", "obs_shape": list(spec.input_shape)},
        "output": {
            "name": "out",
            "shape": [spec.out_dim],
            "meaning": "action" if algo.network.bounded_output else "q_values",
        },
        "action": {
            "discrete": algo.discrete,
            "rule": "argmax over the output" if algo.discrete else "the output is the action",
            **(
                {"num_actions": spec.out_dim}
                if algo.discrete
                else {"shape": [spec.out_dim], "low": list(spec.action_low), "high": list(spec.action_high)}
            ),
        },
        "layers": list(spec.layers),
        "precision": message.precision,
        "kernel": kernel,
        "quantization": {
            "wire_bits": message.comm_bits,
            "weights": quantized,
            "activations": (
                "quantized per tensor (over the whole batch) at run time: one observation per call is how the "
                "fidelity was measured"
                if message.precision == "int8"
                else "float32"
            ),
        },
    }


def _fidelity(spec: PolicySpec, got: np.ndarray, ref: np.ndarray, precision: str) -> dict[str, Any]:
    check = compare(spec, f"{precision}/export", got, ref)
    out: dict[str, Any] = {"probes": int(len(ref)), "error": check.error, "within_bound": check.ok}
    out["detail"] = check.detail
    if spec.algo.discrete:
        out["greedy_agreement"] = float(np.mean(np.argmax(got, 1) == np.argmax(ref, 1)))
    return out


def export(weights: TrainedWeights, precision: str, fmt: str, out: str | Path) -> dict[str, Any]:
    """Write the run's policy at ``precision`` as ``fmt`` to ``out``; returns the record it carries.

    Raises:
        ExportError: Unknown format or precision, or no kernel of that kind verifies here.
        UsageError: The output folder does not exist.
    """
    if fmt not in FORMATS:
        raise ExportError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    if precision not in EXPORT_PRECISIONS:
        raise ExportError(f"precision {precision!r} is not one of {', '.join(EXPORT_PRECISIONS)}")
    out = Path(out)
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: the folder {out.parent} does not exist")
    precision_config(weights.config, precision)  # a precision the config accepts
    reference = fp32_reference(weights)  # the run's policy as the actors build it: its spec is the file's
    spec = reference.spec
    message = policy_message(weights, precision)
    x = probe_inputs(spec)
    learner_fp32 = reference(x)
    writers = {"onnx": _write_onnx, "torchscript": _write_torchscript, "state-dict": _write_state_dict}
    kernel, run = writers[fmt](weights, spec, message, out)
    meta = record(
        weights,
        spec,
        message,
        kernel,
        (reference.obs_shape, str(environment_spec(weights.config.env).obs_dtype)),
    )
    if fmt == "state-dict":
        meta["quantization"]["layout"] = (
            "int8 weights: KEY (codes) and KEY.scale (per row); weight ~= scale * codes"
        )
    meta["fidelity"] = _fidelity(spec, one_at_a_time(run, x), learner_fp32, precision)
    meta["fidelity"]["reference"] = "the learner's fp32 policy on N(0, 1) probe observations, one per call"
    _attach(fmt, out, meta)
    # The file as written, reloaded, must compute its weights as the kernels' rule demands: within the precision's
    # bound of fp32 on the same (quantized) weights. Its distance from the learner's fp32 weights (quantization
    # itself included) is the measurement recorded above.
    got = one_at_a_time(_LOADERS[fmt](out), x)
    check = compare(spec, f"{precision}/{fmt}", got, reference_outputs(spec, message.tensors, x))
    if not check.ok:
        out.unlink()
        raise ExportError(
            f"the written {fmt} file does not compute its weights within the bound: {check.detail}"
        )
    log.info("exported %s %s policy to %s (%s)", precision, fmt, out, check.detail)
    return meta


def one_at_a_time(policy, x: np.ndarray) -> np.ndarray:
    """``policy`` on each row of ``x`` as a batch of one: int8 activations are quantized per tensor, i.e. over the
    whole batch, so a row's outputs depend on the rows beside it; the file is checked as it is deployed, one
    observation per call."""
    return np.concatenate([np.asarray(policy(np.ascontiguousarray(x[i : i + 1]))) for i in range(len(x))])


# -- formats --------------------------------------------------------------------------------------------------
def _write_onnx(weights, spec, message, out: Path):  # each writer: (kernel name, its forward)
    kernel, _ = verified_kernel(spec, message, OrtKernel)
    model = kernel.onnx_model(message.tensors)
    out.write_bytes(model.SerializeToString())
    return kernel.name, kernel.forward


def _load_onnx(path: Path):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda x: session.run(["out"], {"obs": x})[0]


class _Float32Policy(torch.nn.Module):
    """A kernel's module taking and giving float32 (the fp16/half kernel's module runs in half)."""

    def __init__(self, module: torch.nn.Module, half: bool):
        super().__init__()
        self.module = module
        self.half = half

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.module(obs.half() if self.half else obs).float()


def _write_torchscript(weights, spec, message, out: Path):
    kernel, _ = verified_kernel(spec, message, TorchKernel)
    wrapped = _Float32Policy(kernel.module, kernel.half).eval()
    with torch.inference_mode(False), torch.no_grad():
        traced = torch.jit.trace(wrapped, torch.from_numpy(probe_inputs(spec, n=4)), check_trace=False)
    torch.jit.save(traced, str(out))
    return kernel.name, kernel.forward


def _load_torchscript(path: Path):
    module = torch.jit.load(str(path))
    return lambda x: module(torch.from_numpy(np.ascontiguousarray(x))).detach().numpy()


def _state_dict(spec: PolicySpec, message: WeightMessage) -> dict[str, torch.Tensor]:
    linear = {f"{p}.weight" for p in prefixes(spec)}
    state: dict[str, torch.Tensor] = {}
    for key, t in message.tensors.items():
        if message.precision == "int8" and key in linear:
            codes, scale = int8_codes(t)
            state[key] = torch.from_numpy(codes)
            state[f"{key}.scale"] = torch.from_numpy(np.ascontiguousarray(scale, np.float32))
        elif message.precision == "fp16" and key in linear:
            state[key] = torch.from_numpy(float16(t))
        else:
            state[key] = torch.from_numpy(float32(t))
    return state


def _dequantized(state: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    out = {}
    for key, value in state.items():
        if key.endswith(".scale"):
            continue
        arr = value.numpy()
        if arr.dtype == np.int8:
            arr = arr.astype(np.float32) * state[f"{key}.scale"].numpy()[:, None]
        out[key] = np.asarray(arr, np.float32)
    return out


def _write_state_dict(weights, spec, message, out: Path):
    state = _state_dict(spec, message)
    torch.save({"state_dict": state}, str(out))
    return STATE_DICT_KERNEL, _fp32_model(spec, _dequantized(state))


def _fp32_model(spec: PolicySpec, state: dict[str, np.ndarray]):
    model = spec.float_model()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return lambda x: model(torch.from_numpy(np.ascontiguousarray(x, np.float32))).detach().numpy()


def _load_state_dict(path: Path):
    loaded = torch.load(str(path), weights_only=True)
    info = json.loads(loaded[RECORD_NAME])
    algo = algorithms.get(info["algorithm"])
    torso = algo.torso(
        info["torso"]["kind"], tuple(info["torso"]["obs_shape"]), np.dtype(info["input"]["dtype"])
    )
    spec = PolicySpec.build(
        info["algorithm"],
        torso.obs_dim,
        info["output"]["shape"][0],
        tuple(info["layers"]),
        info["action"].get("low"),
        info["action"].get("high"),
        torso=torso,
    )
    return _fp32_model(spec, _dequantized(loaded["state_dict"]))


_LOADERS = {"onnx": _load_onnx, "torchscript": _load_torchscript, "state-dict": _load_state_dict}


def _attach(fmt: str, out: Path, meta: dict[str, Any]) -> None:
    """Write the record into the file (each format's own place for metadata)."""
    text = json.dumps(meta, indent=1)
    if fmt == "onnx":
        import onnx

        model = onnx.load(str(out))
        entry = model.metadata_props.add()
        entry.key, entry.value = RECORD_NAME, text
        model.producer_name, model.producer_version = "actorq", actorq.__version__
        onnx.save(model, str(out))
    elif fmt == "torchscript":
        module = torch.jit.load(str(out))
        torch.jit.save(module, str(out), _extra_files={f"{RECORD_NAME}.json": text})
    else:
        saved = torch.load(str(out), weights_only=True)
        saved[RECORD_NAME] = text
        torch.save(saved, str(out))
