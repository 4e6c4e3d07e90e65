"""QuaRL Figure 1 analogue trained to convergence: fp32, PTQ of that fp32 policy, and QAT, per bit width.

The grid is (agent-task pair) x (fp32 | QAT at each bit width) x (training seed). Each finished cell writes one
small JSON record under ``<out>/records/<pair>/`` (episode returns, learning curve, weight and activation
ranges, the deployment check); a re-run skips cells whose record exists, so the study resumes where it stopped
and several shards (``shard=(i, n)``) can share the grid. An fp32 cell also holds the PTQ results of its
policy at every bit width (weights only, and weights + activations calibrated on 500 recorded observations);
a rerun with more widths completes existing fp32 records from their kept policies.
A QAT cell, under the default ``finetune`` schedule, fine-tunes the fp32 cell's policy (same pair and seed; its
weights are kept under ``<out>/policies/``, or retrained with the same seed when missing) with fake quantization by
the pair's :class:`~actorq.studies.qat_finetune.QatRecipe`; the ``from_scratch`` schedule (the committed
``reports/studies/qat_convergence`` records) trains from scratch with quant delay = half the steps. Either is then
evaluated twice: as the fake-quant graph, and as deployed (:func:`actorq.studies.qat_deploy.deploy_integer`:
integer codes, integer accumulation); the deployed returns are the QAT result. ``actorq qat-report``
(:mod:`actorq.studies.qat_md`) renders it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback

from actorq.progress import TaskProgress
from actorq.studies import envs, qat, qat_finetune, zoo
from actorq.studies.policy_stats import action_stats, weight_ranges
from actorq.studies.qat_outcomes import (
    CALIB_STEPS,
    CHECK_OBS_SEED,
    CONTROL_KIND,
    control_outcome,
    evaluate,
    ptq_widths,
    qat_outcome,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pair:
    """One agent-task pair and the training budget at which its fp32 policy converges here."""

    algo: str
    """SB3 algorithm name."""
    env_id: str
    """Gymnasium id."""
    steps: int
    """fp32 training budget (environment steps)."""
    overrides: dict[str, Any] = field(default_factory=dict, hash=False)
    """Hyperparameters that replace :func:`actorq.studies.zoo.hyperparams`' for this pair."""
    recipe: qat_finetune.QatRecipe = field(default_factory=qat_finetune.QatRecipe)
    """How the ``finetune`` schedule fine-tunes this pair's fp32 policy with fake quantization."""

    @property
    def key(self) -> str:
        return f"{self.algo}_{self.env_id}"


PAIRS: dict[str, Pair] = {
    p.key: p
    for p in (
        Pair("ppo", "CartPole-v1", 50_000),
        Pair("a2c", "CartPole-v1", 100_000),
        # 64x64 instead of the toolkit's 400x300: converges here by ~4k steps and trains ~5x faster on 1 core.
        Pair("ddpg", "Pendulum-v1", 10_000, {"policy_kwargs": {"net_arch": [64, 64]}}),
    )
}
BITS = (
    4,
    2,
    8,
    6,
    5,
    3,
)  # low widths first (where PTQ and QAT can differ), then 8, 6 and the paper's 5 and 3
EPISODES = 30
SEEDS = 3
CURVE_POINTS = 25
SCHEDULES = ("finetune", "from_scratch")  # QAT schedules: the recipe (default), and the committed study's
CONTROL = "ft32"
"""The fine-tune control's cell and record name: the ``finetune`` schedule's fine-tune of the fp32 policy, same
recipe, seed and steps, with no quantization (so QAT against it isolates the quantization from the training)."""
FINETUNE_FIELDS = ("schedule", "recipe", "finetune_start", "ranges_frozen_at", "lr_seen")
"""What a fine-tune (QAT or control) record copies from :func:`qat_finetune.finetune_qat`'s run info."""
Cell = tuple[Any, int | str | None, int]
"""``(pair or zoo agent, None (fp32) | CONTROL | QAT bit width, seed)``."""


class CurveCallback(BaseCallback):
    """Learning curve: mean return of the last (up to 20) finished training episodes, ``points`` times a run."""

    def __init__(self, steps: int, points: int = CURVE_POINTS) -> None:
        super().__init__()
        self.every = max(1, steps // points)
        self.next_at = self.every
        self.curve: list[tuple[int, float]] = []

    def _on_training_start(self) -> None:
        self.next_at = self.num_timesteps + self.every  # a fine-tune starts at the fp32 run's step count

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_at:
            self.next_at += self.every
            buf = [ep["r"] for ep in list(self.model.ep_info_buffer)[-20:]]
            if buf:
                self.curve.append((int(self.num_timesteps), float(np.mean(buf))))
        return True


def record_path(out: Path, pair: Any, bits: int | str | None, seed: int) -> Path:
    """Where the record of one cell of ``pair`` (a :class:`Pair` or a zoo agent) lives (``bits=None``: the fp32
    cell, PTQ included; :data:`CONTROL`: the fine-tune control)."""
    name = "fp32" if bits is None else CONTROL if bits == CONTROL else f"qat{bits}"
    return out / "records" / pair.key / f"{name}_s{seed}.json"


def cells(pairs: list[Any], bits: list[int], seeds: int, control: bool = True) -> list[Cell]:
    """All cells in priority order: every fp32 cell, then (``control``) every fine-tune control cell, then QAT
    one bit width at a time (``bits`` order); a partial run has the control of every seed before any QAT."""
    order: list[Cell] = [(p, None, s) for s in range(seeds) for p in pairs]
    order += [(p, CONTROL, s) for s in range(seeds) for p in pairs] if control else []
    order += [(p, b, s) for b in bits for s in range(seeds) for p in pairs]
    return order


def shard_cells(order: list[Cell], shard: tuple[int, int]) -> list[Cell]:
    """The cells of ``order`` that shard ``(i, n)`` runs: every n-th from the i-th. With n dividing the number of
    fp32 cells (pairs x seeds), a seed's fine-tunes fall in its fp32 cell's shard, so no shard waits for
    another's policy.

    Raises:
        ValueError: Unless 0 <= i < n.
    """
    i, n = shard
    if not 0 <= i < n:
        raise ValueError(f"shard {i}/{n}: need 0 <= i < n")
    return order[i::n]


def policy_path(out: Path, pair: Pair, seed: int) -> Path:
    """Where the fp32 cell keeps its policy's weights (a torch state dict) for the QAT fine-tunes."""
    return out / "policies" / pair.key / f"fp32_s{seed}.pt"


def _fp32_model(pair: Pair, seed: int, out: Path | None) -> BaseAlgorithm:
    """The pair's fp32 policy of ``seed`` in a fresh model, as if it had just finished its fp32 training.

    The weights come from :func:`policy_path` (loaded with ``weights_only``: no unpickling), or are trained
    again with the same seed when the fp32 cell ran elsewhere. The step counter is set to the fp32 budget, so
    the fine-tune continues that run (no off-policy random warm-up, DQN's epsilon past its decay).
    """
    path = policy_path(out, pair, seed) if out is not None else None
    if path is None or not path.exists():
        fp32 = zoo.make_model(pair.algo, pair.env_id, seed=seed, **pair.overrides)
        fp32.learn(total_timesteps=pair.steps)
        state = fp32.policy.state_dict()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            torch.save(state, path)
    else:
        state = torch.load(path, weights_only=True)
    return qat_finetune.continue_from(state, pair.algo, pair.env_id, seed, pair.steps, **pair.overrides)


def write_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)  # a killed run never leaves a half-written record that would be skipped


def run_fp32_cell(
    pair: Pair, seed: int, bits: list[int], episodes: int, out: Path | None = None
) -> dict[str, Any]:
    """Train fp32 to the pair's budget (keeping its weights under ``out``), evaluate it, PTQ it at every width."""
    model = zoo.make_model(pair.algo, pair.env_id, seed=seed, **pair.overrides)
    curve = CurveCallback(pair.steps)
    t0 = time.perf_counter()
    model.learn(total_timesteps=pair.steps, callback=curve)
    train_s = time.perf_counter() - t0
    if out is not None:
        policy_path(out, pair, seed).parent.mkdir(parents=True, exist_ok=True)
        torch.save(model.policy.state_dict(), policy_path(out, pair, seed))
    fp32 = evaluate(model, pair.env_id, episodes)
    calib = envs.record_observations(model, pair.env_id, CALIB_STEPS, seed=CHECK_OBS_SEED)
    res, act_ranges = ptq_widths(model, pair.env_id, bits, episodes, calib)
    return {
        "kind": "fp32", "pair": pair.key, "algo": pair.algo, "env_id": pair.env_id, "steps": pair.steps,
        "seed": seed, "episodes": episodes, "train_seconds": round(train_s, 1), "curve": curve.curve,
        "fp32": fp32, **res, "weight_ranges": weight_ranges(model), "activation_ranges": act_ranges,
        "action_stats": action_stats(model, calib),
    }  # fmt: skip


def run_qat_cell(
    pair: Pair, bits: int, seed: int, episodes: int, schedule: str = "finetune", out: Path | None = None
) -> dict[str, Any]:
    """Train with QAT by ``schedule``, check the integer deployment against the graph, evaluate both.

    ``finetune``: the pair's recipe applied to its fp32 policy of the same seed (:func:`_fp32_model`).
    ``from_scratch``: QAT from scratch, quant delay = steps / 2 (the committed ``qat_convergence`` records).
    """
    if schedule == "finetune":
        fp32 = _fp32_model(pair, seed, out)
        curve = CurveCallback(pair.recipe.finetune_steps)
        model, info = qat_finetune.finetune_qat(fp32, pair.env_id, bits, pair.recipe, callbacks=[curve])
        sched = {k: info[k] for k in FINETUNE_FIELDS}
    else:
        curve = CurveCallback(pair.steps)
        model, info = qat.train_qat(
            pair.algo, pair.env_id, bits, pair.steps, pair.steps // 2, seed=seed, callbacks=[curve],
            **pair.overrides,
        )  # fmt: skip
        sched = {"schedule": "from_scratch", "quant_delay": info["quant_delay"]}
        sched["quant_enabled_at"] = info["quant_enabled_at"]
    return {
        "kind": "qat", "pair": pair.key, "algo": pair.algo, "env_id": pair.env_id, "steps": pair.steps,
        "seed": seed, "bits": bits, "act_bits": info["act_bits"], **sched, "episodes": episodes,
        "train_seconds": info["train_seconds"], "curve": curve.curve,
        **qat_outcome(model, pair.env_id, episodes), "activation_ranges": info["activation_ranges"],
    }  # fmt: skip


def run_control_cell(pair: Pair, seed: int, episodes: int, out: Path | None = None) -> dict[str, Any]:
    """The fine-tune control of :func:`run_qat_cell`'s ``finetune`` schedule: the same fp32 policy, recipe, seed
    and steps through :func:`qat_finetune.finetune_qat` with ``quantize=False``, evaluated as fp32."""
    fp32 = _fp32_model(pair, seed, out)
    curve = CurveCallback(pair.recipe.finetune_steps)
    model, info = qat_finetune.finetune_qat(
        fp32, pair.env_id, 0, pair.recipe, callbacks=[curve], quantize=False
    )
    return {
        "kind": CONTROL_KIND, "pair": pair.key, "algo": pair.algo, "env_id": pair.env_id, "steps": pair.steps,
        "seed": seed, **{k: info[k] for k in FINETUNE_FIELDS}, "episodes": episodes,
        "train_seconds": info["train_seconds"], "curve": curve.curve,
        **control_outcome(model, pair.env_id, episodes),
    }  # fmt: skip


PolicyLoader = Callable[[list[int]], tuple[BaseAlgorithm, str | envs.EnvSpec] | None]
"""Given the missing widths, the fp32 policy and its env to complete a record with (None: cannot, logged)."""


def complete_ptq(path: Path, bits: list[int], load: PolicyLoader, replicate: int = 0) -> list[int]:
    """Add PTQ W and W+A at the widths of ``bits`` that the fp32 record at ``path`` lacks; returns them.

    The missing widths are computed by :func:`ptq_widths` on the policy ``load`` gives, with the calibration
    observations and evaluation episodes of the cell that wrote the record, so the added entries are what that
    cell would have written. They are listed in the record's ``ptq_completed``; the record is rewritten
    atomically. Nothing is done (``[]``) when no width is missing or ``load`` returns None.
    """
    rec = json.loads(path.read_text())
    missing = [b for b in bits if str(b) not in rec["ptq_w"] or str(b) not in rec["ptq_wa"]]
    loaded = load(missing) if missing else None
    if loaded is None:
        return []
    model, env = loaded
    calib = envs.record_observations(model, env, CALIB_STEPS, seed=CHECK_OBS_SEED)
    res, _ = ptq_widths(model, env, missing, int(rec["episodes"]), calib, replicate)
    for key in ("ptq_w", "ptq_wa"):
        rec[key].update(res[key])
    rec["ptq_completed"] = sorted({*rec.get("ptq_completed", []), *missing}, reverse=True)
    write_record(path, rec)
    return missing


def complete_fp32_record(path: Path, out: Path, pair: Pair, seed: int, bits: list[int]) -> list[int]:
    """:func:`complete_ptq` for a pair's fp32 record, from the policy its cell kept (:func:`policy_path`,
    ``weights_only``).

    When the policy file is missing nothing is retrained (a same-seed retrain need not reproduce the policy
    whose fp32 returns the record holds): the gap is logged with how to fill it, and ``[]`` returned.
    """

    def load(missing: list[int]) -> tuple[BaseAlgorithm, str] | None:
        weights = policy_path(out, pair, seed)
        if not weights.exists():
            logger.warning(
                "%s lacks PTQ at %s bits and its policy %s is missing: not completed (delete the record to "
                "rerun the fp32 cell, which retrains it)", path, missing, weights,
            )  # fmt: skip
            return None
        model = zoo.make_model(pair.algo, pair.env_id, seed=seed, **pair.overrides)
        model.policy.load_state_dict(torch.load(weights, weights_only=True))
        return model, pair.env_id

    return complete_ptq(path, bits, load)


def run_grid(
    out: str | Path,
    pairs: list[str] | None = None,
    bits: list[int] | None = None,
    seeds: int = SEEDS,
    episodes: int = EPISODES,
    shard: tuple[int, int] = (0, 1),
    schedule: str = "finetune",
) -> list[Path]:
    """Run every missing cell of the grid that falls in ``shard`` (index i of n); return the records written.

    Under the ``finetune`` schedule each seed also has its fine-tune control cell (:func:`run_control_cell`).
    An existing fp32 record of the shard that lacks PTQ at some of ``bits`` (made with fewer ``--bits``) is
    completed in place (:func:`complete_fp32_record`) and counts as written.

    Raises:
        ValueError: On an unknown pair name, a bad shard or an unknown QAT schedule.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown QAT schedule {schedule!r}; choose from {SCHEDULES}")
    unknown = [p for p in pairs or [] if p not in PAIRS]
    if unknown:
        raise ValueError(f"unknown pairs {unknown}; choose from {sorted(PAIRS)}")
    out = Path(out)
    chosen = [PAIRS[p] for p in pairs] if pairs else list(PAIRS.values())
    bit_list = list(bits or BITS)
    written = []
    todo = list(shard_cells(cells(chosen, bit_list, seeds, control=schedule == "finetune"), shard))
    done = sum(record_path(out, *cell).exists() for cell in todo)
    with TaskProgress("QAT study cells", len(todo), done=done) as progress:
        for pair, b, seed in todo:
            path = record_path(out, pair, b, seed)
            if path.exists():
                if b is None and complete_fp32_record(path, out, pair, seed, bit_list):
                    written.append(path)
                continue
            progress.start(f"{pair.key} {path.stem}")
            t0 = time.perf_counter()
            if b is None:
                rec = run_fp32_cell(pair, seed, bit_list, episodes, out)
            elif b == CONTROL:
                rec = run_control_cell(pair, seed, episodes, out)
            else:
                rec = run_qat_cell(pair, int(b), seed, episodes, schedule, out)
            rec["cell_seconds"] = round(time.perf_counter() - t0, 1)
            write_record(path, rec)
            written.append(path)
            logger.info("cell %s done in %.0f s", path.relative_to(out), rec["cell_seconds"])
            progress.advance()
    return written
