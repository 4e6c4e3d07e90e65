"""The Atari conv policy's kernels, verified on this CPU like the dense ones, and its weights on the wire.

The Nature DQN network (84x84x4 uint8 frames, 3 convolutions, 3136x512 dense, 6 actions): an int8 and an fp16
kernel verify at the actor's batch (1 and ``envs_per_actor`` 8), every rejection is one the CPU explains
(``tests/kernel_outcomes.py``), a kernel whose convolutions saturate int16 pair sums is caught by the saturation
probe, and 4-D conv weights travel through the codec at every width with per-output-channel codes that the int8
kernels use as they are.
"""

from __future__ import annotations

import numpy as np
import pytest

from actorq.actors.kernels import CANDIDATES, KernelVerificationError, PolicySpec, select_kernel
from actorq.actors.kernels import registry as registry_module
from actorq.actors.kernels import select as select_module
from actorq.actors.kernels.base import conv_matrix, int8_codes
from actorq.actors.kernels.torch_kernels import Int8IntMM, _replace
from actorq.actors.kernels.verify import (
    SATURATION_HEAD_OUTPUT,
    reference_outputs,
    saturation_inputs,
    saturation_tensors,
    standard_probes,
    verify_probes,
)
from actorq.actors.policy import ActorPolicy
from actorq.algorithms import dqn
from actorq.networks.torch_nets import Im2colConv, Int8Linear
from actorq.quantize.codec import ShapeMismatchError, decode_message, encode_message
from tests.kernel_outcomes import ACCURACY_REASON, EXACT_ON_EVERY_CPU, may_fail_verification
from tests.unit.actors.test_kernels import SaturatingLinear

ATARI = (84, 84, 4)
SMALL = (44, 44, 4)
LAYERS = (512,)
ACTIONS = 6


def conv_spec(shape=ATARI, layers=LAYERS) -> PolicySpec:
    torso = dqn.ALGORITHM.torso("auto", shape, np.uint8)
    return PolicySpec.build("dqn", int(np.prod(shape)), ACTIONS, layers, torso=torso)


def check_explained(selection) -> None:
    """Every rejection is an int8 kernel this CPU may get wrong, rejected for accuracy; nothing is unavailable."""
    assert not selection.unavailable, selection.unavailable
    for r in selection.rejected:
        assert may_fail_verification(r["kernel"]) and ACCURACY_REASON.match(r["reason"]), r


@pytest.mark.parametrize("batch", [1, 8], ids=["batch1", "envs8"])
@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_the_atari_conv_policy_has_a_verified_kernel_at_the_actors_batch(precision, batch):
    spec = conv_spec()
    assert spec.image.features == 3136 and spec.input_dtype == np.uint8
    kernel, selection = select_kernel(spec, precision, batch, use_cache=False, budget_s=0.05)
    check_explained(selection)
    assert kernel.name == selection.kernel and selection.kernel.startswith(f"{precision}/")
    assert selection.error <= dqn.BOUNDS[precision] and selection.kernel in selection.order
    if precision == "int8":  # fbgemm widens before it adds: it must verify on every CPU
        assert set(selection.order) >= EXACT_ON_EVERY_CPU, selection.describe()
    # The chosen kernel computes the probe frames as the fp32 network does, at that batch.
    x = np.random.default_rng(5).integers(0, 256, (batch, *ATARI), dtype=np.uint8)
    tensors = standard_probes(spec, batch)[0].tensors
    kernel.install(kernel.prepare(tensors))
    ref = reference_outputs(spec, tensors, x)
    assert np.abs(kernel.forward(x) - ref).max() <= dqn.BOUNDS[precision] * np.abs(ref).max()


def test_auto_picks_a_verified_kernel_of_some_precision():
    _, selection = select_kernel(conv_spec(SMALL, (64,)), "auto", 1, use_cache=False, budget_s=0.05)
    check_explained(selection)
    assert selection.kernel == selection.order[0] and set(selection.timings_us) == set(selection.order)


class ConvSaturatingInt8(Int8IntMM):
    """Exact int8 dense layers, but convolutions computed as AVX2's ``vpmaddubsw`` does (int16-saturated pair
    sums): what a kernel with an unchecked conv path would get wrong on AVX2-only CPUs."""

    name = "int8/conv-saturating"

    def _convert(self, model):
        model = _replace(model, self._prefixes, Int8Linear.from_float)

        def saturating(conv):
            return Im2colConv(conv, SaturatingLinear.from_float(Im2colConv.matrix_linear(conv)))

        return _replace(model, self._convs, saturating)


@pytest.fixture
def with_saturating_conv(monkeypatch):
    extended = (ConvSaturatingInt8, *CANDIDATES)
    monkeypatch.setattr(registry_module, "CANDIDATES", extended)
    monkeypatch.setattr(select_module, "CANDIDATES", extended)


def test_the_saturation_probe_catches_saturating_convolutions(with_saturating_conv):
    spec = conv_spec(SMALL, (64,))
    _, saturation = standard_probes(spec)
    assert (saturation.x == 255).all()  # white frames: the first convolution sees top-of-grid inputs too
    check = verify_probes(ConvSaturatingInt8(spec), [saturation], 1)
    assert not check.ok and check.error > 0.3, check
    _, selection = select_kernel(spec, "int8", use_cache=False, budget_s=0.02)
    assert "int8/conv-saturating" in {r["kernel"] for r in selection.rejected}
    assert selection.kernel != "int8/conv-saturating" and "int8/conv-saturating" not in selection.order
    with pytest.raises(KernelVerificationError, match=r"int8/conv-saturating: \w+ probe: max Q error"):
        ActorPolicy("dqn", spec.obs_dim, ACTIONS, (64,), "int8", kernel="conv-saturating", torso=spec.image)


def test_the_saturation_probe_is_exact_for_exact_arithmetic():
    spec = conv_spec(SMALL, (64,))
    frames = saturation_inputs(spec, np.zeros((3, *SMALL), np.uint8))
    out = reference_outputs(spec, saturation_tensors(spec), frames)
    np.testing.assert_allclose(out, np.tile(SATURATION_HEAD_OUTPUT * np.arange(1, 7) / 6, (3, 1)), rtol=1e-5)


@pytest.mark.parametrize("bits", [32, 16, 8, 4])
@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
def test_conv_weights_round_trip_the_codec_at_every_width(bits, per_channel):
    spec = conv_spec(SMALL, (64,))
    rng = np.random.default_rng(bits)
    state = {
        k: (rng.standard_normal(shape) * (0.05 if k.endswith("weight") else 0.1)).astype(np.float32)
        for k, shape in spec.state_shapes().items()
    }
    buf = encode_message(
        state, version=1, learner_step=3, precision="int8", comm_bits=bits, per_channel=per_channel
    )
    message = decode_message(buf, expected=spec.state_shapes())
    for name, t in message.tensors.items():
        assert t.shape == state[name].shape
        got = t.to_float32()
        if t.encoding == "q":  # conv and dense weights: codes along the output channel (axis 0)
            assert t.bits == bits and t.axis == (0 if per_channel else None)
            assert t.scale.size == (state[name].shape[0] if per_channel else 1)
            step = np.broadcast_to(t.scale.reshape((-1,) + (1,) * (t.data.ndim - 1)), t.shape)
            assert (np.abs(got - state[name]) <= step / 2 + 1e-7).all()
        else:
            assert t.encoding == {32: "f32", 16: "f16"}.get(bits, "f32")
            np.testing.assert_allclose(got, state[name], rtol=1e-3 if bits == 16 else 0, atol=1e-4)
    # 8-bit conv codes reach the int8 kernels as they are: the matrix rows are the channels' codes, unchanged.
    conv = message.tensors["conv.1.weight"]
    if bits == 8 and per_channel:
        codes, scale = int8_codes(conv_matrix(conv))
        np.testing.assert_array_equal(codes, conv.data.transpose(0, 2, 3, 1).reshape(64, -1))
        np.testing.assert_array_equal(scale, conv.scale)
    # A message for other frames (another conv geometry) is refused before anything is installed.
    other = conv_spec((52, 52, 4), (64,))  # 3x3 conv outputs, not 2x2: 576 features
    with pytest.raises(ShapeMismatchError, match="torso.0.weight"):
        decode_message(buf, expected=other.state_shapes())


def test_an_int8_policy_acts_on_frames_from_an_8bit_message():
    spec = conv_spec(SMALL, (64,))
    rng = np.random.default_rng(7)
    state = {
        k: (
            rng.standard_normal(shape) * (np.sqrt(2.0 / np.prod(shape[1:])) if len(shape) > 1 else 0.1)
        ).astype(np.float32)
        for k, shape in spec.state_shapes().items()
    }
    message = decode_message(
        encode_message(state, version=2, learner_step=5, precision="int8", comm_bits=8),
        expected=spec.state_shapes(),
    )
    policy = ActorPolicy("dqn", spec.obs_dim, ACTIONS, (64,), "int8", use_cache=False, torso=spec.image)
    policy.apply(message)
    frames = rng.integers(0, 256, (16, *SMALL), dtype=np.uint8)
    ref = reference_outputs(spec, message.tensors, frames)  # fp32 on the same (dequantized) weights
    got = policy(frames)
    assert got.shape == (16, ACTIONS) and policy.version == 2
    assert np.abs(got - ref).max() <= dqn.BOUNDS["int8"] * np.abs(ref).max()
    one = policy(frames[3])  # one frame, no batch axis (its own activation scales: not bit-equal to row 3)
    assert one.shape == (ACTIONS,) and np.abs(one - ref[3]).max() <= dqn.BOUNDS["int8"] * np.abs(ref).max()
    np.testing.assert_array_equal(policy(frames.astype(np.float32)), got)  # frames as floats: the same pixels
    with pytest.raises(ValueError, match=r"expected observations \[44, 44, 4\] or \[B, \*\[44, 44, 4\]\]"):
        policy(frames[:, :40])


def test_the_f32conv_kernel_is_a_candidate_for_conv_policies_only():
    """``int8/ort-s8r-f32conv`` differs from ``ort-s8r`` only in its convolutions: on an MLP it is left out (and
    refused by name), on the conv policy it is verified like every other kernel."""
    mlp = PolicySpec.build("dqn", 4, 2, (16,))
    _, selection = select_kernel(mlp, "int8", use_cache=False, budget_s=0.01)
    assert "no convolutions" in selection.not_applicable["int8/ort-s8r-f32conv"]
    with pytest.raises(KernelVerificationError, match="int8/ort-s8r-f32conv: no convolutions"):
        ActorPolicy("dqn", 4, 2, (16,), "int8", kernel="ort-s8r-f32conv", use_cache=False)
    spec = conv_spec(SMALL, (64,))
    _, selection = select_kernel(spec, "int8", requested="ort-s8r-f32conv", use_cache=False)
    assert selection.kernel == "int8/ort-s8r-f32conv" and selection.error <= dqn.BOUNDS["int8"]
    assert not selection.not_applicable
