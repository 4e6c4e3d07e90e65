"""Deployment benchmark of fp32 vs int8 policies (QuaRL Table 4 / ActorQ Table 6, the Ras-Pi study).

The paper's Air Learning policies (Policy I: 3 layers of 64; II: 3 layers of 256; III: 4096-512-1024, 25
actions) are built as MLPs, exported to ONNX (fp32, and int8 with ONNX Runtime's dynamic-quantization operators:
int8 weights from ``actorq.quantize.affine``, uint8 activations quantized on the fly; see ``onnx_int8``) and to TorchScript (fp32, and ``torch.ao`` dynamic int8), then
measured one model per subprocess so peak resident memory belongs to that model alone: batch-1 latency on one
thread, peak RSS, RSS added by loading the model, and file size. A memory-limited run sets ``RLIMIT_AS`` in the
worker to its own address-space size after imports plus a budget chosen between the int8 and the fp32 model's
needs; with no swap on this machine the Ras-Pi's "fp32 spills to swap" becomes "fp32 cannot allocate".
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

POLICIES: dict[str, list[int]] = {"I": [64, 64, 64], "II": [256, 256, 256], "III": [4096, 512, 1024]}
BACKENDS = ("onnx", "torchscript")  # what export_module can export to and measure
N_ACTIONS = 25  # Air Learning's discrete action set


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def build_mlp(hidden: list[int], obs_dim: int, n_actions: int = N_ACTIONS, seed: int = 0) -> Any:
    """The policy MLP (ReLU between layers), seeded."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    d = obs_dim
    for h in hidden:
        layers += [nn.Linear(d, h), nn.ReLU()]
        d = h
    layers.append(nn.Linear(d, n_actions))
    return nn.Sequential(*layers).eval()


def export_models(
    name: str, hidden: list[int], obs_dim: int, out: Path, backends: list[str]
) -> dict[str, Path]:
    """Export fp32 and int8 versions of one policy; returns ``{"onnx-fp32": path, ...}``."""
    return export_module(build_mlp(hidden, obs_dim), name, obs_dim, out, backends)


def export_module(model: Any, name: str, obs_dim: int, out: Path, backends: list[str]) -> dict[str, Path]:
    """Export a Linear/activation ``nn.Sequential`` in fp32 and int8 per backend."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    dummy = torch.zeros(1, obs_dim)
    paths: dict[str, Path] = {}
    if "onnx" in backends:
        from actorq.studies import onnx_int8

        paths["onnx-fp32"] = onnx_int8.export_fp32(model, obs_dim, out / f"policy_{name}_fp32.onnx")
        paths["onnx-int8"] = onnx_int8.export_int8(model, obs_dim, out / f"policy_{name}_int8.onnx")
    if "torchscript" in backends:
        fp = out / f"policy_{name}_fp32.pt"
        torch.jit.trace(model, dummy).save(str(fp))
        qmodel = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        q8 = out / f"policy_{name}_int8.pt"
        torch.jit.trace(qmodel, dummy).save(str(q8))
        paths["torchscript-fp32"], paths["torchscript-int8"] = fp, q8
    return paths


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    """Runs in the subprocess: load one model, time batch-1 inference, report memory."""
    backend = args.backend
    if backend == "onnx":
        import onnxruntime as ort
    else:
        import torch

        torch.set_num_threads(1)
    rss0, vm0 = _status_kb("VmRSS"), _status_kb("VmSize")
    res: dict[str, Any] = {"rss_base_mb": rss0 / 1024, "vm_base_mb": vm0 / 1024}
    if args.limit_mb:
        limit = (vm0 + int(args.limit_mb * 1024)) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        res["rlimit_as_mb"] = limit / 2**20
    x = np.random.default_rng(0).standard_normal((1, args.obs_dim)).astype(np.float32)
    try:
        t0 = time.perf_counter()
        if backend == "onnx":
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])

            def run(inp: np.ndarray = x) -> np.ndarray:
                return sess.run(None, {"obs": inp})[0]
        else:
            mod = torch.jit.load(args.model)

            def run(inp: np.ndarray = x) -> np.ndarray:
                with torch.inference_mode():
                    return mod(torch.from_numpy(inp)).numpy()

        res["load_ms"] = (time.perf_counter() - t0) * 1e3
        for _ in range(args.warmup):
            y = run()
        times = np.empty(args.iters)
        for i in range(args.iters):
            t = time.perf_counter()
            y = run()
            times[i] = time.perf_counter() - t
        probe = np.random.default_rng(1).standard_normal((256, args.obs_dim)).astype(np.float32)
        acts = [int(np.argmax(run(p[None]))) for p in probe]
        res.update(
            status="ok",
            latency_ms_mean=float(times.mean() * 1e3),
            latency_ms_p50=float(np.median(times) * 1e3),
            latency_ms_p99=float(np.percentile(times, 99) * 1e3),
            output_shape=list(y.shape),
            probe_actions=acts,
        )
    except (MemoryError, RuntimeError, OSError, Exception) as e:  # noqa: B014 - ORT raises plain exceptions
        res.update(status="failed", error=f"{type(e).__name__}: {str(e)[:200]}")
    # VmHWM, not ru_maxrss: after fork+exec ru_maxrss still counts the parent's pages, VmHWM is per image.
    res["peak_rss_mb"] = _status_kb("VmHWM") / 1024
    res["model_rss_mb"] = res["peak_rss_mb"] - res["rss_base_mb"]
    res["vm_peak_mb"] = _status_kb("VmPeak") / 1024
    res["model_vm_mb"] = res["vm_peak_mb"] - res["vm_base_mb"]
    return res


def measure(model: Path, backend: str, obs_dim: int, iters: int, warmup: int, limit_mb: float | None) -> dict:
    """Run :func:`_worker` in a fresh interpreter and parse its JSON line (no pickling across processes)."""
    cmd = [
        sys.executable, "-m", "actorq.studies.deploy", "--backend", backend, "--model", str(model),
        "--obs-dim", str(obs_dim), "--iters", str(iters), "--warmup", str(warmup),
    ]  # fmt: skip
    if limit_mb:
        cmd += ["--limit-mb", str(limit_mb)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        # A hard allocation failure can kill the interpreter before it reports: that is a result too.
        return {"status": "crashed", "returncode": proc.returncode, "error": proc.stderr.strip()[-300:]}
    return json.loads(lines[-1])


def run_bench(
    out: str | Path,
    policies: list[str] | None = None,
    backends: list[str] | None = None,
    obs_dim: int = 512,
    iters: int = 2000,
    warmup: int = 100,
    memory_limit: bool = True,
    models_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Export, measure and tabulate every policy x backend x precision; writes ``deploy.json/csv/md``.

    The exported models go to ``models_dir`` (default: a temporary directory, removed afterwards: Policy III
    alone is ~45 MB of files that don't belong in a report directory).
    """
    if models_dir is None:
        with tempfile.TemporaryDirectory(prefix="actorq-deploy-") as tmp:
            return run_bench(out, policies, backends, obs_dim, iters, warmup, memory_limit, models_dir=tmp)
    out = Path(out)
    policies = policies or list(POLICIES)
    backends = backends or ["onnx"]
    rows: list[dict[str, Any]] = []
    for name in policies:
        hidden = POLICIES[name]
        paths = export_models(name, hidden, obs_dim, Path(models_dir), backends)
        n_params = sum(a * b + b for a, b in zip([obs_dim, *hidden], [*hidden, N_ACTIONS], strict=True))
        for key, path in paths.items():
            backend, prec = key.split("-")
            m = measure(path, backend, obs_dim, iters, warmup, None)
            rows.append({"policy": name, "hidden": hidden, "params": n_params, "backend": backend, "precision": prec,
                         "file_mb": path.stat().st_size / 2**20, "limit_mb": None, **m})  # fmt: skip
            logger.info("deploy %s %s: %s", name, key, {k: m.get(k) for k in ("status", "latency_ms_p50")})
        if memory_limit:
            for backend in backends:
                fp = next(
                    r
                    for r in rows
                    if r["policy"] == name and r["backend"] == backend and r["precision"] == "fp32"
                )
                q8 = next(
                    r
                    for r in rows
                    if r["policy"] == name and r["backend"] == backend and r["precision"] == "int8"
                )
                if fp.get("status") != "ok" or q8.get("status") != "ok":
                    continue
                # Budget between what int8 and fp32 needed (address space grown by loading + running).
                budget = round(max(q8["model_vm_mb"] * 1.25, (q8["model_vm_mb"] + fp["model_vm_mb"]) / 2), 1)
                for prec, path in ((p, paths[f"{backend}-{p}"]) for p in ("fp32", "int8")):
                    m = measure(path, backend, obs_dim, max(200, iters // 4), warmup, budget)
                    rows.append({"policy": name, "hidden": hidden, "params": n_params, "backend": backend,
                                 "precision": prec, "file_mb": path.stat().st_size / 2**20, "limit_mb": budget, **m})  # fmt: skip
    _add_agreement(rows)
    result = {"obs_dim": obs_dim, "n_actions": N_ACTIONS, "iters": iters, "threads": 1, "rows": rows}
    write_outputs(result, out)
    return result


def _add_agreement(rows: list[dict[str, Any]]) -> None:
    """int8 vs fp32 greedy-action agreement on 256 random observations (a fidelity proxy)."""
    for r in rows:
        if r["precision"] != "int8" or r.get("status") != "ok":
            continue
        ref = next((x for x in rows if x["policy"] == r["policy"] and x["backend"] == r["backend"]
                    and x["precision"] == "fp32" and x.get("status") == "ok"), None)  # fmt: skip
        if ref:
            r["action_agreement"] = float(
                np.mean(np.array(r["probe_actions"]) == np.array(ref["probe_actions"]))
            )


def table_markdown(result: dict[str, Any]) -> str:
    """Table 4/6 style: latency per policy and precision, speedup, memory, size, memory-limit outcome."""
    lines = [
        f"Deployment: batch 1, 1 thread, obs dim {result['obs_dim']}, {result['n_actions']} actions",
        "",
        "| policy | layers | backend | precision | mem limit (MB) | status | p50 latency (ms) | speedup vs fp32 "
        "| peak RSS (MB) | model RSS (MB) | file (MB) | action agreement |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        ref = next((x for x in result["rows"] if x["policy"] == r["policy"] and x["backend"] == r["backend"]
                    and x["precision"] == "fp32" and x["limit_mb"] is None), None)  # fmt: skip
        ok = r.get("status") == "ok"
        speed = (
            f"{ref['latency_ms_p50'] / r['latency_ms_p50']:.2f}x"
            if ok and ref and ref.get("status") == "ok"
            else "-"
        )
        lat = f"{r['latency_ms_p50']:.4f}" if ok else "-"
        agree = f"{100 * r['action_agreement']:.0f}%" if "action_agreement" in r else ""
        status = r.get("status", "?") if ok else f"{r.get('status')}: {r.get('error', '')[:60]}"
        lines.append(
            f"| {r['policy']} | {'-'.join(map(str, r['hidden']))} | {r['backend']} | {r['precision']} | "
            f"{r['limit_mb'] or '-'} | {status} | {lat} | {speed} | {r.get('peak_rss_mb', 0):.1f} | "
            f"{r.get('model_rss_mb', 0):.1f} | {r['file_mb']:.3f} | {agree} |"
        )
    return "\n".join(lines) + "\n"


def write_outputs(result: dict[str, Any], out: Path) -> None:
    """``deploy.json``, ``deploy.csv`` and ``deploy_table.md``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "deploy.json").write_text(json.dumps(result, indent=2))
    cols = ["policy", "backend", "precision", "limit_mb", "status", "latency_ms_p50", "latency_ms_mean",
            "peak_rss_mb", "model_rss_mb", "file_mb", "action_agreement"]  # fmt: skip
    with open(out / "deploy.csv", "w") as f:
        f.write(",".join(cols) + "\n")
        for r in result["rows"]:
            f.write(",".join("" if r.get(c) is None else str(r.get(c)) for c in cols) + "\n")
    (out / "deploy_table.md").write_text(table_markdown(result))


def main(argv: list[str] | None = None) -> int:
    """Worker entry point: ``python -m actorq.studies.deploy --backend onnx --model M --obs-dim N``."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--backend", choices=["onnx", "torchscript"], required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--obs-dim", type=int, required=True)
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--limit-mb", type=float, default=None)
    args = p.parse_args(argv)
    print(json.dumps(_worker(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
