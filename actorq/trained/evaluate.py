"""``actorq evaluate RUN_DIR``: a trained run's policy played for N greedy episodes at a precision.

The policy is the run's learner checkpoint (the newest, or ``--checkpoint N``) at ``--precision``, quantized by the
quantizer's rule and computed by a kernel verified against fp32 on this machine (:mod:`actorq.trained.weights`).
The episodes act by the algorithm's evaluation rule (the evaluator's :func:`~actorq.roles.policy.greedy_episodes`,
one batched forward per step). It prints the mean and interquartile mean of the returns with their bootstrap
intervals (:mod:`actorq.trained.returns`), and how often the policy's actions agree with those of the same
weights at fp32 on the states it visits (:class:`~actorq.roles.agreement.ActionAgreement`; at fp32, with the int8
policy's). ``--video PATH`` records the first episode (:mod:`actorq.trained.video`); ``--json PATH`` writes the
figures for scripts (``-``: stdout).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from actorq import algorithms
from actorq.envs import make_environment
from actorq.envs.render import render_config
from actorq.roles.agreement import ActionAgreement
from actorq.roles.policy import greedy_episodes
from actorq.trained.returns import summarise
from actorq.trained.video import VideoRecorder
from actorq.trained.weights import TrainedWeights, fp32_reference, policy_at

log = logging.getLogger(__name__)

DEFAULT_SEED = 1000
"""Episode ``j`` plays the environment seeded ``SEED + j`` (the evaluator's seeds are elsewhere)."""


def evaluate(
    weights: TrainedWeights,
    precision: str,
    episodes: int,
    seed: int = DEFAULT_SEED,
    video: Path | None = None,
) -> dict[str, Any]:
    """Play ``episodes`` greedy episodes with the run's policy at ``precision``; the figures as a JSON-able dict."""
    config = weights.config
    algorithm = algorithms.get(config.algorithm)
    policy = policy_at(weights, precision, batch=episodes)
    if policy.precision == "fp32":
        other, other_name = policy_at(weights, "int8", batch=episodes), "int8"
    else:
        other, other_name = fp32_reference(weights, batch=episodes), "fp32"
    agreement = ActionAgreement(other, algorithm, policy.spec.action_low, policy.spec.action_high)
    envs = [
        make_environment(
            render_config(config.env) if video is not None and j == 0 else config.env,
            seed=seed + j,
            evaluation=True,
        )
        for j in range(episodes)
    ]
    recorder = VideoRecorder(video, envs[0].frames_per_second) if video is not None else None

    def observe(obs: np.ndarray, outputs: np.ndarray, live: list[int]) -> None:
        agreement.observe(obs, outputs, live)
        if recorder is not None and 0 in live:
            recorder.add(envs[0].render_frame())

    try:
        returns = greedy_episodes(envs, policy, algorithm, observe=observe)
        if recorder is not None:
            recorder.add(envs[0].render_frame())  # the state the first episode ended in
    finally:
        if recorder is not None:
            recorder.close()
        for env in envs:
            env.close()
    summary = summarise(returns, seed=seed)
    measure = agreement.row()
    return {
        "run_dir": str(weights.run_dir),
        "algorithm": config.algorithm,
        "task": f"{config.env.suite}:{config.env.task}",
        "checkpoint": weights.checkpoint,
        "learner_step": weights.learner_step,
        "precision": policy.precision,
        "kernel": policy.kernel_name,
        "kernel_check": policy.selection.detail,
        "returns": [float(r) for r in returns],
        **summary.to_json(),
        "compared_with": other_name,
        "agreement": measure.get("quantized_agreement"),
        "action_error": measure.get("quantized_action_error"),
        "agreement_states": measure["agreement_states"],
        "video": None if recorder is None else {"path": str(recorder.path), "frames": recorder.frames},
    }


def describe(result: dict[str, Any]) -> str:
    """The figures as a few lines for people."""
    mean, iqm = result["mean"], result["iqm"]
    step = f"learner step {result['learner_step']}" if result["learner_step"] >= 0 else "learner step unknown"
    lines = [
        f"{result['run_dir']}: {result['algorithm']} {result['task']}, learner checkpoint {result['checkpoint']} "
        f"({step})",
        f"  policy     {result['precision']} (kernel {result['kernel']}: {result['kernel_check']})",
        f"  return     mean {mean['value']:.1f} [{mean['low']:.1f}, {mean['high']:.1f}], "
        f"IQM {iqm['value']:.1f} [{iqm['low']:.1f}, {iqm['high']:.1f}], std {result['std']:.1f}",
        f"             {result['method']}",
    ]
    pair = f"{result['precision']} vs {result['compared_with']}"
    if result["agreement"] is not None:
        lines.append(
            f"  agreement  {pair}: the same greedy action on {result['agreement']:.2%} of "
            f"{result['agreement_states']} states visited"
        )
    elif result["action_error"] is not None:
        lines.append(
            f"  agreement  {pair}: mean largest action difference {result['action_error']:.3%} of the action "
            f"range over {result['agreement_states']} states visited"
        )
    if result["video"]:
        lines.append(
            f"  video      {result['video']['path']} (episode 1, {result['video']['frames']} frames)"
        )
    return "\n".join(lines) + "\n"
