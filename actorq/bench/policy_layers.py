"""Per-layer forward time of a policy's kernels: which layers a precision's gain comes from.

A conv policy's batch-1 forward mixes two kinds of layer: convolutions, which reuse each weight at every output
position (arithmetic-bound: where int8 dot products outrun fp32), and dense layers, which read each weight once
per observation (a weight stream: where int8's 4x fewer bytes help). ``actorq bench policy`` times each layer of
every verified torch kernel (``ActorPolicy.module``) on the inputs that layer sees in a real forward (captured
once with forward hooks), interleaved over layers and repeats, median per layer; beside each, the layer's
multiply-adds and weight bytes at the kernel's precision, so a row reads as achieved GMAC/s or GB/s. ONNX Runtime
kernels run the whole network in one session: theirs come from ONNX Runtime's own per-node profile of a session
built for it (each node named after its layer; median per node over the runs, summed per layer; the input's cast
and transposes and the flatten belong to no layer). A convolution's time includes its im2col copy where the kernel
computes it as a matrix product (:class:`~actorq.networks.torch_nets.Im2colConv`), and in int8 ONNX Runtime graphs
its activations' quantization.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from actorq.config import BYTES_PER_WEIGHT

LAYER_BATCHES = (1, 8)
"""Batches the layers are timed at: one environment, and ``actor.envs_per_actor`` 8."""


def layer_shapes(spec: Any) -> list[tuple[str, tuple[int, ...], int]]:
    """``(layer, torch weight shape, multiply-adds per observation)`` of each conv and Linear layer."""
    macs = spec.image.multiply_adds() if spec.image is not None else []
    out = []
    for i, (name, shape) in enumerate(spec.weight_shapes()):
        out.append((name, shape, macs[i] if i < len(macs) else int(np.prod(shape))))
    return out


def time_layers(policy: Any, x: np.ndarray, reps: int, budget_s: float) -> dict[str, float] | None:
    """Median microseconds of each layer of ``policy`` (an :class:`~actorq.actors.policy.ActorPolicy`) on the
    inputs a forward of ``x`` gives it; None for a kernel without a torch module (ONNX Runtime)."""
    import torch

    module = policy.module
    if module is None:
        return None
    names = [name for name, _, _ in layer_shapes(policy.spec)]
    layers = {name: module.get_submodule(name) for name in names}
    inputs: dict[str, torch.Tensor] = {}
    hooks = [
        layer.register_forward_pre_hook(lambda _m, args, name=name: inputs.setdefault(name, args[0].clone()))
        for name, layer in layers.items()
    ]
    try:
        policy(x)
    finally:
        for hook in hooks:
            hook.remove()
    samples: dict[str, list[float]] = {name: [] for name in names}
    with torch.inference_mode():
        for name in names:  # warm-up
            layers[name](inputs[name])
        for rep in range(reps):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                layer, inp, out = layers[name], inputs[name], samples[name]
                layer(inp)  # untimed: refills what the other layers evicted
                start = time.perf_counter()
                for _ in range(3):
                    t0 = time.perf_counter()
                    layer(inp)
                    out.append(time.perf_counter() - t0)
                    if t0 - start > budget_s:
                        break
    return {name: float(np.median(s) * 1e6) for name, s in samples.items()}


def ort_layer_times(name: str, spec: Any, tensors: Any, x: np.ndarray, runs: int) -> dict[str, float]:
    """Microseconds of each layer of ONNX Runtime kernel ``name`` with ``tensors`` installed, from its per-node
    profile over ``runs`` forwards of ``x`` after two warm-up ones (median per node, summed per layer)."""
    from actorq.actors.kernels import build_kernel

    names = [layer for layer, _, _ in layer_shapes(spec)]
    with tempfile.TemporaryDirectory(prefix="actorq-ort-profile-") as tmp:
        kernel = build_kernel(name, spec)
        kernel.profile_dir = tmp
        kernel.install(kernel.prepare(tensors))
        for _ in range(runs + 2):
            kernel.forward(x)
        events = json.loads(Path(kernel.session.end_profiling()).read_text())
    per_node: dict[str, list[float]] = {}
    for event in events:
        label = event.get("name", "")
        if event.get("cat") == "Node" and label.endswith("_kernel_time"):
            node = label[: -len("_kernel_time")].split(" ")[-1]  # "fused torso.0.y": ONNX Runtime's fusions
            per_node.setdefault(node, []).append(float(event["dur"]))
    times = dict.fromkeys(names, 0.0)
    for node, durations in per_node.items():
        layer = next((n for n in names if node.startswith(f"{n}.")), None)
        if layer is not None:
            times[layer] += float(np.median(durations[2:] or durations))
    return times


def layer_records(
    policies: dict[str, Any], inputs: dict[int, np.ndarray], quick: bool, tensors: dict[str, Any]
) -> list[dict[str, Any]]:
    """One record per (kernel, batch, layer): ``us``, its share of the layers' sum, multiply-adds and weight
    bytes; ``x_fp32``: fp32/torch's time for the same layer and batch over this one. ``tensors``: each kernel's
    installed message tensors (an ONNX Runtime kernel's profiled session is built from them)."""
    reps, budget_s = (5, 0.005) if quick else (15, 0.02)
    times = {}
    for name, policy in policies.items():
        for batch in LAYER_BATCHES:
            t = time_layers(policy, inputs[batch], reps, budget_s)
            if t is None:
                t = ort_layer_times(name, policy.spec, tensors[name], inputs[batch], 3 * reps)
            times[(name, batch)] = t
    records = []
    for (name, batch), per_layer in times.items():
        precision = name.split("/", 1)[0]
        spec = policies[name].spec
        total = sum(per_layer.values())
        fp32 = times.get(("fp32/torch", batch), {})
        for layer, shape, macs in layer_shapes(spec):
            us = per_layer[layer]
            records.append(
                {
                    "kernel": name,
                    "batch": batch,
                    "layer": layer,
                    "kind": "conv" if len(shape) == 4 else "dense",
                    "us": round(us, 1),
                    "share": round(us / total, 3) if total else None,
                    "macs": macs * batch,
                    "weight_bytes": int(np.prod(shape)) * BYTES_PER_WEIGHT[precision],
                    "x_fp32": round(fp32[layer] / us, 2) if layer in fp32 and us > 0 else None,
                }
            )
    return records


def format_layers(records: list[dict[str, Any]], policy: str) -> list[str]:
    """The per-layer table of one policy, and per kernel and batch where its gain over fp32/torch comes from."""
    if not records:
        return []
    head = (
        f"{'kernel':<14} {'batch':>5} {'layer':<8} {'kind':<5} {'us':>8} {'share':>6} {'x fp32':>6} "
        f"{'GMAC/s':>7} {'GB/s':>6}"
    )
    lines = ["", f"per layer ({policy})", head, "-" * len(head)]
    for r in records:
        speed = "-" if r["x_fp32"] is None else f"{r['x_fp32']:.2f}"
        lines.append(
            f"{r['kernel']:<14} {r['batch']:>5} {r['layer']:<8} {r['kind']:<5} {r['us']:>8.1f} {r['share']:>6.2f} "
            f"{speed:>6} {r['macs'] / r['us'] / 1e3:>7.1f} {r['weight_bytes'] / r['us'] / 1e3:>6.2f}"
        )
    fp32 = {(r["batch"], r["layer"]): r["us"] for r in records if r["kernel"] == "fp32/torch"}
    for kernel in dict.fromkeys(r["kernel"] for r in records if r["kernel"] != "fp32/torch"):
        for batch in LAYER_BATCHES:
            rows = [r for r in records if r["kernel"] == kernel and r["batch"] == batch]
            if not rows or not fp32:
                continue
            saved = {
                kind: sum(fp32[(batch, r["layer"])] - r["us"] for r in rows if r["kind"] == kind)
                for kind in ("conv", "dense")
            }
            lines.append(
                f"{kernel} at batch {batch}: saves {saved['conv']:.0f} us on the convolutions and "
                f"{saved['dense']:.0f} us on the dense layers against fp32/torch"
            )
    return lines
