"""``make device-check`` / ``python actorq/bench/device_check.py --out FILE.json``: what a GPU box does for ActorQ,
with torch alone (a lent device machine has Python 3.12 and torch, no TensorFlow, no registry, a 64 MiB tree).

* **Actors** (CPU): N processes, one per core (N = 1, 2, 4, ... up to the cores, or ``--procs``), each timing forwards
  of one policy at one precision for ``--seconds`` after a common start, so all N share the memory bus: does int8's
  lead over fp32 grow when many actors share memory bandwidth? Policies: the 3x2048 MLP (obs 6, 3 actions: Acrobot's
  DQN) and the Nature-CNN conv policy (84x84x4, 6 actions); precisions fp32, int8 (torch's dynamic qint8 Linear for
  the MLP, FX static quantization for the conv net, fbgemm/x86) and fp16; batch 1 and 8. Each quantized policy is
  checked against fp32 first (greedy action agreement, largest relative error) and the check goes into the JSON.
* **Learner** (GPU, when torch sees one): torch twins of the DQN update (double Q-learning, Huber loss, Adam, 3x2048,
  batch 64) and the D4PG update (3x2048 policy, distributional critic 512-512-256 with 51 atoms and the categorical
  projection, Adam, batch 256), fp32: learner steps/s and samples/s; ``actorq plan CONFIG --learner-steps-per-s R
  --actor-cores N`` takes R. A twin is not Acme's TF learner (no Reverb, no priorities), so R is an upper bound of
  the update alone.

Writes one JSON naming the machine (CPU model and cores, GPU name and memory, torch and Python versions). Without a
GPU it runs the CPU part and exits 0. Imports nothing of ActorQ's (runs as a file: torch and the standard library).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import multiprocessing as mp
import os
import platform
import queue
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

log = logging.getLogger("device_check")

MLP = {"obs": 6, "actions": 3, "layers": (2048, 2048, 2048)}
"""Acrobot's DQN policy, the paper's 3x2048."""
CONV = {"frames": 4, "size": 84, "actions": 6}
"""The Nature-CNN (Mnih et al. 2015) on Atari frames."""
PRECISIONS = ("fp32", "int8", "fp16")
BATCHES = (1, 8)


def mlp(obs: int, out: int, layers: tuple[int, ...]) -> nn.Sequential:
    dims, mods = [obs, *layers], []
    for a, b in zip(dims[:-1], dims[1:], strict=True):
        mods += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*mods, nn.Linear(dims[-1], out))


def nature_cnn(frames: int = 4, actions: int = 6) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(frames, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, actions),
    )  # fmt: skip


def example(policy: str, batch: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(batch)
    if policy == "mlp":
        return torch.randn(batch, MLP["obs"], generator=g)
    return torch.rand(batch, CONV["frames"], CONV["size"], CONV["size"], generator=g)


def build(policy: str, precision: str) -> nn.Module:
    """The policy at ``precision`` (seeded weights; int8 quantized from the fp32 net)."""
    torch.manual_seed(0)
    net = (mlp(MLP["obs"], MLP["actions"], MLP["layers"]) if policy == "mlp" else nature_cnn(**{
        "frames": CONV["frames"], "actions": CONV["actions"]})).eval()  # fmt: skip
    if precision == "fp16":
        return net.half()
    if precision == "int8":
        torch.backends.quantized.engine = (
            "x86" if "x86" in torch.backends.quantized.supported_engines else "fbgemm"
        )
        if policy == "mlp":
            return torch.ao.quantization.quantize_dynamic(net, {nn.Linear}, dtype=torch.qint8)
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

        x = example(policy, 8)
        prepared = prepare_fx(net, get_default_qconfig_mapping(torch.backends.quantized.engine), (x,))
        with torch.no_grad():
            for b in (1, 8, 8):
                prepared(example(policy, b))
        return convert_fx(prepared)
    return net


def agreement(policy: str, precision: str) -> dict[str, float]:
    """``precision``'s outputs against fp32's on 64 inputs: greedy-action agreement and the largest error relative
    to fp32's largest output (verified, never assumed)."""
    ref, net = build(policy, "fp32"), build(policy, precision)
    scales = (0.5, 1, 2, 4, 0.25, 1.5, 3, 0.75) if policy == "mlp" else (1.0,) * 8  # frames stay in [0, 1]
    x = torch.cat([example(policy, 8 + i) * s for i, s in enumerate(scales)])
    with torch.no_grad():
        want = ref(x)
        got = net(x.half() if precision == "fp16" else x).float()
    scale = float(want.abs().max())
    return {
        "action_agreement": float((got.argmax(1) == want.argmax(1)).float().mean()),
        "max_relative_error": float((got - want).abs().max()) / scale if scale else math.nan,
    }


def _worker(core: int | None, tasks: Any, start: Any, out: Any) -> None:
    """One actor process for a whole pool's life: pinned to ``core``, one thread; per task ``(policy, precision,
    batch, seconds)`` it times forwards for ``seconds`` after the pool's common start (None ends it)."""
    if core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", module="torch.ao")
    nets: dict[tuple[str, str], nn.Module] = {}
    while (task := tasks.get()) is not None:
        policy, precision, batch, seconds = task
        net = nets.setdefault((policy, precision), build(policy, precision))
        x = example(policy, batch)
        x = x.half() if precision == "fp16" else x
        with torch.no_grad():
            for _ in range(3):
                net(x)
            start.wait()
            n, t0 = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - t0) < seconds:
                net(x)
                n += 1
        out.put(n / elapsed)


class ActorPool:
    """``procs`` actor processes, one per core where the machine has as many, started once (spawning a process that
    imports torch takes seconds) and given every block in turn."""

    def __init__(self, procs: int):
        ctx = mp.get_context("spawn")
        self.procs, self.start, self.out = procs, ctx.Barrier(procs), ctx.Queue()
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self.oversubscribed = procs > len(cores)
        self.tasks = [ctx.Queue() for _ in range(procs)]
        self.workers = [
            ctx.Process(
                target=_worker,
                args=(cores[i] if i < len(cores) else None, self.tasks[i], self.start, self.out),
                daemon=True,
            )  # fmt: skip
            for i in range(procs)
        ]
        for w in self.workers:
            w.start()

    def time(self, policy: str, precision: str, batch: int, seconds: float) -> dict[str, Any]:
        for q in self.tasks:
            q.put((policy, precision, batch, seconds))
        rates: list[float] = []
        deadline = time.monotonic() + seconds + 600
        while len(rates) < self.procs:
            try:
                rates.append(self.out.get(timeout=1.0))
            except queue.Empty:
                dead = [w.exitcode for w in self.workers if not w.is_alive()]
                if dead or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(
                        f"an actor process ended (exit codes {dead}) or hung: no figure"
                    ) from None
        return {
            "policy": policy, "precision": precision, "batch": batch, "procs": self.procs,
            "forwards_per_s_each": sorted(rates), "forwards_per_s_total": sum(rates),
            "samples_per_s_total": sum(rates) * batch, "oversubscribed": self.oversubscribed,
        }  # fmt: skip

    def close(self) -> None:
        for q in self.tasks:
            q.put(None)
        for w in self.workers:
            w.join(timeout=60)
            if w.is_alive():
                w.terminate()


def proc_counts(limit: int) -> list[int]:
    """1, 2, 4, 8, ... and ``limit`` itself (15 on a 16-core box: one core left to the learner's host)."""
    counts, n = [], 1
    while n < limit:
        counts.append(n)
        n *= 2
    return [*counts, limit]


# -- the learner's updates on the GPU ---------------------------------------------------------------------------
def dqn_update(device: torch.device, batch: int = 64) -> tuple[nn.Module, Any]:
    """A torch twin of Acme's DQN learner step: double Q-learning, n-step discounted targets, Huber loss, Adam."""
    q, target = (mlp(MLP["obs"], MLP["actions"], MLP["layers"]).to(device) for _ in range(2))
    target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)
    o, o2 = torch.randn(batch, MLP["obs"], device=device), torch.randn(batch, MLP["obs"], device=device)
    a = torch.randint(0, MLP["actions"], (batch,), device=device)
    r, d = torch.randn(batch, device=device), torch.full((batch,), 0.99**3, device=device)

    def step() -> None:
        with torch.no_grad():
            best = q(o2).argmax(1, keepdim=True)
            y = r + d * target(o2).gather(1, best).squeeze(1)
        loss = nn.functional.huber_loss(q(o).gather(1, a[:, None]).squeeze(1), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return q, step


def d4pg_update(device: torch.device, batch: int = 256, obs: int = 67, act: int = 21, atoms: int = 51):
    """A torch twin of Acme's D4PG learner step (Humanoid's sizes): a distributional critic (512-512-256, 51 atoms
    on [-150, 150]) trained on the categorical projection of n-step targets, the 3x2048 policy on the critic's mean."""
    policy, policy_t = (mlp(obs, act, MLP["layers"]).to(device) for _ in range(2))
    critic, critic_t = (mlp(obs + act, atoms, (512, 512, 256)).to(device) for _ in range(2))
    popt, copt = torch.optim.Adam(policy.parameters(), 1e-4), torch.optim.Adam(critic.parameters(), 1e-4)
    z = torch.linspace(-150.0, 150.0, atoms, device=device)
    dz = float(z[1] - z[0])
    o, o2 = torch.randn(batch, obs, device=device), torch.randn(batch, obs, device=device)
    a, r = torch.rand(batch, act, device=device) * 2 - 1, torch.randn(batch, device=device)
    disc = torch.full((batch,), 0.99**5, device=device)

    def project(probs: torch.Tensor) -> torch.Tensor:
        tz = (r[:, None] + disc[:, None] * z[None, :]).clamp(float(z[0]), float(z[-1]))
        b = (tz - z[0]) / dz
        lo, hi = b.floor().long(), b.ceil().long()
        out = torch.zeros_like(probs)
        out.scatter_add_(1, lo, probs * (hi.float() - b + (lo == hi).float()))
        out.scatter_add_(1, hi, probs * (b - lo.float()))
        return out

    def step() -> None:
        with torch.no_grad():
            target = project(critic_t(torch.cat([o2, torch.tanh(policy_t(o2))], 1)).softmax(1))
        logits = critic(torch.cat([o, a], 1))
        closs = -(target * logits.log_softmax(1)).sum(1).mean()
        copt.zero_grad(set_to_none=True)
        closs.backward()
        copt.step()
        q = (critic(torch.cat([o, torch.tanh(policy(o))], 1)).softmax(1) * z).sum(1)
        ploss = -q.mean()
        popt.zero_grad(set_to_none=True)
        ploss.backward()
        popt.step()

    return policy, step


def time_learner(name: str, step: Any, device: torch.device, batch: int, seconds: float) -> dict[str, Any]:
    for _ in range(20):
        step()
    torch.cuda.synchronize(device)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            step()
        torch.cuda.synchronize(device)
        n += 10
    rate = n / (time.perf_counter() - t0)
    return {"update": name, "batch": batch, "steps_per_s": rate, "samples_per_s": rate * batch}


def machine() -> dict[str, Any]:
    """The machine the figures belong to."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError, StopIteration):
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))  # fmt: skip
    info: dict[str, Any] = {
        "cpu": cpu, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(), "torch": torch.__version__, "gpu": None,
        "quantized_engines": list(torch.backends.quantized.supported_engines),
    }  # fmt: skip
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda, gpus=torch.cuda.device_count())  # fmt: skip
    return info


def run(
    procs: list[int],
    seconds: float,
    learner_seconds: float,
    policies: tuple[str, ...] = ("mlp", "conv"),
    batches: tuple[int, ...] = BATCHES,
) -> dict[str, Any]:
    """Every figure of the module docstring, as one JSON-ready dict."""
    warnings.filterwarnings("ignore", module="torch.ao")
    result: dict[str, Any] = {"machine": machine(), "actors": [], "agreement": [], "learner": []}
    for policy in policies:
        for precision in PRECISIONS[1:]:
            result["agreement"].append(
                {"policy": policy, "precision": precision, **agreement(policy, precision)}
            )
    for n in procs:
        pool = ActorPool(n)
        try:
            for policy in policies:
                for batch in batches:
                    for precision in PRECISIONS:
                        row = pool.time(policy, precision, batch, seconds)
                        log.info("%s %s batch %d x%d: %.0f forwards/s", policy, precision, batch, n,
                                 row["forwards_per_s_total"])  # fmt: skip
                        result["actors"].append(row)
        finally:
            pool.close()
    if torch.cuda.is_available():
        device = torch.device("cuda", 0)
        for name, (make, batch) in {"dqn": (dqn_update, 64), "d4pg": (d4pg_update, 256)}.items():
            _, step = make(device, batch)
            row = time_learner(name, step, device, batch, learner_seconds)
            log.info("%s update, batch %d: %.0f steps/s", name, batch, row["steps_per_s"])
            result["learner"].append(row)
        result["plan"] = (
            "actorq plan CONFIG --learner-steps-per-s R --actor-cores N with R = the update's steps_per_s "
            "(an upper bound: the twin has no Reverb sampling or priority updates)"
        )
    else:
        result["learner_skipped"] = "no GPU visible to torch: the CPU part only"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON to write")
    parser.add_argument(
        "--procs", type=int, nargs="+", help="actor process counts (default 1, 2, 4, ... cores-1)"
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per actor block (default 3)")
    parser.add_argument(
        "--learner-seconds", type=float, default=10.0, help="timing per learner update (default 10)"
    )
    parser.add_argument("--policies", nargs="+", choices=("mlp", "conv"), default=["mlp", "conv"])
    parser.add_argument(
        "--batches", type=int, nargs="+", default=list(BATCHES), help="actor batch sizes (1 8)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    procs = args.procs or proc_counts(max(1, cores - 1))
    if any(n < 1 for n in procs) or args.seconds <= 0:
        sys.stderr.write("error: --procs must be >= 1 and --seconds > 0\n")
        return 2
    result = run(procs, args.seconds, args.learner_seconds, tuple(args.policies), tuple(args.batches))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    log.info("wrote %s (%s)", args.out, result["machine"].get("gpu") or "no GPU: CPU part only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
