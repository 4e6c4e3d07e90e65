"""Deployment benchmark of a loaded agent (``actorq bench deploy --policy``): its own network, fp32 vs int8.

The deterministic action path of the agent is extracted as a plain ``Linear``/activation ``nn.Sequential``
(DQN: the Q-network, argmax outside; PPO/A2C: policy MLP + action head; TD3/DDPG: the actor with its final tanh;
SAC: latent MLP + mean head + tanh), checked against ``model.predict`` on observations the agent visits, then
exported and measured exactly like the synthetic Policies I-III (:mod:`actorq.studies.deploy`: one model per
subprocess, batch 1, one thread). Output fidelity is measured here on those visited observations: greedy-action
agreement (discrete) or the largest action difference (continuous, in the policy's [-1, 1] / unclipped output
units). Observation normalization (a zoo ``vecnormalize.pkl``) stays outside the exported network.
"""

from __future__ import annotations

import copy
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from torch import nn

from actorq.studies import deploy, envs

logger = logging.getLogger(__name__)

PROBE_STEPS = 512


def action_network(model: BaseAlgorithm) -> tuple[nn.Sequential, bool]:
    """The deployed network as ``obs -> output`` and whether the action is its argmax (discrete)."""
    pol = model.policy
    discrete = isinstance(model.action_space, spaces.Discrete)
    if hasattr(pol, "quantile_net"):
        raise ValueError("QR-DQN averages quantiles before the argmax: not exportable as a plain MLP")
    if hasattr(pol, "q_net"):
        seq = list(pol.q_net.q_net)
    elif hasattr(pol, "actor") and hasattr(pol.actor, "latent_pi"):  # SAC
        if pol.actor.use_sde:
            raise ValueError("SAC with gSDE is not exportable as a plain MLP")
        seq = [*pol.actor.latent_pi, pol.actor.mu, nn.Tanh()]
    elif hasattr(pol, "actor"):  # TD3 / DDPG: mu already ends in tanh
        seq = list(pol.actor.mu)
    elif hasattr(pol, "mlp_extractor"):
        seq = [*pol.mlp_extractor.policy_net, pol.action_net]
    else:
        raise ValueError(f"no exportable action network in {type(pol).__name__}")
    return nn.Sequential(*copy.deepcopy(seq)).eval(), discrete


def _actions(net: Any, obs: np.ndarray, discrete: bool) -> np.ndarray:
    out = net(obs)
    return np.argmax(out, axis=1) if discrete else out


def _check_matches_predict(model: BaseAlgorithm, net: nn.Sequential, obs: np.ndarray, discrete: bool) -> None:
    """The extracted network must act like the agent (a wrong extraction would benchmark something else)."""
    with torch.no_grad():
        out = net(torch.as_tensor(obs, dtype=torch.float32)).numpy()
        ref = model.policy._predict(torch.as_tensor(obs, dtype=torch.float32), deterministic=True).numpy()
    ours = np.argmax(out, axis=1) if discrete else out
    if discrete:
        ok = np.array_equal(ours, ref.reshape(-1))
    else:  # PPO's Gaussian mean is not squashed; SB3 clips it to the bounds later, as a deployment would
        ok = np.allclose(ours, ref.reshape(ours.shape), atol=1e-5)
    if not ok:
        raise RuntimeError("the extracted action network does not reproduce model.predict")


def _session(backend: str, path: Path) -> Any:
    """A callable running one exported model in this process (for the fidelity probe only)."""
    if backend == "onnx":
        import onnxruntime as ort

        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return lambda x: sess.run(None, {"obs": x.astype(np.float32)})[0]
    mod = torch.jit.load(str(path))
    return lambda x: mod(torch.as_tensor(x, dtype=torch.float32)).detach().numpy()


def run_policy_bench(
    model: BaseAlgorithm,
    meta: dict[str, Any],
    out: str | Path,
    backends: list[str],
    iters: int = 2000,
    warmup: int = 100,
    models_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Export the agent's action network in fp32 and int8 per backend, measure each, write ``deploy.*``."""
    if models_dir is None:
        with tempfile.TemporaryDirectory(prefix="actorq-deploy-") as tmp:
            return run_policy_bench(model, meta, out, backends, iters, warmup, models_dir=tmp)
    net, discrete = action_network(model)
    obs = envs.record_observations(model, meta["env"], PROBE_STEPS, seed=envs.eval_seed(0))
    obs = obs.reshape(len(obs), -1).astype(np.float32)
    _check_matches_predict(model, net, obs, discrete)
    label = f"{meta['algo'].upper()} {meta['env_id']}"
    obs_dim = obs.shape[1]
    paths = deploy.export_module(net, label.replace(" ", "_"), obs_dim, Path(models_dir), backends)
    hidden = [m.out_features for m in net if isinstance(m, nn.Linear)][:-1]
    n_params = sum(p.numel() for p in net.parameters())
    rows: list[dict[str, Any]] = []
    with torch.no_grad():  # reference: the agent's own fp32 torch network
        ref = _actions(lambda x: net(torch.as_tensor(x)).numpy(), obs, discrete)
    for key, path in paths.items():
        backend, prec = key.split("-")
        m = deploy.measure(path, backend, obs_dim, iters, warmup, None)
        row = {"policy": label, "hidden": hidden, "params": n_params, "backend": backend, "precision": prec,
               "file_mb": path.stat().st_size / 2**20, "limit_mb": None, **m}  # fmt: skip
        acts = _actions(_session(backend, path), obs, discrete)
        if discrete:
            row["action_agreement"] = float(np.mean(acts == ref))
        else:
            row["action_max_abs_diff"] = float(np.max(np.abs(acts - ref)))
            row["action_mean_abs_diff"] = float(np.mean(np.abs(acts - ref)))
        rows.append(row)
        logger.info("deploy %s %s: %s", label, key, {k: m.get(k) for k in ("status", "latency_ms_p50")})
    result = {
        "obs_dim": obs_dim,
        "n_actions": int(model.action_space.n) if discrete else int(np.prod(model.action_space.shape)),
        "iters": iters,
        "threads": 1,
        "rows": rows,
        "policy": meta["path"],
        "env": envs.env_label(meta["env"]),
        "probe": f"{len(obs)} observations visited by the fp32 policy (seed {envs.eval_seed(0)})",
        "obs_normalization_outside_network": meta["env"].obs_norm is not None,
    }
    deploy.write_outputs(result, Path(out))
    return result


def table_markdown(result: dict[str, Any]) -> str:
    """The deploy table plus the continuous-action fidelity, if any."""
    text = deploy.table_markdown(result)
    diffs = [
        f"{r['backend']} {r['precision']}: mean {r['action_mean_abs_diff']:.2e}, max {r['action_max_abs_diff']:.2e}"
        for r in result["rows"]
        if "action_max_abs_diff" in r
    ]
    if diffs:
        text += (
            "\naction difference vs the agent's fp32 torch network on the probe: " + "; ".join(diffs) + "\n"
        )
    return text + f"\nprobe: {result['probe']}\n"
