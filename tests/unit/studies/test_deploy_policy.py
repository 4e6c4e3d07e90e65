"""``actorq bench deploy --policy``: a loaded agent's own action network, exported and measured (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3 import DQN, PPO, SAC, TD3
from torch import nn

from actorq.studies import cli, deploy_policy


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("cls", "env_id", "kwargs"),
    [
        (PPO, "CartPole-v1", {}),
        (PPO, "Pendulum-v1", {}),
        (DQN, "CartPole-v1", {"buffer_size": 64}),
        (TD3, "Pendulum-v1", {"buffer_size": 64}),
        (SAC, "Pendulum-v1", {"buffer_size": 64}),
    ],
    ids=["ppo-discrete", "ppo-continuous", "dqn", "td3", "sac"],
)
def test_action_network_acts_like_the_agent(cls: type, env_id: str, kwargs: dict) -> None:
    model = cls("MlpPolicy", env_id, seed=0, device="cpu", policy_kwargs={"net_arch": [16, 16]}, **kwargs)
    net, discrete = deploy_policy.action_network(model)
    assert all(isinstance(m, (nn.Linear, nn.ReLU, nn.Tanh)) for m in net)
    obs = np.random.default_rng(0).uniform(-1, 1, (64, *model.observation_space.shape)).astype(np.float32)
    deploy_policy._check_matches_predict(model, net, obs, discrete)  # raises when it does not
    # A network that differs from the agent is caught by the same check.
    with torch.no_grad():
        net[0].weight.mul_(-5.0)
    with pytest.raises(RuntimeError, match="does not reproduce"):
        deploy_policy._check_matches_predict(model, net, obs, discrete)


def test_bench_deploy_with_policy(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    agent = tmp_path / "ppo" / "CartPole-v1"
    agent.mkdir(parents=True)
    PPO("MlpPolicy", "CartPole-v1", seed=0, device="cpu").save(agent / "CartPole-v1.zip")  # Tanh MLP
    out = tmp_path / "deploy"
    code = cli.main(
        ["bench", "deploy", "--policy", str(agent), "--backends", "onnx", "--iters", "50", "--out", str(out)]
    )
    assert code == 0
    res = json.loads((out / "deploy.json").read_text())
    rows = {r["precision"]: r for r in res["rows"]}
    assert set(rows) == {"fp32", "int8"} and all(r["status"] == "ok" for r in rows.values())
    assert res["obs_dim"] == 4 and res["n_actions"] == 2 and rows["fp32"]["hidden"] == [64, 64]
    assert rows["fp32"]["action_agreement"] == 1.0  # the exported fp32 graph is the agent
    assert 0.0 <= rows["int8"]["action_agreement"] <= 1.0
    assert rows["int8"]["file_mb"] < rows["fp32"]["file_mb"] / 2
    assert "probe: 512 observations" in capsys.readouterr().out


def test_bench_deploy_policy_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    exc = cli.main(
        ["bench", "deploy", "--policy", str(tmp_path / "missing.zip"), "--out", str(tmp_path / "o")]
    )
    assert exc == 2
    assert capsys.readouterr().err.strip().startswith("error: no SB3 policy at")
