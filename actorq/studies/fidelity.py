"""Fidelity check of a loaded zoo agent: our fp32 return beside the zoo's own evaluation of the final model.

The zoo's ``evaluations.npz`` (written by SB3's ``EvalCallback``: ``timesteps``, ``results`` [n_evals,
n_episodes], ``ep_lengths``) is read with ``np.load(allow_pickle=False)``. Its last row evaluates the model the
zip holds. On the same env id the two means must agree within the larger of the two spreads (a loader bug,
e.g. a wrong activation or a missing observation normalization, shows up as a large gap); on a mapped id
(gym ``Hopper-v3`` run as gymnasium ``Hopper-v4``) the physics differ, so the gap is reported as version drift.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def zoo_final_evaluation(path: str | Path) -> dict[str, Any]:
    """Mean/std/episodes/timestep of the last row of a zoo ``evaluations.npz``."""
    with np.load(Path(path), allow_pickle=False) as f:
        results = np.asarray(f["results"], np.float64)
        steps = np.asarray(f["timesteps"])
    if results.ndim != 2 or results.shape[0] == 0:
        raise ValueError(f"{path}: 'results' is not an [n_evals, n_episodes] array")
    last = results[-1]
    return {
        "mean": float(last.mean()),
        "std": float(last.std()),
        "episodes": int(last.size),
        "timestep": int(steps[-1]),
        "n_evals": int(results.shape[0]),
    }


def compare(
    ours_mean: float,
    ours_std: float,
    ours_episodes: int,
    zoo: dict[str, Any],
    env_id: str,
    source_id: str | None,
    model_timestep: int | None = None,
) -> dict[str, Any]:
    """Our fp32 evaluation vs the zoo's; ``verdict`` is ``agree``, ``DISAGREE`` or ``version drift``.

    Args:
        ours_mean: Our fp32 mean return.
        ours_std: Its standard deviation over episodes.
        ours_episodes: Episodes behind it.
        zoo: :func:`zoo_final_evaluation` output.
        env_id: The gymnasium id we ran.
        source_id: The id the zoo ran when it differs (else None).
        model_timestep: ``num_timesteps`` of the saved model (the zip's data), to flag a model saved after
            training continued past the last evaluation.
    """
    diff = ours_mean - zoo["mean"]
    tolerance = max(ours_std, zoo["std"])
    within = abs(diff) <= tolerance + 1e-6 * max(1.0, abs(zoo["mean"]))
    if source_id:
        verdict = "version drift"  # different physics: the gap is reported, not judged
    else:
        verdict = "agree" if within else "DISAGREE"
    return {
        "ours_mean": ours_mean,
        "ours_std": ours_std,
        "ours_episodes": ours_episodes,
        "ours_env": env_id,
        "zoo_mean": zoo["mean"],
        "zoo_std": zoo["std"],
        "zoo_episodes": zoo["episodes"],
        "zoo_timestep": zoo["timestep"],
        "zoo_env": source_id or env_id,
        "difference": diff,
        "tolerance": tolerance,
        "within_spread": bool(within),
        "verdict": verdict,
        "model_timestep": model_timestep,
        "trained_after_eval": bool(model_timestep is not None and model_timestep > zoo["timestep"]),
    }


def describe(c: dict[str, Any]) -> str:
    """One line for the terminal and the report."""
    line = (
        f"fidelity: ours fp32 {c['ours_mean']:.1f} +/- {c['ours_std']:.1f} ({c['ours_episodes']} episodes, "
        f"{c['ours_env']}) vs zoo final eval {c['zoo_mean']:.1f} +/- {c['zoo_std']:.1f} ({c['zoo_episodes']} "
        f"episodes at step {c['zoo_timestep']}, {c['zoo_env']}): difference {c['difference']:+.1f}, "
        f"spread {c['tolerance']:.1f} -> {c['verdict']}"
    )
    if c.get("trained_after_eval"):
        line += (
            f" (the zip holds the model at step {c['model_timestep']}: training went on after the zoo's last "
            "evaluation, so that evaluation is of a slightly different model)"
        )
    if c["verdict"] == "version drift":
        line += (
            f" ({c['zoo_env']} is not available here; {c['ours_env']} has the same spaces, different physics)"
        )
    return line
