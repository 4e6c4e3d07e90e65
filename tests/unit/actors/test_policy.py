"""ActorPolicy: weight messages at every comm width, mismatches, prepare/install, inference I/O.

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
Which kernels run depends on the CPU: every test runs each registered kernel that verifies on this machine; for
each one rejected here it checks that the rejection is one the CPU explains (``tests/kernel_outcomes.py``: e.g.
``int8/intmm`` and ``int8/ort-s8`` on CPUs without VNNI, where their int16 pair sums saturate), that it was for
accuracy, that the kernel is refused by name and that selection falls back to another kernel of its precision.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from actorq.actors.kernels import CANDIDATES, PolicySpec, Selection, select_kernel
from actorq.actors.kernels.base import int8_codes
from actorq.actors.policy import ActorPolicy
from actorq.algorithms.d4pg.torch_policy import D4PGPolicy
from actorq.algorithms.dqn.torch_policy import QNetwork
from actorq.quantize.codec import (
    MissingTensorError,
    ShapeMismatchError,
    UnknownTensorError,
    decode_message,
    encode_message,
)
from tests.kernel_outcomes import applies, check_available, check_refused_and_fell_back

PRECISION_BOUND = {"fp32": 1e-5, "fp16": 2e-3, "int8": 0.05}
"""Max error asserted per precision on these test networks (int8: ~3x the largest measured, fbgemm's 7-bit)."""
COMM_BOUND = {32: 1e-6, 16: 2e-3, 8: 0.03, 4: 0.3}
KERNEL_NAMES = [c.name for c in CANDIDATES]
OBS, LAYERS = 11, (64, 64)


@pytest.fixture(scope="module")
def status():
    """``status(algorithm, out_dim)``: this machine's verification of every kernel on the test network."""
    seen: dict = {}

    def get(algorithm: str, out_dim: int) -> Selection:
        if (algorithm, out_dim) not in seen:
            spec = PolicySpec.build(algorithm, OBS, out_dim, LAYERS, -2.0, 2.0)
            seen[(algorithm, out_dim)] = select_kernel(spec, "auto", use_cache=False, budget_s=0.02)[1]
        return seen[(algorithm, out_dim)]

    return get


def make_policy(status, name: str, algorithm: str = "d4pg", out_dim: int = 3) -> ActorPolicy | None:
    """The policy running kernel ``name``; None for a kernel this CPU rejects, once
    :func:`~tests.kernel_outcomes.check_refused_and_fell_back` showed the rejection explained, for accuracy,
    refused by name and fallen back from (an unexplained rejection or an unavailable kernel fails)."""
    selection = status(algorithm, out_dim)
    check_available(selection, name)
    if not applies(selection, name):
        return None
    precision, kernel = name.split("/")
    if name not in selection.order:
        spec = PolicySpec.build(algorithm, OBS, out_dim, LAYERS, -2.0, 2.0)
        check_refused_and_fell_back(
            selection,
            name,
            lambda: ActorPolicy(algorithm, OBS, out_dim, LAYERS, precision, -2.0, 2.0, kernel=kernel),
            lambda: select_kernel(spec, precision, use_cache=False, budget_s=0.02)[1],
        )
        return None
    return ActorPolicy(algorithm, OBS, out_dim, LAYERS, precision, -2.0, 2.0, kernel=kernel)


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
@pytest.mark.parametrize("name", KERNEL_NAMES)
@pytest.mark.parametrize("algorithm", ["d4pg", "dqn"])
def test_apply_at_each_comm_width_is_close_to_fp32(status, algorithm, name, bits, inputs):
    """Every kernel that verifies here is within its precision's bound; every one that doesn't is refused."""
    out_dim = 3 if algorithm == "d4pg" else 4
    policy = make_policy(status, name, algorithm, out_dim)
    if policy is None:
        return
    model, state = reference(algorithm, out_dim)
    with torch.no_grad():
        expected = model(torch.from_numpy(inputs)).numpy()
    policy.apply(decode_message(message(state, bits), expected=policy.expected_shapes()))
    got = policy(inputs)
    assert got.dtype == np.float32 and got.shape == expected.shape
    scale = 4.0 if algorithm == "d4pg" else np.abs(expected).max()
    bound = max(PRECISION_BOUND[name.split("/")[0]], COMM_BOUND[bits])
    assert np.abs(got - expected).max() / scale <= bound
    assert (policy.version, policy.learner_step) == (1, 10)
    assert policy.kernel_name == name and policy.selection.first_message[-1]["ok"]


@pytest.mark.parametrize("bits", [8, 4])
def test_message_codes_are_used_as_they_are(bits):
    """Codes of <= 8 bits reach int8 kernels as they travelled: no dequantize/requantize error on top."""
    _, state = reference("d4pg", 3)
    msg = decode_message(message(state, bits))
    for prefix in ("torso.0", "torso.1", "head"):
        codes, scale = int8_codes(msg.tensors[f"{prefix}.weight"])
        np.testing.assert_array_equal(codes, msg.tensors[f"{prefix}.weight"].data)
        np.testing.assert_array_equal(scale, msg.tensors[f"{prefix}.weight"].scale)


@pytest.mark.parametrize("name", [n for n in KERNEL_NAMES if n.startswith("int8/")])
def test_int8_kernel_adds_only_activation_rounding(status, name, inputs):
    """Against an fp32 actor running the same 8-bit message, an int8 kernel adds only activation rounding."""
    policy = make_policy(status, name)
    if policy is None:
        return
    _, state = reference("d4pg", 3)
    msg = decode_message(message(state, 8))
    policy.apply(msg)
    fp32 = ActorPolicy("d4pg", OBS, 3, LAYERS, "fp32", -2.0, 2.0, kernel="torch")
    fp32.apply(msg)
    error = np.abs(policy(inputs) - fp32(inputs)).max() / 4.0
    assert 0 < error <= PRECISION_BOUND["int8"]


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_mismatched_message_raises_and_leaves_weights_untouched(status, name, inputs):
    policy = make_policy(status, name)
    if policy is None:
        return
    _, state = reference("d4pg", 3)
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


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_prepare_install_equals_apply(status, name, inputs):
    a, b = make_policy(status, name), make_policy(status, name)
    if a is None or b is None:
        return
    _, first = reference("d4pg", 3, seed=0)
    _, second = reference("d4pg", 3, seed=1)
    for policy in (a, b):
        policy.apply(decode_message(message(first, 8)))
    before = b(inputs)
    msg = decode_message(message(second, 8, version=2))
    a.apply(msg)
    prepared = {}
    worker = threading.Thread(target=lambda: prepared.update(p=b.prepare(msg)))  # as the async updater does
    worker.start()
    worker.join()
    np.testing.assert_array_equal(b(inputs), before)  # prepare leaves the live weights alone
    b.install(prepared["p"])
    np.testing.assert_array_equal(b(inputs), a(inputs))
    assert b.version == 2
    with pytest.raises(ValueError, match="another ActorPolicy"):
        a.install(prepared["p"])


def test_call_shapes_dtypes_and_bounds():
    _, state = reference("d4pg", 3)
    policy = ActorPolicy("d4pg", OBS, 3, LAYERS, "int8", [-2.0, -1.0, 0.0], [2.0, 1.0, 0.5], threads=1)
    policy.load_state(state)
    assert torch.get_num_threads() == 1
    assert policy.precision == "int8" and policy.kernel_name in policy.selection.order
    obs = 5.0 * np.random.default_rng(1).standard_normal((32, OBS))  # float64 input is accepted
    batch = policy(obs)
    assert batch.shape == (32, 3) and batch.dtype == np.float32
    assert (batch >= [-2.0, -1.0, 0.0]).all() and (batch <= [2.0, 1.0, 0.5]).all()
    one = obs[0].astype(np.float32)
    one.setflags(write=False)
    assert policy(one).shape == (3,)
    # Kernels that quantize activations per tensor (fbgemm, ONNX Runtime) see the whole batch, so a row alone
    # differs from the same row in a batch by activation rounding; the verification bounds both.
    np.testing.assert_allclose(policy(one), batch[0], atol=PRECISION_BOUND["int8"] * 4.0)
    with pytest.raises(ValueError, match="obs_dim=11"):
        policy(np.zeros(OBS + 1, np.float32))


def test_expected_shapes_match_the_torch_state_dict():
    for algorithm, model in (("d4pg", D4PGPolicy(OBS, 3, LAYERS)), ("dqn", QNetwork(OBS, 4, LAYERS))):
        policy = ActorPolicy(algorithm, OBS, 3 if algorithm == "d4pg" else 4, LAYERS, "fp32")
        assert policy.expected_shapes() == {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_invalid_arguments():
    with pytest.raises(ValueError, match="precision"):
        ActorPolicy("d4pg", OBS, 3, LAYERS, "int4")
    with pytest.raises(ValueError, match="kernel"):
        ActorPolicy("d4pg", OBS, 3, LAYERS, "int8", kernel="half")
    with pytest.raises(ValueError, match="kernel 'bogus' is not one of auto, ort-u8"):
        ActorPolicy("d4pg", OBS, 3, LAYERS, "int8", kernel="bogus")
    with pytest.raises(ValueError, match="algorithm"):
        ActorPolicy("ppo", OBS, 3, LAYERS, "int8")
