"""Is int8 acting the cause of int8 runs' lower reward? The learner's fp32 Q-network from a run's last checkpoint,
played greedily as fp32, as the int8 actor policy and as the fp16 one (the quantizer's encoding, a kernel verified
on this machine at the evaluation batch): mean return over EPISODES episodes, greedy-action agreement with fp32 on
the states the quantized policy visits, median |Q0 - Q1| gap and median max |Q error| there. BATCH=1 runs every
policy one row at a time, with the kernels an actor (batch 1) picks.

Usage (repository root, a run directory with its checkpoints; prints one JSON line per run):
    EPISODES=10 .venv/bin/python reports/experiments/table2-cpu/dqn_cartpole/int8_greedy_check.py RUN_DIR...
"""

import json
import os
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

from actorq import algorithms
from actorq.config.loading import load_config
from actorq.envs import make_environment
from actorq.networks.mapping import tf_to_torch_state
from actorq.quantize.codec import decode_message, encode_message
from actorq.roles.policy import build_policy, greedy_episodes

EPISODES = int(os.environ.get("EPISODES", 10))
BATCH = int(os.environ.get("BATCH", EPISODES))
"""Rows per forward: EPISODES (the evaluator's batch) or 1 (an actor's: the kernel it picked, e.g. int8/ort-s8r)."""


def weights(run: Path, n_layers: int):
    ckpt = tf.train.latest_checkpoint(str(run / "checkpoints/learner"))
    r = tf.train.load_checkpoint(ckpt)
    step = int(r.get_tensor("num_steps/.ATTRIBUTES/VARIABLE_VALUE"))
    tfv = {}
    for i in range(n_layers + 1):
        for p in "wb":
            tfv[f"q_network/linear_{i}/{p}"] = r.get_tensor(
                f"network/_layers/{i}/{p}/.ATTRIBUTES/VARIABLE_VALUE"
            )
    return ckpt, step, tfv


def forward(policy, obs):
    """``[n, actions]`` outputs, ``BATCH`` rows per call."""
    rows = [
        np.asarray(policy(obs[i : i + BATCH])).reshape(-1, policy.out_dim) for i in range(0, len(obs), BATCH)
    ]
    return np.concatenate(rows)


def rollouts(envs, policy, algo, ref=None):
    """Greedy episodes with ``policy``; on each visited state also the fp32 ``ref`` Q-values."""
    q_pol, q_ref = [], []

    def observe(obs, out, live):
        q_pol.append(out[live].copy())
        if ref is not None:
            q_ref.append(forward(ref, obs)[live])

    tot = greedy_episodes(envs, lambda obs: forward(policy, obs), algo, observe=observe)
    return tot, np.concatenate(q_pol), (np.concatenate(q_ref) if ref is not None else None)


algo = algorithms.get("dqn")
for run in map(Path, sys.argv[1:]):
    cfg = load_config(run / "config.yaml")
    layers = tuple(cfg.network.policy_layers)
    ckpt, step, tfv = weights(run, len(layers))
    state = tf_to_torch_state("dqn", tfv, layers)
    fp32 = build_policy(cfg, precision="fp32", batch=BATCH)
    fp32.load_state(state)
    res = {"run": run.name, "learner_step": step, "batch": BATCH}
    for prec in ("int8", "fp16"):
        q = build_policy(cfg, precision=prec, batch=BATCH)
        bits = {"int8": 8, "fp16": 16}[prec]
        msg = encode_message(state, version=1, learner_step=step, precision=prec, comm_bits=bits, key=None)
        q.apply(decode_message(msg, expected=q.expected_shapes()))
        envs = [make_environment(cfg.env, seed=123456 + 7919 * j) for j in range(EPISODES)]
        ret, qq, qr = rollouts(envs, q, algo, ref=fp32)
        gap = np.abs(qr[:, 0] - qr[:, 1])
        err = np.abs(qq - qr).max(1)
        res[prec] = {
            "return": float(np.mean(ret)),
            "kernel": q.selection.kernel if hasattr(q, "selection") else "",
            "agree": float(np.mean(qq.argmax(1) == qr.argmax(1))),
            "median_gap": float(np.median(gap)),
            "median_err": float(np.median(err)),
            "share_err_ge_gap": float(np.mean(err >= gap)),
            "states": int(len(gap)),
        }
    envs = [make_environment(cfg.env, seed=123456 + 7919 * j) for j in range(EPISODES)]
    ret, qf, _ = rollouts(envs, fp32, algo)
    res["fp32"] = {"return": float(np.mean(ret)), "max_abs_q": float(np.abs(qf).max())}
    print(json.dumps(res), flush=True)
