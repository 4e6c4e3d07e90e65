"""Run directories as ``actorq train`` leaves them, made without training: a tiny config and a learner checkpoint
whose objects are saved under the names the algorithms' learner builders give them (the online policy under its
``checkpoint_policy`` key, a *different* target copy beside it, the learner's ``num_steps``)."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np

from actorq import algorithms
from actorq.config import load_config, replace, save_config
from tests.conftest import tiny_config

ROOT = Path(__file__).resolve().parents[3]
LEARNER_STEP = 1234


def config_for(algorithm: str):
    """A tiny config of ``algorithm`` whose int8 kernels quantize a hidden layer (>= 32 features); ``dqn_conv``:
    DQN's Nature CNN torso on ALE Pong frames."""
    if algorithm == "dqn_conv":
        overrides = ["network.policy_layers=[64]", "env.max_episode_steps=30"]
        return load_config(ROOT / "configs" / "dqn" / "atari_pong.yaml", overrides)
    if algorithm == "ddpg":
        overrides = [
            "network.policy_layers=[64,64]",
            "ddpg.critic_layers=[32,32]",
            "env.max_episode_steps=40",
        ]
        return load_config(ROOT / "configs" / "ddpg" / "gym_pendulum.yaml", overrides)
    if algorithm == "d4pg":
        return replace(
            tiny_config("d4pg"), **{"network.policy_layers": (64, 64), "env.max_episode_steps": 40}
        )
    return replace(tiny_config("dqn"), **{"network.policy_layers": (64, 64)})


def tf_policy(config):
    """The algorithm's TF policy network (its variables created, then set to random values so the policy is not
    the near-zero initial one) and its environment spec."""

    from acme.tf import utils as tf2_utils

    from actorq.envs import make_environment
    from actorq.replay.tables import environment_spec_for
    from actorq.roles.torso import run_torso

    env = make_environment(config.env)
    spec = environment_spec_for(env)
    env.close()
    algo = algorithms.get(config.algorithm)
    build = algo.tf_networks.load()
    layers = config.network.policy_layers
    if config.algorithm == "dqn":
        torso = run_torso(config)
        net = build(spec.actions.num_values, layers, torso if torso.is_conv else None)
    elif config.algorithm == "d4pg":
        s = algo.settings(config)
        net = build(spec.actions, layers, s.critic_layers, s.vmin, s.vmax, s.num_atoms)["policy"]
    else:
        net = build(spec.actions, layers, algo.settings(config).critic_layers)["policy"]
    tf2_utils.create_variables(net, [spec.observations])
    rng = np.random.default_rng(3)
    for v in net.variables:  # a trained network's scale: ~1/sqrt(fan-in) weights, small offsets
        scale = 1.5 / np.sqrt(np.prod(v.shape[:-1])) if len(v.shape) >= 2 else 0.1  # fan-in
        center = 1.0 if "layer_norm/scale" in v.name else 0.0
        v.assign(rng.normal(center, scale, v.shape).astype(np.float32))
    return net, spec


def make_run(run_dir: Path, algorithm: str) -> tuple[Path, object]:
    """``run_dir`` with ``config.yaml`` and ``checkpoints/learner/ckpt-1``; returns it and the TF policy."""
    import tensorflow as tf

    config = config_for(algorithm)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(config, run_dir / "config.yaml")
    net, _ = tf_policy(config)
    target = copy.deepcopy(net)
    for v in target.variables:  # same variable names as the online policy, other values: must not be read
        v.assign(tf.zeros_like(v))
    key = algorithms.get(config.algorithm).checkpoint_policy
    checkpoint = tf.train.Checkpoint(
        **{key: net, f"target_{key}": target, "num_steps": tf.Variable(LEARNER_STEP, dtype=tf.int32)}
    )
    tf.train.CheckpointManager(checkpoint, str(run_dir / "checkpoints" / "learner"), max_to_keep=2).save()
    return run_dir, net
