"""QuantizedPolicy: weight messages at every comm width, mismatches, prepare/install, inference I/O.

Errors are relative to the action range (D4PG, bounds [-2, 2]) or to max |Q| (DQN). Measured on these
networks (64x64, torch default init, random biases and LayerNorm), max over 128 inputs ~ N(0, 2^2):

======================  ===========  ===========  ===========  ===========
actor / comm bits       32           16           8            4
======================  ===========  ===========  ===========  ===========
d4pg fp32               0            1.1e-4       1.8e-3       3.5e-2
d4pg fp16 (half)        1.6e-4       1.6e-4       1.8e-3       3.5e-2
d4pg fp16 (fbgemm)      9.8e-5       1.1e-4       1.8e-3       3.5e-2
d4pg int8 (intmm)       3.1e-3       3.0e-3       3.1e-3       3.6e-2
d4pg int8 (fbgemm)      6.9e-3       6.0e-3       6.9e-3       3.7e-2
dqn fp32                0            2.9e-4       5.8e-3       1.1e-1
dqn fp16 (half)         7.5e-4       7.5e-4       5.4e-3       1.0e-1
dqn int8 (intmm)        9.9e-3       8.7e-3       9.9e-3       1.1e-1
======================  ===========  ===========  ===========  ===========

The bound asserted is the larger of the actor precision's and the comm width's, each ~3x what was measured.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from actorq.actors.policy import QuantizedPolicy
from actorq.networks.torch_nets import D4PGPolicy, QNetwork
from actorq.quantize.codec import (
    MissingTensorError,
    ShapeMismatchError,
    UnknownTensorError,
    decode_message,
    encode_message,
)

PRECISION_BOUND = {
    "fp32/torch": 1e-6,
    "fp16/half": 2e-3,
    "fp16/fbgemm": 2e-3,
    "int8/intmm": 0.03,
    "int8/fbgemm": 0.05,
}
COMM_BOUND = {32: 1e-6, 16: 2e-3, 8: 0.03, 4: 0.3}
ACTORS = [("fp32", "torch"), ("fp16", "half"), ("fp16", "fbgemm"), ("int8", "intmm"), ("int8", "fbgemm")]
OBS, LAYERS = 11, (64, 64)


def actor_key(precision: str, kernel: str) -> str:
    return f"{precision}/{kernel}"


def reference(algorithm: str, out_dim: int, layers=LAYERS, seed: int = 0):
    """A float torch policy with non-trivial biases and LayerNorm, and its state as numpy."""
    torch.manual_seed(seed)
    model = (
        D4PGPolicy(OBS, out_dim, layers, -2.0, 2.0) if algorithm == "d4pg" else QNetwork(OBS, out_dim, layers)
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.1)
            elif name == "norm.weight":
                p.normal_(1.0, 0.2)
    return model.eval(), {k: v.numpy().copy() for k, v in model.state_dict().items()}


def message(state, bits: int, version: int = 1, learner_step: int = 10):
    return encode_message(state, version=version, learner_step=learner_step, precision="any", comm_bits=bits)


@pytest.fixture(scope="module")
def inputs() -> np.ndarray:
    return (2.0 * np.random.default_rng(0).standard_normal((128, OBS))).astype(np.float32)


@pytest.mark.parametrize("bits", [32, 16, 8, 4])
@pytest.mark.parametrize(("precision", "kernel"), ACTORS, ids=lambda v: str(v))
@pytest.mark.parametrize("algorithm", ["d4pg", "dqn"])
def test_apply_at_each_comm_width_is_close_to_fp32(algorithm, precision, kernel, bits, inputs):
    out_dim = 3 if algorithm == "d4pg" else 4
    model, state = reference(algorithm, out_dim)
    with torch.no_grad():
        expected = model(torch.from_numpy(inputs)).numpy()
    policy = QuantizedPolicy(algorithm, OBS, out_dim, LAYERS, precision, -2.0, 2.0, kernel=kernel)
    policy.apply(decode_message(message(state, bits), expected=policy.expected_shapes()))
    got = policy(inputs)
    assert got.dtype == np.float32 and got.shape == expected.shape
    scale = 4.0 if algorithm == "d4pg" else np.abs(expected).max()
    bound = max(PRECISION_BOUND[actor_key(precision, kernel)], COMM_BOUND[bits])
    assert np.abs(got - expected).max() / scale <= bound
    assert (policy.version, policy.learner_step) == (1, 10)


@pytest.mark.parametrize("bits", [8, 4])
def test_int8_actor_uses_message_codes_as_they_are(bits, inputs):
    """Codes of <= 8 bits are installed as they travelled: no dequantize/requantize error on top."""
    _, state = reference("d4pg", 3)
    msg = decode_message(message(state, bits))
    policy = QuantizedPolicy("d4pg", OBS, 3, LAYERS, "int8", -2.0, 2.0)
    policy.apply(msg)
    for prefix in ("torso.0", "torso.1", "head"):
        codes, scale, _ = policy.module.get_submodule(prefix).weights
        np.testing.assert_array_equal(codes.numpy(), msg.tensors[f"{prefix}.weight"].data)
        np.testing.assert_array_equal(scale.numpy(), msg.tensors[f"{prefix}.weight"].scale)
    # Against an fp32 actor running the same dequantized weights, only the activation quantization is left.
    fp32 = QuantizedPolicy("d4pg", OBS, 3, LAYERS, "fp32", -2.0, 2.0)
    fp32.apply(msg)
    assert np.abs(policy(inputs) - fp32(inputs)).max() / 4.0 <= PRECISION_BOUND["int8/intmm"]


@pytest.mark.parametrize(("precision", "kernel"), ACTORS, ids=lambda v: str(v))
def test_mismatched_message_raises_and_leaves_weights_untouched(precision, kernel, inputs):
    _, state = reference("d4pg", 3)
    policy = QuantizedPolicy("d4pg", OBS, 3, LAYERS, precision, -2.0, 2.0, kernel=kernel)
    policy.apply(decode_message(message(state, 8)))
    before = policy(inputs)
    _, wrong = reference("d4pg", 3, layers=(64, 32), seed=1)
    buf = message(wrong, 8, version=2)
    with pytest.raises(ShapeMismatchError, match="torso.1.weight"):
        decode_message(buf, expected=policy.expected_shapes())
    with pytest.raises(ShapeMismatchError):  # a message decoded without `expected` is checked again
        policy.apply(decode_message(buf))
    extra = {**state, "torso.9.weight": np.zeros((2, 2), np.float32)}
    with pytest.raises(UnknownTensorError):
        policy.apply(decode_message(message(extra, 8)))
    partial = {k: v for k, v in state.items() if k != "norm.bias"}
    with pytest.raises(MissingTensorError):
        policy.apply(decode_message(message(partial, 8)))
    np.testing.assert_array_equal(policy(inputs), before)
    assert policy.version == 1


@pytest.mark.parametrize(("precision", "kernel"), ACTORS, ids=lambda v: str(v))
def test_prepare_install_equals_apply(precision, kernel, inputs):
    _, first = reference("d4pg", 3, seed=0)
    _, second = reference("d4pg", 3, seed=1)
    a = QuantizedPolicy("d4pg", OBS, 3, LAYERS, precision, -2.0, 2.0, kernel=kernel)
    b = QuantizedPolicy("d4pg", OBS, 3, LAYERS, precision, -2.0, 2.0, kernel=kernel)
    for policy in (a, b):
        policy.apply(decode_message(message(first, 8)))
    before = b(inputs)
    msg = decode_message(message(second, 8, version=2))
    a.apply(msg)
    prepared = {}
    worker = threading.Thread(target=lambda: prepared.update(p=b.prepare(msg)))  # as the async updater does
    worker.start()
    worker.join()
    np.testing.assert_array_equal(b(inputs), before)  # prepare leaves the live model alone
    b.install(prepared["p"])
    np.testing.assert_array_equal(b(inputs), a(inputs))
    assert b.version == 2
    with pytest.raises(ValueError, match="another QuantizedPolicy"):
        a.install(prepared["p"])


def test_call_shapes_dtypes_and_bounds():
    _, state = reference("d4pg", 3)
    policy = QuantizedPolicy("d4pg", OBS, 3, LAYERS, "int8", [-2.0, -1.0, 0.0], [2.0, 1.0, 0.5], threads=1)
    policy.load_state(state)
    assert torch.get_num_threads() == 1
    assert torch.backends.quantized.engine == "fbgemm"
    obs = 5.0 * np.random.default_rng(1).standard_normal((32, OBS))  # float64 input is accepted
    batch = policy(obs)
    assert batch.shape == (32, 3) and batch.dtype == np.float32
    assert (batch >= [-2.0, -1.0, 0.0]).all() and (batch <= [2.0, 1.0, 0.5]).all()
    one = obs[0].astype(np.float32)
    one.setflags(write=False)
    assert policy(one).shape == (3,)
    np.testing.assert_allclose(policy(one), batch[0], atol=1e-6)
    with pytest.raises(ValueError, match="obs_dim=11"):
        policy(np.zeros(OBS + 1, np.float32))


def test_expected_shapes_match_the_torch_state_dict():
    for algorithm, model in (("d4pg", D4PGPolicy(OBS, 3, LAYERS)), ("dqn", QNetwork(OBS, 4, LAYERS))):
        policy = QuantizedPolicy(algorithm, OBS, 3 if algorithm == "d4pg" else 4, LAYERS, "fp32")
        assert policy.expected_shapes() == {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_invalid_arguments():
    with pytest.raises(ValueError, match="precision"):
        QuantizedPolicy("d4pg", OBS, 3, LAYERS, "int4")
    with pytest.raises(ValueError, match="kernel"):
        QuantizedPolicy("d4pg", OBS, 3, LAYERS, "int8", kernel="half")
    with pytest.raises(ValueError, match="algorithm"):
        QuantizedPolicy("ppo", OBS, 3, LAYERS, "int8")
