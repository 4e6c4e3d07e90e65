"""QAT's deployed integer policy (actorq.studies.qat_deploy) against its fake-quant forward, and the study grid.

The stated bound: every deployed layer's output differs from the fake-quant layer's output on the same input by
at most the float32 dot-product rounding bound gamma_{n+1} * (|x| @ |w|^T + |b|) (plus one ulp of the output),
because the integer path computes the exact value of the dot product the fake-quant graph rounds in float32.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from actorq.studies import envs, qat, qat_deploy, qat_finetune, qat_md, qat_stats, qat_study
from actorq.studies import torch_fake_quant as tq


def _trained_layer(bits: int, act_bits: int | None, per_channel: bool, seed: int = 0) -> tq.QuantLayer:
    torch.manual_seed(seed)
    scheme = tq.QuantScheme.parse(str(bits), per_channel_linear=per_channel)
    q = tq.QuantLayer(nn.Linear(64, 32), scheme, act_bits=act_bits)
    q.train()
    q(torch.randn(256, 64) * 3 + 0.5)  # observe an activation range, as QAT's training forwards do
    q.eval()
    return q


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", [True, False])
def test_integer_linear_equals_fake_quant_within_fp32_bound(bits: int, per_channel: bool, act: bool) -> None:
    q = _trained_layer(bits, bits if act else None, per_channel)
    integer = qat_deploy.IntegerLinear(q)
    x = torch.randn(512, 64) * 4  # wider than the observed range: clipping must agree too
    with torch.no_grad():
        y_fq = q(x).double()
        y_int = integer(x).double()
        x_fq = x if not act else (integer.quantize_input(x) - integer.x_zero) * integer.x_scale
        w = integer.w_codes.double() * integer.w_scale.reshape(-1, 1)
        bound = qat_deploy.fp32_dot_bound(x_fq, w, integer.bias) + qat_deploy.FP32_EPS * y_fq.abs()
    diff = (y_int - y_fq).abs()
    assert torch.all(diff <= bound), float((diff / bound).max())
    # The deployment stores what it claims: integer codes inside the signed range, int8 storage for <= 8 bits.
    assert integer.storage_dtype == "int8"
    lim = 2 ** (bits - 1) - 1
    assert int(integer.w_codes.abs().max()) <= lim
    if act:
        codes = integer.quantize_input(x)
        assert int(codes.min()) >= 0 and int(codes.max()) <= 2**bits - 1
        # The fake-quant input is exactly the dequantized codes (same rounding, same clipping).
        expect = tq.fake_quant_activation(x, q._lo, q._hi, bits)
        torch.testing.assert_close(
            ((codes - integer.x_zero) * integer.x_scale).float(), expect, rtol=0, atol=1e-6
        )


def test_integer_linear_differs_from_fp32_layer() -> None:
    """The check can fail: the unquantized layer is far outside the bound at 3 bits."""
    q = _trained_layer(3, 3, False)
    integer = qat_deploy.IntegerLinear(q)
    x = torch.randn(64, 64)
    with torch.no_grad():
        gap = (integer(x) - q.layer(x)).abs().max()
    assert gap > 1e-2


def test_integer_linear_rejects_what_it_cannot_deploy() -> None:
    with pytest.raises(ValueError, match="Linear layers only"):
        qat_deploy.IntegerLinear(tq.QuantLayer(nn.Conv2d(2, 2, 3), tq.QuantScheme.parse("8"), act_bits=8))
    with pytest.raises(ValueError, match="integer weight scheme"):
        qat_deploy.IntegerLinear(tq.QuantLayer(nn.Linear(4, 4), tq.QuantScheme.parse("fp16")))
    with pytest.raises(ValueError, match="never observed"):
        qat_deploy.IntegerLinear(tq.QuantLayer(nn.Linear(4, 4), tq.QuantScheme.parse("8"), act_bits=8))


@pytest.mark.parametrize(
    ("algo", "env_id", "steps"), [("ppo", "CartPole-v1", 512), ("ddpg", "Pendulum-v1", 300)]
)
def test_deployed_qat_policy_matches_fake_quant_policy(algo: str, env_id: str, steps: int) -> None:
    torch.set_num_threads(1)
    overrides = {"learning_starts": 100, "policy_kwargs": {"net_arch": [32, 32]}} if algo == "ddpg" else {}
    model, _ = qat.train_qat(algo, env_id, 4, steps, steps // 2, seed=0, **overrides)
    obs = envs.record_observations(model, env_id, 200, seed=3)
    a_fq = qat_deploy.actions(model, obs)
    check = qat_deploy.check_equal(model, obs)
    assert check["within_bound"], check["layers"]
    replaced = qat_deploy.deploy_integer(model)
    assert replaced and all(
        isinstance(m, qat_deploy.IntegerLinear)
        for mod in qat_study.zoo.deployed_modules(model).values()
        for m in mod.modules()
        if isinstance(m, (nn.Linear, qat_deploy.IntegerLinear, tq.QuantLayer))
    )
    a_int = qat_deploy.actions(model, obs)
    if algo == "ppo":
        assert np.mean(a_fq == a_int) >= 0.99
    else:
        np.testing.assert_allclose(a_int, a_fq, atol=1e-4)
    with pytest.raises(ValueError, match="needs a QAT model"):
        qat_deploy.deploy_integer(model)


@pytest.mark.parametrize("schedule", ["finetune", "from_scratch"])
def test_study_grid_resumes_and_reports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, schedule: str
) -> None:
    torch.set_num_threads(1)
    recipe = qat_finetune.QatRecipe(finetune_steps=256, calib_steps=64)
    tiny = qat_study.Pair("ppo", "CartPole-v1", 256, recipe=recipe)
    monkeypatch.setattr(qat_study, "PAIRS", {tiny.key: tiny})
    written = qat_study.run_grid(tmp_path, bits=[8], seeds=1, episodes=2, schedule=schedule)
    finetune = schedule == "finetune"  # only a fine-tune has a fine-tune control, right after the fp32 cells
    assert [p.name for p in written] == [
        "fp32_s0.json",
        *(["ft32_s0.json"] if finetune else []),
        "qat8_s0.json",
    ]
    rec = json.loads(written[-1].read_text())
    assert rec["schedule"] == schedule and rec["deploy_check"]["within_bound"]
    if finetune:  # fine-tuned the fp32 cell's policy, kept under policies/
        assert rec["finetune_start"] == 256 and rec["lr_seen"] == [recipe.learning_rate]
        assert qat_study.policy_path(tmp_path, tiny, 0).exists()
        ctl = json.loads(written[1].read_text())
        assert (
            ctl["kind"] == qat_study.CONTROL_KIND == qat_stats.CONTROL_KIND and ctl["fake_quant_layers"] == 0
        )
        for key in ("schedule", "recipe", "finetune_start", "lr_seen", "seed", "episodes"):
            assert ctl[key] == rec[key], key  # the QAT cell's fine-tune, minus the quantization
        assert len(ctl[qat_study.CONTROL_KIND]) == 2 and ctl["curve"] and ctl["ranges_frozen_at"] is None
    else:
        assert rec["quant_delay"] == 128
    assert len(rec["qat_deployed"]) == 2 and rec["curve"]
    again = qat_study.run_grid(tmp_path, bits=[8], seeds=1, episodes=2, schedule=schedule)
    assert again == []  # finished cells, the control included, are skipped
    report = qat_md.render(tmp_path, seeds=1).read_text()
    cols = "1/1 | 1/1 | 1/1" if finetune else "1/1 | 1/1"  # fp32, (ft32,) qat8
    assert f"| {tiny.key} | {cols} |" in report and "| 8 |" in report
    assert (qat_stats.CONTROL_LABEL in report) == finetune
    assert (tmp_path / f"sweet_spot_{tiny.key}.png").exists()
    with pytest.raises(ValueError, match="unknown pairs"):
        qat_study.run_grid(tmp_path, pairs=["nope"])
    with pytest.raises(ValueError, match="unknown QAT schedule"):
        qat_study.run_grid(tmp_path, schedule="sometimes")
