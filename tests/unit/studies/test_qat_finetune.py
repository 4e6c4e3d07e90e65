"""The QAT recipe's mechanics (actorq.studies.qat_finetune): frozen activation ranges, a constant learning rate and
clip range through the fine-tune, per-channel weight scales when configured, and the recipe's validation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from torch import nn

from actorq.studies import qat_finetune, zoo
from actorq.studies import torch_fake_quant as tq

ENV = "CartPole-v1"


class _RangeLog(BaseCallback):
    """Snapshots every fake-quant layer's activation range after each environment step."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[int, dict]] = []

    def _on_step(self) -> bool:
        mods = zoo.qat_modules(self.model)
        self.log.append((int(self.num_timesteps), {n: tq.activation_ranges(m) for n, m in mods.items()}))
        return True


def _fp32_ppo(steps: int = 512) -> BaseAlgorithm:
    """A short fp32 PPO run: its linear schedule leaves the optimizer's learning rate at ~0."""
    torch.set_num_threads(1)
    model = zoo.make_model("ppo", ENV, seed=0)
    model.learn(total_timesteps=steps)
    return model


def test_frozen_layer_keeps_its_range_in_training_but_calibration_still_sets_it() -> None:
    torch.manual_seed(0)
    q = tq.QuantLayer(nn.Linear(4, 2), tq.QuantScheme.parse("8"), act_bits=8)
    q.train()
    q(torch.randn(64, 4))
    before = tq.activation_ranges(nn.Sequential(q))
    tq.set_ranges_frozen(nn.Sequential(q), True)
    q(torch.randn(64, 4) * 10)  # far outside the range: an EMA would move
    assert tq.activation_ranges(nn.Sequential(q)) == before
    q.calibrating = True
    q(torch.full((2, 4), 50.0))
    assert q.act_max.item() == 50.0  # calibration is how the recipe sets the frozen ranges
    q.calibrating = False
    tq.set_ranges_frozen(nn.Sequential(q), False)
    q(torch.full((2, 4), 100.0))
    assert q.act_max.item() > 50.0  # unfrozen: the EMA moves again


def test_finetune_holds_constant_lr_and_clip_and_ranges_fixed_from_calibration() -> None:
    model = _fp32_ppo()
    assert min(g["lr"] for g in model.policy.optimizer.param_groups) < 1e-5  # the decayed fp32 schedule
    recipe = qat_finetune.QatRecipe(finetune_steps=512, learning_rate=3e-4, clip_range=0.15, calib_steps=64)
    log = _RangeLog()
    model, info = qat_finetune.finetune_qat(model, ENV, 6, recipe, callbacks=[log])
    assert info["finetune_start"] == 512 and info["finetune_end"] >= 1024
    assert info["lr_seen"] == [3e-4]  # every rollout of the fine-tune saw the recipe's rate
    assert [g["lr"] for g in model.policy.optimizer.param_groups] == [3e-4]
    assert model.clip_range(1.0) == model.clip_range(0.0) == 0.15
    assert info["ranges_frozen_at"] == 512
    calibrated = {k.removeprefix("policy."): v for k, v in info["calibrated_ranges"].items()}
    assert log.log and all(snap["policy"] == calibrated for _, snap in log.log)
    assert info["quantized_forwards"] and min(info["quantized_forwards"].values()) > 0


def test_ranges_follow_the_ema_until_the_freeze_step_then_stop() -> None:
    model = _fp32_ppo()
    # PPO updates (training-mode forwards) every 256 steps: one update at 768 moves the EMA, then the freeze at
    # 1024, then two more updates that must not move the ranges.
    recipe = qat_finetune.QatRecipe(
        finetune_steps=1536, range_freeze_steps=512, calib_steps=64, ema_decay=0.5
    )
    log = _RangeLog()
    model, info = qat_finetune.finetune_qat(model, ENV, 6, recipe, callbacks=[log])
    frozen_at = info["ranges_frozen_at"]
    assert 512 + 512 <= frozen_at < 512 + 512 + model.n_envs
    after = [snap for t, snap in log.log if t >= frozen_at]
    assert len(after) > 1 and all(s == after[0] for s in after)  # no change once frozen
    calibrated = {k.removeprefix("policy."): v for k, v in info["calibrated_ranges"].items()}
    assert after[0]["policy"] != calibrated  # the EMA did move them before the freeze


@pytest.mark.parametrize("per_channel", [False, True])
def test_per_channel_weight_scales_are_used_when_configured(per_channel: bool) -> None:
    model = _fp32_ppo(256)
    recipe = qat_finetune.QatRecipe(finetune_steps=256, calib_steps=64, per_channel_linear=per_channel)
    model, _ = qat_finetune.finetune_qat(model, ENV, 4, recipe)
    model.policy.set_training_mode(False)
    layers = dict(tq.quant_layers(model.policy))
    assert layers
    for q in layers.values():
        w = tq.to_numpy(q.layer.weight)
        used = tq.to_numpy(q._quantized_weight())
        want = tq.quantize_array(w, tq.QuantScheme.parse("4"), 0 if per_channel else None)
        np.testing.assert_array_equal(used, want)
    levels = np.unique(tq.to_numpy(layers["mlp_extractor.policy_net.0"]._quantized_weight()))
    assert (len(levels) > 15) == per_channel  # one 4-bit grid (15 levels) per tensor, or one per output row


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("finetune_steps", 0),
        ("learning_rate", 0.0),
        ("clip_range", 1.5),
        ("exploration_eps", 2.0),
        ("calib_steps", 0),
        ("range_freeze_steps", 20_000),
        ("ema_decay", 1.0),
        ("obs_bits", 1),
    ],
)
def test_recipe_rejects_values_that_cannot_work(field: str, value: float) -> None:
    recipe = dataclasses.replace(qat_finetune.QatRecipe(), **{field: value})
    with pytest.raises(ValueError, match=field):
        recipe.validate()


class _RngAtStart(BaseCallback):
    """torch's global RNG state when the fine-tune's training starts (after calibration)."""

    def __init__(self) -> None:
        super().__init__()
        self.state: torch.Tensor | None = None

    def _on_training_start(self) -> None:
        self.state = torch.get_rng_state()

    def _on_step(self) -> bool:
        return True


@pytest.mark.parametrize("obs_bits", [None, 8])
def test_control_is_the_same_finetune_without_any_quantization(obs_bits: int | None) -> None:
    """With ``obs_bits``, QAT finds the observation layers (the control does not) and still starts on its RNG."""
    base = _fp32_ppo(256)
    recipe = qat_finetune.QatRecipe(finetune_steps=256, learning_rate=3e-4, calib_steps=64, obs_bits=obs_bits)
    runs = {}
    for quantize in (True, False):
        at_start = _RngAtStart()
        model = qat_finetune.continue_from(base.policy.state_dict(), "ppo", ENV, seed=5, steps=256)
        runs[quantize] = (
            *qat_finetune.finetune_qat(model, ENV, 6, recipe, callbacks=[at_start], quantize=quantize),
            at_start,
        )
    (qat, qat_info, qat_rng), (ctl, info, ctl_rng) = runs[True], runs[False]
    # the same recipe, steps and seeded RNG state at the start: only the quantization differs
    for key in ("finetune_start", "finetune_end", "lr_seen", "recipe"):
        assert info[key] == qat_info[key], key
    assert torch.equal(ctl_rng.state, qat_rng.state)
    assert info["bits"] is info["act_bits"] is info["obs_bits"] is None and not info["wrapped_layers"]
    assert qat_info["obs_bits"] == obs_bits and bool(qat_info["obs_layers"]) == (obs_bits is not None)
    assert not info["quantized_forwards"] and info["ranges_frozen_at"] is None
    assert not list(tq.quant_layers(ctl.policy)) and list(tq.quant_layers(qat.policy))
    # trained: the weights moved from the fp32 policy
    moved = [not torch.equal(v, base.policy.state_dict()[k]) for k, v in ctl.policy.state_dict().items()]
    assert any(moved)
    # a plain fp32 network holding its weights computes exactly its outputs (strict load: no wrapper keys)
    plain = zoo.make_model("ppo", ENV, seed=9)
    plain.policy.load_state_dict(ctl.policy.state_dict(), strict=True)
    obs = torch.as_tensor(np.random.default_rng(0).normal(size=(32, 4)), dtype=torch.float32)
    for m in (ctl, plain):
        m.policy.set_training_mode(False)
    with torch.no_grad():
        got = ctl.policy.get_distribution(obs).distribution.logits
        want = plain.policy.get_distribution(obs).distribution.logits
        assert torch.equal(got, want)
        assert torch.equal(ctl.policy.predict_values(obs), plain.policy.predict_values(obs))
