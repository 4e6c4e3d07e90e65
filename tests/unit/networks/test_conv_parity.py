"""The conv Q-network the actors run computes the TF learner's (Nature CNN torso, ``network.torso``).

Every TF variable gets random values, goes through the explicit mapping (Sonnet ``[kh, kw, in, out]`` -> torch
``[out, in, kh, kw]``) and the torch twin must agree with the TF network on uint8 frames in both layouts (HWC as
Acme's Atari wrapper gives them, CHW as Gymnasium's frame stack does). Then every registered kernel that verifies
on this CPU, loaded with the same weights, stays within its precision's bound on them and keeps the greedy action.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from actorq.actors.kernels import CANDIDATES, PolicySpec, select_kernel
from actorq.actors.policy import ActorPolicy
from actorq.algorithms import dqn
from actorq.algorithms.dqn.torch_policy import QNetwork
from actorq.networks.mapping import (
    MappingError,
    mapping_table,
    tf_to_torch_state,
    torch_state_shapes,
    torch_to_tf_state,
)
from tests.kernel_outcomes import check_available, check_refused_and_fell_back

FP32_RTOL = 2e-5
"""Max |Q_torch - Q_tf| / max |Q_tf| in fp32 (float32 reassociation only; measured ~1e-6)."""
PRECISION_BOUNDS = {"fp32": FP32_RTOL, "fp16": 3e-3, "int8": 0.06}
"""Max |Q - Q_tf| / max |Q_tf| asserted per precision on the randomized conv networks: ~2-3x the largest measured
(fp16 7.7e-4, int8 2.1% with fbgemm's 7-bit activations; an Intel Xeon with AVX512-VNNI, also under
ONEDNN_MAX_CPU_ISA=AVX2)."""
SMALL = (44, 44, 4)
"""The smallest frames worth testing every kernel on: 44 -> 10 -> 4 -> 2 pixels, 256 features."""
LAYERS = (64,)
ACTIONS = 6


@pytest.fixture(scope="module")
def tf():
    import tensorflow as tf

    return tf


def build(tf, shape: tuple[int, ...], seed: int = 0, frames: int = 32):
    """A randomized TF conv Q-network on ``shape`` uint8 frames: its variables, frames and Q-values."""
    from actorq.algorithms.dqn.tf_networks import make_network
    from actorq.networks import tf_nets

    torso = dqn.ALGORITHM.torso("auto", shape, np.uint8)
    network = make_network(ACTIONS, LAYERS, torso)
    tf_nets.create_variables(network, shape, tf.uint8)
    rng = np.random.default_rng(seed)
    for v in network.variables:
        if v.name.endswith("/w:0"):
            fan_in = int(np.prod(v.shape[:-1]))
            value = rng.uniform(-1, 1, v.shape) * np.sqrt(6.0 / fan_in)
        else:
            value = 0.1 * rng.standard_normal(v.shape)
        v.assign(value.astype(np.float32))
    x = rng.integers(0, 256, (frames, *shape), dtype=np.uint8)
    return torso, tf_nets.policy_variables(network), x, network(tf.constant(x)).numpy()


@pytest.mark.parametrize("shape", [(84, 84, 4), (4, 84, 84)], ids=["HWC", "CHW"])
def test_torch_twin_matches_tf_on_atari_frames(tf, shape):
    torso, tf_vars, x, expected = build(tf, shape, frames=8)
    assert torso.kind == "nature_cnn" and torso.features == 3136 and torso.channels_first == (shape[0] == 4)
    # The TF names are exactly the mapping's left column, conv rows first.
    rows = mapping_table("dqn", LAYERS, torso=torso)
    assert sorted(tf_vars) == sorted(name for name, _, _ in rows) and rows[0][0] == "q_network/conv_0/w"
    state = tf_to_torch_state("dqn", tf_vars, LAYERS, torso=torso)
    obs_dim = int(np.prod(shape))
    assert {k: v.shape for k, v in state.items()} == torch_state_shapes(
        "dqn", obs_dim, ACTIONS, LAYERS, torso
    )
    assert state["conv.0.weight"].shape == (32, 4, 8, 8) and state["torso.0.weight"].shape == (64, 3136)
    twin = QNetwork(obs_dim, ACTIONS, LAYERS, torso)
    twin.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    with torch.no_grad():
        got = twin(torch.from_numpy(x)).numpy()
    assert np.abs(got - expected).max() <= FP32_RTOL * np.abs(expected).max()
    # The inverse mapping gives the learner's variables back exactly.
    back = torch_to_tf_state("dqn", state, LAYERS, torso=torso)
    assert all(np.array_equal(back[name], tf_vars[name]) for name in tf_vars)


def test_a_chw_frame_is_the_same_image_as_its_hwc_transpose(tf):
    """Channels first means channels first: CHW frames and the same frames transposed to HWC give the same
    Q-values with the same weights (and reading CHW memory as if it were HWC does not)."""
    torso, tf_vars, x, expected = build(tf, (4, 84, 84), frames=4)
    state = tf_to_torch_state("dqn", tf_vars, LAYERS, torso=torso)
    hwc = dqn.ALGORITHM.torso("auto", (84, 84, 4), np.uint8)
    twin = QNetwork(28224, ACTIONS, LAYERS, hwc)
    twin.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    with torch.no_grad():
        same = twin(torch.from_numpy(np.ascontiguousarray(x.transpose(0, 2, 3, 1)))).numpy()
        wrong = twin(torch.from_numpy(np.ascontiguousarray(x.reshape(4, 84, 84, 4)))).numpy()
    assert np.abs(same - expected).max() <= FP32_RTOL * np.abs(expected).max()
    assert np.abs(wrong - expected).max() > 0.1 * np.abs(expected).max()


def test_mapping_refuses_a_conv_weight_in_torch_layout(tf):
    torso, tf_vars, _, _ = build(tf, SMALL, frames=1)
    tf_vars["q_network/conv_1/w"] = np.ascontiguousarray(tf_vars["q_network/conv_1/w"].transpose(3, 2, 0, 1))
    with pytest.raises(MappingError, match=r"conv_1/w has shape \(64, 32, 4, 4\), expected \(4, 4, 32, 64\)"):
        tf_to_torch_state("dqn", tf_vars, LAYERS, torso=torso)
    with pytest.raises(MappingError, match="unexpected TF variables"):
        tf_to_torch_state("dqn", tf_vars, LAYERS)  # read as an MLP: the conv variables are not its


_SELECTIONS: dict = {}


def policy_for(name: str, torso) -> ActorPolicy | None:
    """The conv policy running kernel ``name`` if it verifies here; None for one this CPU explains rejecting
    (after checking it was refused by name and fallen back from), as ``test_parity.policy_for``."""
    obs_dim = torso.obs_dim
    spec = PolicySpec.build("dqn", obs_dim, ACTIONS, LAYERS, torso=torso)
    if torso not in _SELECTIONS:
        _SELECTIONS[torso] = select_kernel(spec, "auto", use_cache=False, budget_s=0.02)[1]
    selection = _SELECTIONS[torso]
    check_available(selection, name)
    precision, kernel = name.split("/")

    def build_policy() -> ActorPolicy:
        return ActorPolicy(
            "dqn", obs_dim, ACTIONS, LAYERS, precision, kernel=kernel, use_cache=False, torso=torso
        )

    if name not in selection.order:
        check_refused_and_fell_back(
            selection,
            name,
            build_policy,
            lambda: select_kernel(spec, precision, use_cache=False, budget_s=0.02)[1],
        )
        return None
    return build_policy()


@pytest.mark.parametrize("name", [c.name for c in CANDIDATES])
def test_every_kernel_computes_the_tf_conv_network_within_its_bound(tf, name):
    torso, tf_vars, x, expected = build(tf, SMALL, seed=3, frames=48)
    policy = policy_for(name, torso)
    if policy is None:
        return
    policy.load_state(tf_to_torch_state("dqn", tf_vars, LAYERS, torso=torso))
    got = policy(x)
    error = np.abs(got - expected).max() / np.abs(expected).max()
    assert error <= PRECISION_BOUNDS[policy.precision], f"{name}: {error:.3g}"
    assert policy.precision == "fp32" or error > 0  # it really runs at reduced precision
    assert (got.argmax(1) == expected.argmax(1)).mean() >= 0.9
