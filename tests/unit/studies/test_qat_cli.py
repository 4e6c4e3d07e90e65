"""``actorq qat`` fine-tunes each seed's fp32 policy by default (the recipe qat-study uses), and keeps the
from-scratch schedule behind ``--schedule from-scratch`` with its ``--quant-delay``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from actorq import cli
from actorq.studies import qat_finetune

BASE = ["qat", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "256", "--seeds", "1", "--episodes", "2"]


def test_qat_fine_tunes_the_fp32_policy_by_default(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    torch.set_num_threads(1)
    assert cli.main([*BASE, "--bits", "8", "--finetune-steps", "256", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "qat.json").read_text())
    assert res["schedule"] == "finetune" and res["quant_delay"] is None
    (run,) = res["runs"]
    assert run["schedule"] == "finetune" and run["finetune_start"] == 256  # continued the seed's fp32 run
    assert run["recipe"]["finetune_steps"] == 256 and run["lr_seen"] == [
        qat_finetune.QatRecipe().learning_rate
    ]
    assert "QAT fine-tuned from each fp32 policy (256 steps)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--schedule", "from-scratch"], "--schedule from-scratch needs --quant-delay"),
        (["--quant-delay", "10"], "--quant-delay applies to --schedule from-scratch only"),
    ],
)
def test_schedule_and_quant_delay_must_agree(
    extra: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    e = cli.main([*BASE, *extra, "--out", str(tmp_path / "out")])
    assert e == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
