"""The kernel registry's self-check: wrong kernels are refused, the actor falls back, choices are cached and timed.

A saturating int8 kernel is injected on every machine (an exact emulation of AVX2's ``vpmaddubsw``: u8 x s8 pair
sums clamped to int16), so these tests show the refusal whatever CPU runs them; the kernels that really saturate
on AVX2-only CPUs (``int8/intmm``, ``int8/ort-s8``) are covered by the per-kernel tests in test_policy.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from actorq.actors.actor import QuantizedActor
from actorq.actors.kernels import CANDIDATES, KernelVerificationError, PolicySpec, select_kernel
from actorq.actors.kernels import registry as registry_module
from actorq.actors.kernels import select as select_module
from actorq.actors.kernels.torch_kernels import Fp32Torch, Int8IntMM
from actorq.actors.kernels.verify import (
    SATURATION_HEAD_OUTPUT,
    standard_probes,
    verify,
    verify_probes,
)
from actorq.actors.policy import ActorPolicy
from actorq.algorithms import dqn
from actorq.config import KERNELS, ConfigError, load_config
from actorq.hardware import cpu_fingerprint, cpu_info, read_bandwidth_gbs
from actorq.networks.torch_nets import Int8Linear
from actorq.quantize.codec import encode_message
from tests.conftest import tiny_config

OBS, OUT, LAYERS = 6, 3, (64, 64)


class SaturatingLinear(Int8Linear):
    """Int8Linear computed as AVX2's u8 x s8 ``vpmaddubsw`` does: int16-saturated pair sums."""

    clamp = True

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | int]:
        """u8 activation codes, their scale and zero point: symmetric s8 shifted by 128, as oneDNN does."""
        x_scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-30) / 127
        return torch.round(x / x_scale).to(torch.int32) + 128, x_scale, 128

    def saturates(self, w: torch.Tensor) -> bool:
        return self.clamp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        codes, scale, bias = self.weights
        xq, x_scale, zero = self.quantize(x)
        w = codes.to(torch.int32)
        prod = xq[:, None, :] * w[None, :, :]
        if prod.shape[-1] % 2:
            prod = torch.nn.functional.pad(prod, (0, 1))
        pairs = prod[..., 0::2] + prod[..., 1::2]
        if self.saturates(w):
            pairs = pairs.clamp(-32768, 32767)
        acc = pairs.sum(-1) - zero * w.sum(-1)
        return acc.float() * (x_scale * scale) + bias


class SaturatingInt8(Int8IntMM):
    name = "int8/saturating"
    linear = SaturatingLinear

    def _convert(self, model):
        from actorq.actors.kernels.torch_kernels import _replace

        return _replace(model, self._prefixes, self.linear.from_float)


class AsymmetricSaturatingLinear(SaturatingLinear):
    """As MLAS's AVX2 u8 x s8 kernel behind ``int8/ort-s8``: activations quantized per tensor to u8 over
    ``[min(x, 0), max(x, 0)]`` with a zero point, then ``vpmaddubsw`` pair sums clamped to int16; layers with
    fewer than 32 inputs or outputs exact (that kernel computes them in fp32)."""

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | int]:
        lo, hi = x.amin().clamp_max(0), x.amax().clamp_min(0)
        x_scale = ((hi - lo) / 255).clamp_min(1e-30)
        zero = torch.round(-lo / x_scale).to(torch.int32)
        return (torch.round(x / x_scale).to(torch.int32) + zero).clamp(0, 255), x_scale, zero

    def saturates(self, w: torch.Tensor) -> bool:
        return min(w.shape) >= 32


class MildlySaturatingInt8(SaturatingInt8):
    name = "int8/mildly-saturating"
    linear = AsymmetricSaturatingLinear


class BrokenLater(Fp32Torch):
    """Exact on the probe; once ``broken`` is set (after selection), off by a constant: fails on real weights."""

    name = "fp32/broken-later"
    broken = False

    def forward(self, x: np.ndarray) -> np.ndarray:
        out = super().forward(x)
        return out + 1.0 if type(self).broken else out


@pytest.fixture
def registry(monkeypatch):
    """Install extra kernel classes in the registry for one test."""

    def install(*classes):
        extended = (*classes, *CANDIDATES)
        monkeypatch.setattr(registry_module, "CANDIDATES", extended)
        monkeypatch.setattr(select_module, "CANDIDATES", extended)

    return install


def spec(algorithm: str = "d4pg") -> PolicySpec:
    return PolicySpec.build(algorithm, OBS, OUT, LAYERS, -1.0, 1.0)


def test_the_emulation_is_exact_but_for_the_int16_saturation():
    codes = torch.randint(-127, 128, (64, 64), dtype=torch.int8)
    x = torch.randn(4, 64)
    layer = SaturatingLinear(64, 64)
    layer.set_codes(codes, torch.full((64,), 0.01), torch.zeros(64))
    x_scale = x.abs().amax(-1, keepdim=True) / 127
    exact = (torch.round(x / x_scale).double() @ codes.double().t()) * x_scale.double() * 0.01
    layer.clamp = False
    assert torch.allclose(layer(x).double(), exact, rtol=1e-5, atol=1e-6)
    layer.clamp = True
    assert (layer(x).double() - exact).abs().max() > 0.1 * exact.abs().max()


@pytest.mark.parametrize("algorithm", ["d4pg", "dqn"])
def test_selection_rejects_a_saturating_kernel_with_its_measured_error(registry, algorithm):
    registry(SaturatingInt8)
    kernel, selection = select_kernel(spec(algorithm), "int8", use_cache=False, budget_s=0.02)
    rejected = {r["kernel"]: r for r in selection.rejected}
    assert "int8/saturating" in rejected and rejected["int8/saturating"]["error"] > 0.1
    assert "int8/saturating" not in selection.order
    assert kernel.name != "int8/saturating" and selection.error <= 0.1
    with pytest.raises(KernelVerificationError, match=r"int8/saturating: random probe: max (Q )?error"):
        select_kernel(spec(algorithm), "int8", requested="saturating", use_cache=False)


def test_the_saturation_probe_catches_what_the_random_probe_lets_through(registry):
    """On a DQN 2x256, clamped pair sums over zero-pointed u8 activations stay within the random probe's Q bound
    (as ``int8/ort-s8`` did on AVX2); the saturation probe's top-of-grid activations expose them."""
    net = PolicySpec.build("dqn", 4, 2, (256, 256))
    random_probe, saturation_probe = standard_probes(net)
    kernel = MildlySaturatingInt8(net)
    loose = verify(kernel, random_probe.tensors, random_probe.x, random_probe.ref, 1)
    assert loose.ok and 0.005 < loose.error < dqn.BOUNDS["int8"], loose.detail
    exposed = verify_probes(kernel, [random_probe, saturation_probe], 1)
    assert not exposed.ok and exposed.error > 0.3 and exposed.detail.startswith("saturation probe")
    registry(MildlySaturatingInt8)
    _, selection = select_kernel(net, "int8", use_cache=False, budget_s=0.02)
    rejected = {r["kernel"]: r["reason"] for r in selection.rejected}
    assert rejected["int8/mildly-saturating"].startswith("saturation probe")
    assert "int8/mildly-saturating" not in selection.order


@pytest.mark.parametrize(
    "algorithm, obs, out, layers",
    [("d4pg", 24, 6, (64, 64, 64)), ("dqn", 4, 3, (256, 256)), ("d4pg", 40, 40, (48,))],
)
def test_the_saturation_probe_is_exact_for_exact_arithmetic(algorithm, obs, out, layers):
    """Its fp32 outputs are the designed constants, and every kernel this machine verifies computes them to
    float rounding (the constants sit on every quantization grid, so no rounding error is expected)."""
    net = PolicySpec.build(algorithm, obs, out, layers, -2.0, 3.0)
    probe = standard_probes(net)[1]
    head = SATURATION_HEAD_OUTPUT * np.arange(1, out + 1) / out
    designed = head if algorithm == "dqn" else (np.tanh(head) + 1) / 2 * 5.0 - 2.0
    np.testing.assert_allclose(probe.ref, np.broadcast_to(designed, probe.ref.shape), rtol=1e-5, atol=1e-6)
    _, selection = select_kernel(net, "auto", use_cache=False, budget_s=0.02)
    for name in selection.order:
        if name.startswith("int8/") or name.startswith("fp32/"):
            assert selection.errors[name] < 0.02, (name, selection.errors[name])


def test_actor_falls_back_when_its_kernel_fails_on_the_first_real_message(registry, monkeypatch):
    registry(BrokenLater)
    monkeypatch.setattr(BrokenLater, "broken", False)
    # Make the broken kernel the choice, as if it had timed fastest.
    monkeypatch.setattr(
        select_module,
        "_choose",
        lambda timings, precision: sorted(timings, key=lambda n: n != BrokenLater.name),
    )
    policy = ActorPolicy("dqn", 4, 2, (32, 32), "fp32", use_cache=False)
    assert policy.kernel_name == "fp32/broken-later"
    monkeypatch.setattr(BrokenLater, "broken", True)

    class Subscriber:
        buffer = encode_message(
            {k: v.numpy() for k, v in spec_state(policy).items()},
            version=3,
            learner_step=5,
            precision="fp32",
            comm_bits=32,
        )

        def latest(self, timeout_s=None):
            return self.buffer

    actor = QuantizedActor(tiny_config("dqn"), policy, None, Subscriber(), actor_id=0, seed=0)
    actor.update(wait=True)
    assert actor.weights.version == 3 and actor.weights.rejected == 0
    assert policy.kernel_name != "fp32/broken-later"
    first = policy.selection.first_message
    assert first[0]["kernel"] == "fp32/broken-later" and not first[0]["ok"] and first[-1]["ok"]
    assert any(
        r["kernel"] == "fp32/broken-later" and "first message" in r["reason"]
        for r in policy.selection.rejected
    )
    assert policy.selection.kernel == policy.kernel_name
    actor.close()


def spec_state(policy: ActorPolicy) -> dict[str, torch.Tensor]:
    torch.manual_seed(3)
    return policy.spec.float_model().state_dict()


def test_a_named_kernel_that_fails_on_the_first_message_stops_with_a_clear_error(registry, monkeypatch):
    registry(BrokenLater)
    monkeypatch.setattr(BrokenLater, "broken", False)
    monkeypatch.setattr(registry_module, "KERNELS", {**KERNELS, "fp32": (*KERNELS["fp32"], "broken-later")})
    policy = ActorPolicy("dqn", 4, 2, (32, 32), "fp32", kernel="broken-later", use_cache=False)
    monkeypatch.setattr(BrokenLater, "broken", True)
    with pytest.raises(KernelVerificationError, match="actor.precision=fp32"):
        policy.load_state({k: v.numpy() for k, v in spec_state(policy).items()})
    assert policy.version == -1


def test_choice_is_cached_and_a_stale_cache_entry_is_verified_again(registry, tmp_path, monkeypatch):
    cache = tmp_path / "kernels.json"
    monkeypatch.setenv("ACTORQ_KERNEL_CACHE", str(cache))
    first = ActorPolicy("d4pg", OBS, OUT, LAYERS, "int8")
    assert not first.selection.cached and cache.is_file()
    second = ActorPolicy("d4pg", OBS, OUT, LAYERS, "int8")
    assert second.selection.cached and second.kernel_name == first.kernel_name
    # A cache entry naming a kernel that is wrong here (another machine's, a tampered file) is not trusted.
    registry(SaturatingInt8)
    data = json.loads(cache.read_text())
    for entry in data.values():
        entry["kernel"], entry["order"] = "int8/saturating", ["int8/saturating"]
    cache.write_text(json.dumps(data))
    third = ActorPolicy("d4pg", OBS, OUT, LAYERS, "int8")
    assert not third.selection.cached and third.kernel_name != "int8/saturating"
    assert "int8/saturating" in {r["kernel"] for r in third.selection.rejected}
    # An unreadable cache is ignored, not fatal: the kernels are selected afresh.
    cache.write_text("{not json")
    fourth = ActorPolicy("d4pg", OBS, OUT, LAYERS, "int8")
    # Not necessarily third's kernel: a fresh selection times the verified kernels again, and where two run
    # equally fast (ort-u8 and ort-s8 on VNNI CPUs) either may win.
    assert not fourth.selection.cached and fourth.kernel_name in third.selection.order
    assert fourth.kernel_name != "int8/saturating"


def test_auto_keeps_fp32_unless_another_precision_is_clearly_faster():
    choose = select_module._choose
    assert choose({"fp32/torch": 100.0, "int8/fbgemm": 98.0}, "auto")[0] == "fp32/torch"
    assert choose({"fp32/torch": 100.0, "fp32/ort": 60.0, "int8/fbgemm": 59.0}, "auto")[0] == "fp32/ort"
    assert choose({"fp32/torch": 100.0, "int8/fbgemm": 50.0}, "auto")[0] == "int8/fbgemm"
    assert choose({"int8/x86": 80.0, "int8/fbgemm": 79.0}, "int8") == ["int8/fbgemm", "int8/x86"]


def test_auto_precision_resolves_to_a_verified_kernel():
    policy = ActorPolicy("dqn", 4, 2, (16,), "auto", use_cache=False)
    assert policy.precision in ("fp32", "fp16", "int8") and policy.kernel_name in policy.selection.order
    fp32 = [n for n in policy.selection.timings_us if n.startswith("fp32/")]
    assert fp32  # fp32 was measured beside the others, so "never slower than fp32" is decided on this machine
    assert policy.selection.timings_us[policy.kernel_name] <= min(
        policy.selection.timings_us[n] for n in fp32
    )


def test_registry_and_config_name_the_same_kernels():
    assert {c.name for c in CANDIDATES} == {f"{p}/{k}" for p, names in KERNELS.items() for k in names}
    for cls in CANDIDATES:
        assert cls.__doc__ and len(cls.__doc__) > 40, f"{cls.name} must say where it is exact and why"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["actor.kernel=bogus"], "actor.kernel"),
        (["actor.precision=int8", "actor.kernel=half"], "choose one of: auto, ort-u8"),
        (["actor.precision=auto", "actor.kernel=fbgemm"], "actor.kernel='fbgemm'"),
        (["actor.precision=int4"], "actor.precision"),
    ],
)
def test_config_rejects_unknown_kernels_before_any_process_starts(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("configs/dqn/gym_cartpole.yaml", overrides)
    assert load_config("configs/dqn/gym_cartpole.yaml", ["actor.precision=auto"]).comm_bits == 32


def test_hardware_record_describes_the_cpu():
    info = cpu_info()
    assert info["model"] and info["cores"] >= 1 and set(info["flags"]) >= {"avx2", "avx512_vnni", "amx_int8"}
    assert cpu_fingerprint() == cpu_fingerprint() and len(cpu_fingerprint()) == 16
    small, large = read_bandwidth_gbs(1 << 20), read_bandwidth_gbs(64 << 20, repeats=3)
    assert small > 0 and large > 0 and np.isfinite([small, large]).all()
