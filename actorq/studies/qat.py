"""Quantization-aware training of SB3 policies, and the QAT vs PTQ vs fp32 comparison (QuaRL Fig. 1).

Every Linear/Conv of the deployed networks (and of their target copies) is replaced by a
:class:`~actorq.studies.torch_fake_quant.QuantLayer` *before* training: weights are fake-quantized with the
PTQ scheme, input activations with EMA-tracked asymmetric ranges, and gradients flow through a
straight-through estimator into the same fp32 master parameters the SB3 optimizer owns. Quantization is
switched on at step ``quant_delay`` (ranges are observed from the start, as TF's ``quant_delay`` did). After
training the wrappers are checked to still be in place and to have run in quantized mode, so a QAT run can't
silently turn into an fp32 one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from actorq.progress import TaskProgress
from actorq.studies import envs, plots, ptq, zoo
from actorq.studies import torch_fake_quant as tq

logger = logging.getLogger(__name__)


class QuantDelayCallback(BaseCallback):
    """Turns fake quantization on once ``num_timesteps >= quant_delay``."""

    def __init__(self, modules: dict[str, Any], quant_delay: int) -> None:
        super().__init__()
        self.modules = modules
        self.quant_delay = quant_delay
        self.enabled_at: int | None = None

    def _set(self, on: bool) -> None:
        for m in self.modules.values():
            tq.set_quant_enabled(m, on)

    def _on_training_start(self) -> None:
        on = self.quant_delay <= 0
        self._set(on)
        self.enabled_at = 0 if on else None

    def _on_step(self) -> bool:
        if self.enabled_at is None and self.num_timesteps >= self.quant_delay:
            self._set(True)
            self.enabled_at = self.num_timesteps
            logger.info("QAT: fake quantization on at step %d", self.num_timesteps)
        return True


def train_qat(
    algo: str,
    env_id: str,
    bits: int,
    steps: int,
    quant_delay: int,
    seed: int = 0,
    act_bits: int | None = None,
    per_channel_linear: bool = False,
    out: str | Path | None = None,
    callbacks: list[BaseCallback] | None = None,
    **overrides: Any,
) -> tuple[BaseAlgorithm, dict[str, Any]]:
    """Train ``algo`` on ``env_id`` with fake-quantized weights/activations from ``quant_delay`` on.

    Args:
        algo: ``a2c``, ``ppo``, ``dqn`` or ``ddpg`` (``td3``/``sac`` work too).
        env_id: Gymnasium id.
        bits: Weight bit width.
        steps: Training environment steps.
        quant_delay: Step at which quantization starts.
        seed: Training seed.
        act_bits: Activation bit width (default: ``bits``; 0 disables activation quantization).
        per_channel_linear: Per-output-row scales for Linear weights.
        out: Optional directory for ``model.zip`` (fp32 master weights) and ``qat.json``.
        callbacks: Extra SB3 callbacks (e.g. a learning-curve recorder), run after the quant-delay switch.
        **overrides: Hyperparameters passed to :func:`actorq.studies.zoo.make_model` (give the fp32 run's).

    Returns:
        The model with its QuantLayers still in place and quantization on, and run info.
    """
    if quant_delay >= steps:
        raise ValueError(f"quant_delay ({quant_delay}) must be < steps ({steps}) or nothing is quantized")
    act_bits = bits if act_bits is None else (act_bits or None)
    scheme = tq.QuantScheme.parse(str(bits), per_channel_linear=per_channel_linear)
    model = zoo.make_model(algo, env_id, seed=seed, **overrides)
    mods = zoo.qat_modules(model)
    wrapped = {name: tq.wrap_quant_layers(m, scheme, act_bits=act_bits) for name, m in mods.items()}
    cb = QuantDelayCallback(mods, quant_delay)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps, callback=[cb, *(callbacks or [])])
    train_s = time.perf_counter() - t0
    check = verify_qat(model)
    info = {
        "algo": algo,
        "env_id": env_id,
        "seed": seed,
        "bits": bits,
        "act_bits": act_bits,
        "steps": steps,
        "quant_delay": quant_delay,
        "quant_enabled_at": cb.enabled_at,
        "train_seconds": round(train_s, 2),
        "wrapped_layers": wrapped,
        "quantized_forwards": check,
        "activation_ranges": {n: tq.activation_ranges(m) for n, m in mods.items()},
    }
    if out is not None:
        save_qat(model, info, Path(out))
    return model, info


def verify_qat(model: BaseAlgorithm) -> dict[str, int]:
    """Fail loudly if a deployed layer lost its fake-quant wrapper or never ran quantized."""
    counts: dict[str, int] = {}
    for name, mod in zoo.deployed_modules(model).items():
        layers = dict(tq.quant_layers(mod))
        inner = {id(q.layer) for q in layers.values()}
        bare = [
            n for n, m in mod.named_modules() if isinstance(m, tq.QUANT_LAYER_TYPES) and id(m) not in inner
        ]
        if not layers or bare:
            raise RuntimeError(f"QAT hooks lost in {name}: unwrapped layers {bare}")
        for lname, q in layers.items():
            counts[f"{name}.{lname}"] = q.quantized_forwards
    idle = [k for k, v in counts.items() if v == 0]
    if idle:
        # PPO/A2C value heads always run in training; an idle layer means the hook never fired.
        raise RuntimeError(f"QAT layers never ran quantized: {idle}")
    return counts


def save_qat(model: BaseAlgorithm, info: dict[str, Any], out: Path) -> None:
    """Save the fp32 master weights (SB3 zip, wrappers removed temporarily) and the QAT info."""
    out.mkdir(parents=True, exist_ok=True)
    mods = zoo.qat_modules(model)
    saved = {}
    for name, m in mods.items():
        saved[name] = [(n, q) for n, q in tq.quant_layers(m)]
        tq.unwrap_quant_layers(m)
    try:
        model.save(out / "model.zip")
    finally:
        for name, m in mods.items():
            for n, q in saved[name]:
                parent_name, _, child = n.rpartition(".")
                setattr(m.get_submodule(parent_name) if parent_name else m, child, q)
    meta = {
        "algo": info["algo"],
        "env_id": info["env_id"],
        "seed": info["seed"],
        "steps": info["steps"],
        "qat": True,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    (out / "qat.json").write_text(json.dumps(info, indent=2, default=str))


def _evaluate(model: BaseAlgorithm, env_id: str, episodes: int, seeds: int) -> list[float]:
    return [
        float(envs.evaluate(model, env_id, episodes, seed=envs.eval_seed(s)).mean()) for s in range(seeds)
    ]


QatTrainer = Callable[[BaseAlgorithm, int, int], tuple[BaseAlgorithm, dict[str, Any]]]
"""``(fp32 model of the seed, bits, seed) -> (QAT model, run info)``: how :func:`compare` gets a QAT policy other
than by training from scratch (e.g. :func:`actorq.studies.qat_finetune.finetune_from`)."""


def compare(
    algo: str,
    env_id: str,
    bits_list: list[int],
    steps: int,
    quant_delay: int | None,
    seeds: int = 3,
    episodes: int = 20,
    eval_seeds: int = 1,
    out: str | Path | None = None,
    finetune: QatTrainer | None = None,
) -> dict[str, Any]:
    """QAT vs PTQ vs fp32 at each bit width, over ``seeds`` independently trained policies.

    For each training seed: one fp32 policy (its fp32 reward and its PTQ rewards, weights-only and
    weights+activations, at every bit width) and one QAT policy per bit width: ``finetune`` applied to that fp32
    policy, or (``finetune`` None) trained from scratch with quantization from ``quant_delay`` on. The mean
    reward of a seed is over ``eval_seeds x episodes`` deterministic episodes; the table gives mean +/- std over
    training seeds.
    """
    if finetune is None and quant_delay is None:
        raise ValueError("QAT from scratch needs a quant_delay")
    per: dict[str, dict[int, list[float]]] = {
        k: {b: [] for b in bits_list} for k in ("ptq_w", "ptq_wa", "qat")
    }
    fp32: list[float] = []
    runs = []
    with TaskProgress(f"QAT {algo} {env_id}", seeds * len(bits_list)) as progress:
        for seed in range(seeds):
            base, meta = zoo.train(algo, env_id, steps, seed=seed, eval_episodes=0)
            fp32.append(float(np.mean(_evaluate(base, env_id, episodes, eval_seeds))))
            for b in bits_list:
                progress.start(f"seed {seed} bits {b}")
                for key, act in (("ptq_w", False), ("ptq_wa", True)):
                    cfg = ptq.PtqConfig(
                        precisions=["fp32", str(b)], episodes=episodes, seeds=eval_seeds, quantize_activations=act,
                        calib_steps=500,
                    )  # fmt: skip
                    res = ptq.run_ptq(base, env_id, cfg)
                    per[key][b].append(res["rows"][1]["mean"])
                if finetune is not None:
                    model, info = finetune(base, b, seed)
                else:
                    model, info = train_qat(algo, env_id, b, steps, quant_delay or 0, seed=seed)
                per["qat"][b].append(float(np.mean(_evaluate(model, env_id, episodes, eval_seeds))))
                runs.append(
                    {k: v for k, v in info.items() if k not in ("activation_ranges", "quantized_forwards")}
                )
                logger.info("seed %d bits %d: fp32 %.1f qat %.1f", seed, b, fp32[-1], per["qat"][b][-1])
                progress.advance()
    rows = []
    for b in bits_list:
        row: dict[str, Any] = {"bits": b, "fp32_mean": float(np.mean(fp32)), "fp32_std": float(np.std(fp32))}
        for key in per:
            row[f"{key}_mean"] = float(np.mean(per[key][b]))
            row[f"{key}_std"] = float(np.std(per[key][b]))
            row[f"{key}_seeds"] = per[key][b]
        rows.append(row)
    result = {
        "algo": algo, "env_id": env_id, "steps": steps, "seeds": seeds,
        "schedule": "from_scratch" if finetune is None else "finetune",
        "quant_delay": quant_delay if finetune is None else None,
        "episodes": episodes * eval_seeds, "rows": rows, "fp32_seeds": fp32, "runs": runs,
    }  # fmt: skip
    if out is not None:
        write_outputs(result, Path(out))
    return result


def table_markdown(result: dict[str, Any]) -> str:
    """The comparison table (mean +/- std over training seeds)."""
    if result.get("schedule") == "finetune":
        how = f"QAT fine-tuned from each fp32 policy ({result['runs'][0]['recipe']['finetune_steps']} steps)"
    else:
        how = f"QAT from scratch, quant delay {result['quant_delay']}"
    lines = [
        f"QAT vs PTQ: {result['algo']} {result['env_id']}, {result['steps']} steps, {how}, "
        f"{result['seeds']} training seeds x {result['episodes']} episodes",
        "",
        "| bits | fp32 | PTQ (weights) | PTQ (weights+acts) | QAT (weights+acts) |",
        "|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        cells = [f"{r[f'{k}_mean']:.1f} +/- {r[f'{k}_std']:.1f}" for k in ("fp32", "ptq_w", "ptq_wa", "qat")]
        lines.append(f"| {r['bits']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_outputs(result: dict[str, Any], out: Path) -> None:
    """``qat.json``, ``qat.csv``, ``qat_table.md`` and ``qat_vs_ptq.png`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "qat.json").write_text(json.dumps(result, indent=2))
    keys = ["fp32", "ptq_w", "ptq_wa", "qat"]
    with open(out / "qat.csv", "w") as f:
        f.write("bits," + ",".join(f"{k}_mean,{k}_std" for k in keys) + "\n")
        for r in result["rows"]:
            f.write(
                f"{r['bits']}," + ",".join(f"{r[f'{k}_mean']:.3f},{r[f'{k}_std']:.3f}" for k in keys) + "\n"
            )
    (out / "qat_table.md").write_text(table_markdown(result))
    labels = {"fp32": "fp32", "ptq_w": "PTQ W", "ptq_wa": "PTQ W+A", "qat": "QAT W+A"}
    series = {
        labels[k]: ([r[f"{k}_mean"] for r in result["rows"]], [r[f"{k}_std"] for r in result["rows"]])
        for k in keys
    }
    plots.grouped_bars(
        [f"{r['bits']} bits" for r in result["rows"]], series, out / "qat_vs_ptq.png",
        f"QAT vs PTQ: {result['algo']} {result['env_id']}",
    )  # fmt: skip
