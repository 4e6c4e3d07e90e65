"""fp32 vs mixed-precision DQN training (QuaRL Table 5 / Fig. 5, Policies A/B/C).

The same DQN task is trained with three network sizes in fp32 and in mixed precision: on CPU, bf16 autocast
(matmuls in bf16, master weights and optimizer in fp32; bf16 has fp32's exponent range, so no loss scaling);
on a GPU, fp16 autocast with dynamic loss scaling (``torch.amp.GradScaler``), as the paper did. Reported: wall
time per gradient update, speedup, and evaluation reward curves. A CPU without native bf16 matmul units
emulates them, and mixed precision is then slower: the report says so rather than hiding it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback

from actorq.studies import envs, plots, zoo

logger = logging.getLogger(__name__)

SIZES: dict[str, list[int]] = {"A": [64, 64], "B": [256, 256], "C": [1024, 1024]}


class MixedPrecisionDQN(DQN):
    """SB3 DQN whose ``train`` runs under autocast (bf16 on CPU, fp16 + loss scaling on CUDA) and is timed."""

    def __init__(self, *args: Any, precision: str = "fp32", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if precision not in ("fp32", "bf16", "fp16"):
            raise ValueError(f"precision must be fp32, bf16 or fp16, got {precision!r}")
        if precision == "fp16" and self.device.type != "cuda":
            raise ValueError("fp16 mixed precision needs a CUDA device; use bf16 on CPU")
        self.precision = precision
        self.update_seconds = 0.0
        self.updates = 0
        self.scaler = torch.amp.GradScaler("cuda") if precision == "fp16" else None

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        """SB3's DQN update, under autocast; identical maths in fp32 mode."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)
        t0 = time.perf_counter()
        losses = []
        for _ in range(gradient_steps):
            data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
            discounts = data.discounts if data.discounts is not None else self.gamma
            with torch.autocast(self.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                with torch.no_grad():
                    next_q = self.q_net_target(data.next_observations).max(dim=1)[0].reshape(-1, 1).float()
                    target = data.rewards + (1 - data.dones) * discounts * next_q
                q = torch.gather(self.q_net(data.observations), dim=1, index=data.actions.long()).float()
                loss = F.smooth_l1_loss(q, target)
            self.policy.optimizer.zero_grad()
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.policy.optimizer)
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.scaler.step(self.policy.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            losses.append(loss.item())
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.update_seconds += time.perf_counter() - t0
        self.updates += gradient_steps
        self._n_updates += gradient_steps
        self.logger.record("train/loss", float(np.mean(losses)))


class RewardCurve(BaseCallback):
    """Deterministic evaluation every ``every`` steps (a few episodes, fixed seed)."""

    def __init__(self, env_id: str, every: int, episodes: int) -> None:
        super().__init__()
        self.env_id, self.every, self.episodes = env_id, every, episodes
        self.steps: list[int] = []
        self.rewards: list[float] = []
        self.eval_seconds = 0.0

    def _on_step(self) -> bool:
        if self.num_timesteps % self.every == 0:
            t = time.perf_counter()
            r = envs.evaluate(self.model, self.env_id, self.episodes, seed=envs.eval_seed(0))
            self.eval_seconds += time.perf_counter() - t
            self.steps.append(self.num_timesteps)
            self.rewards.append(float(r.mean()))
        return True


def train_one(
    env_id: str,
    hidden: list[int],
    precision: str,
    steps: int,
    seed: int,
    eval_every: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train one DQN; return timing and its reward curve."""
    kwargs, _ = zoo.hyperparams("dqn", env_id)
    kwargs["policy_kwargs"] = {"net_arch": list(hidden)}
    if not envs.is_atari(env_id):
        # Same update/step ratio as the tuned CartPole set (128 per 256), in smaller, more frequent chunks.
        kwargs.update(train_freq=16, gradient_steps=8)
    venv = envs.make_env(env_id, n_envs=1, seed=seed, training=True)
    policy = "CnnPolicy" if envs.is_atari(env_id) else "MlpPolicy"
    model = MixedPrecisionDQN(
        policy, venv, precision=precision, seed=seed, device=device, verbose=0, **kwargs
    )
    cb = RewardCurve(env_id, eval_every, episodes=5)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=cb)
    wall = time.perf_counter() - t0 - cb.eval_seconds
    n_params = sum(p.numel() for p in model.q_net.parameters())
    return {
        "hidden": list(hidden),
        "params": n_params,
        "precision": precision,
        "device": device,
        "updates": model.updates,
        "update_ms": 1e3 * model.update_seconds / max(1, model.updates),
        "train_wall_s": wall,
        "curve_steps": cb.steps,
        "curve_rewards": cb.rewards,
        "final_reward": cb.rewards[-1] if cb.rewards else float("nan"),
    }


def run_mixed_precision(
    env_id: str = "CartPole-v1",
    sizes: dict[str, list[int]] | None = None,
    steps: int = 20_000,
    seed: int = 0,
    eval_every: int = 2000,
    out: str | Path | None = None,
    threads: int = 1,
) -> dict[str, Any]:
    """fp32 vs mixed precision for every size; on a CUDA machine fp16+loss scaling on the GPU as well."""
    torch.set_num_threads(threads)
    sizes = sizes or SIZES
    combos = [("cpu", "fp32"), ("cpu", "bf16")]
    if torch.cuda.is_available():
        combos += [("cuda", "fp32"), ("cuda", "fp16")]
    runs = []
    for name, hidden in sizes.items():
        for device, prec in combos:
            r = train_one(env_id, hidden, prec, steps, seed, eval_every, device=device)
            r["policy"] = name
            runs.append(r)
            logger.info(
                "MP %s %s %s: %.3f ms/update, final %.1f",
                name,
                device,
                prec,
                r["update_ms"],
                r["final_reward"],
            )
    for r in runs:
        ref = next(
            x
            for x in runs
            if x["policy"] == r["policy"] and x["device"] == r["device"] and x["precision"] == "fp32"
        )
        r["speedup"] = ref["update_ms"] / r["update_ms"]
    result = {
        "env_id": env_id, "steps": steps, "seed": seed, "threads": threads, "runs": runs,
        "cpu_bf16_native": _cpu_has_bf16(), "cuda": torch.cuda.is_available(),
    }  # fmt: skip
    if out is not None:
        write_outputs(result, Path(out))
    return result


def _cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def table_markdown(result: dict[str, Any]) -> str:
    """Table 5 style: per policy size and precision, time per update, speedup, final reward."""
    lines = [
        f"Mixed precision DQN on {result['env_id']}, {result['steps']} steps, {result['threads']} thread(s); "
        f"CPU native bf16: {result['cpu_bf16_native']}",
        "",
        "| policy | layers | params | device | precision | ms/update | speedup | train wall (s) | final reward |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['policy']} | {'x'.join(map(str, r['hidden']))} | {r['params']} | {r['device']} | {r['precision']} | "
            f"{r['update_ms']:.3f} | {r['speedup']:.2f}x | {r['train_wall_s']:.1f} | {r['final_reward']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def write_outputs(result: dict[str, Any], out: Path) -> None:
    """``mixed_precision.json/csv``, ``mixed_precision_table.md`` and ``mixed_precision_rewards.png``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "mixed_precision.json").write_text(json.dumps(result, indent=2))
    cols = ["policy", "params", "device", "precision", "update_ms", "speedup", "train_wall_s", "final_reward"]
    with open(out / "mixed_precision.csv", "w") as f:
        f.write(",".join(cols) + "\n")
        for r in result["runs"]:
            f.write(",".join(str(r[c]) for c in cols) + "\n")
    (out / "mixed_precision_table.md").write_text(table_markdown(result))
    curves = {
        f"{r['policy']} {r['device']} {r['precision']}": (r["curve_steps"], r["curve_rewards"])
        for r in result["runs"]
    }
    plots.reward_curves(
        curves, out / "mixed_precision_rewards.png", f"DQN {result['env_id']}: fp32 vs mixed precision"
    )
