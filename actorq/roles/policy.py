"""The policy a role acts with: built for the run's task and network, its kernel recorded, greedy episodes.

Shared by the actor role (exploring, feeding replay) and the evaluator (greedy returns of the fp32 and the
quantized policy).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from actorq.actors.policy import ActorPolicy
from actorq.algorithms import Algorithm
from actorq.config import BYTES_PER_WEIGHT, ExperimentConfig
from actorq.envs import environment_spec
from actorq.hardware import hardware_record
from actorq.roles.torso import run_torso


def build_policy(config: ExperimentConfig, precision: str | None = None, batch: int = 1) -> ActorPolicy:
    """The torch policy for this experiment's task and network at ``precision`` (default: the actor's).

    The kernel is verified and timed on this machine at ``batch`` rows per forward (an actor passes its
    ``actor.envs_per_actor``) (``actor.kernel``, default auto; see :mod:`actorq.actors.kernels`); a different
    ``precision`` than the actor's always uses auto.
    """
    spec = environment_spec(config.env)
    torso = run_torso(config, spec)
    own = precision is None or precision == config.actor.precision
    return ActorPolicy(
        algorithm=config.algorithm,
        obs_dim=spec.obs_dim,
        out_dim=spec.num_actions,
        layers=tuple(config.network.policy_layers),
        precision=precision or config.actor.precision,
        action_low=spec.action_low,
        action_high=spec.action_high,
        threads=config.actor.threads,
        kernel=(config.actor.kernel or "auto") if own else "auto",
        batch=batch,
        obs_shape=spec.obs_shape,
        torso=torso if torso.is_conv else None,
    )


def write_kernel_record(directory: Path, policy: ActorPolicy) -> None:
    """``kernel.json`` in a role's directory: the kernel choice, its error and time, rejections, and the CPU."""
    record = {
        **policy.selection.to_json(),
        "hardware": hardware_record(
            weight_bytes=policy.spec.weight_count() * BYTES_PER_WEIGHT[policy.precision]
        ),
    }
    tmp = directory / "kernel.json.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(directory / "kernel.json")


def greedy_episodes(
    envs: list,
    policy: Callable[[np.ndarray], Any],
    algorithm: Algorithm,
    observe: Callable[[np.ndarray, np.ndarray, list[int]], None] | None = None,
) -> list[float]:
    """Returns of one episode in each of ``envs`` acting by ``algorithm``'s evaluation rule (no exploration),
    stepped together: one batched forward per step.

    ``policy`` is an :class:`ActorPolicy` or any callable from a ``[n, obs]`` batch to its outputs; ``observe``,
    if given, sees each step's observations, outputs and the rows still playing before they act (diagnostics:
    comparing a quantized policy's outputs with fp32's on the states it visits); the arrays are reused after the
    call, so copy what you keep.

    The batch stays ``len(envs)`` rows until the last episode ends (a finished environment's last observation keeps
    its row), so the forward always runs at the batch its kernel was verified and timed at. Batching the
    evaluator's episodes costs one forward per step for all of them instead of one each: with a 3x2048 policy the
    forward, not the environment, is most of an evaluation's CPU time.
    """
    timesteps = [env.reset() for env in envs]
    totals = [0.0] * len(envs)
    obs = np.stack([np.asarray(t.observation) for t in timesteps])  # the env's dtype: uint8 frames stay uint8
    while not all(t.last() for t in timesteps):
        out = np.asarray(policy(obs)).reshape(len(envs), -1)
        live = [j for j, t in enumerate(timesteps) if not t.last()]
        if observe is not None:
            observe(obs, out, live)
        for j in live:
            timesteps[j] = envs[j].step(algorithm.greedy(out[j]))
            totals[j] += float(timesteps[j].reward or 0.0)
            obs[j] = timesteps[j].observation
    return totals
