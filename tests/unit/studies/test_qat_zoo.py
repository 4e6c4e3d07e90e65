"""QAT cells of a pretrained (zoo) agent in the ``qat-study`` grid (issue 37 item 2): records in the pairs' format,
fp32/PTQ once per evaluation replicate, SAC fine-tuned with its learned entropy coefficient, the grid resumable and
completed when widths are added, and ``actorq qat-report`` rendering the agent with its one-policy caveat.

The agent is a tiny SAC Pendulum model saved here (no ../shared): a zoo directory is read the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from actorq import cli
from actorq.studies import qat_finetune, qat_study, qat_zoo, zoo

RECIPE = qat_finetune.QatRecipe(finetune_steps=64, calib_steps=64)
LOG_ENT = -2.0  # the agent's learned entropy coefficient: exp(-2) = 0.135, where a fresh SAC starts at 1.0


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("agent") / "sac_pendulum"
    model = zoo.make_model(
        "sac", "Pendulum-v1", seed=0, policy_kwargs={"net_arch": [16, 16]}, learning_starts=50
    )
    model.learn(total_timesteps=100)
    with torch.no_grad():
        model.log_ent_coef.fill_(LOG_ENT)
    out.mkdir()
    model.save(out / "model.zip")
    (out / "meta.json").write_text(json.dumps({"algo": "sac", "env_id": "Pendulum-v1"}))
    return out


def _small_qat(
    ag: qat_zoo.ZooAgent, bits: int, seed: int, episodes: int, recipe: Any = None
) -> dict[str, Any]:
    return _REAL_QAT(ag, bits, seed, episodes, RECIPE)


_REAL_QAT = qat_zoo.run_qat_cell


def _small_control(ag: qat_zoo.ZooAgent, seed: int, episodes: int, recipe: Any = None) -> dict[str, Any]:
    return _REAL_CONTROL(ag, seed, episodes, RECIPE)


_REAL_CONTROL = qat_zoo.run_control_cell


def _small_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(qat_zoo, "run_qat_cell", _small_qat)
    monkeypatch.setattr(qat_zoo, "run_control_cell", _small_control)


def test_training_model_continues_the_agent_with_its_entropy_coefficient(agent_dir: Path) -> None:
    model, _ = qat_zoo.training_model(agent_dir, seed=3)
    assert model.log_ent_coef.item() == pytest.approx(LOG_ENT)  # not a fresh 0 (ent_coef 1.0)
    assert model.num_timesteps == 100 and model.learning_starts == 0


def test_zoo_grid_records_resume_complete_and_render(
    agent_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _small_cells(monkeypatch)
    ag = qat_zoo.agent(agent_dir)
    assert ag.key == "zoo_sac_Pendulum-v1"
    written = qat_zoo.run_zoo_grid(tmp_path, [ag], [6], seeds=2, episodes=2)
    assert [p.name for p in written] == [
        *("fp32_s0.json", "fp32_s1.json"),
        *("ft32_s0.json", "ft32_s1.json"),
        *("qat6_s0.json", "qat6_s1.json"),
    ]  # the fine-tune controls come right after the fp32 replicates
    assert {p.parent.name for p in written} == {ag.key}
    fp = [json.loads(p.read_text()) for p in written[:2]]
    assert [r["replicate"] for r in fp] == ["evaluation"] * 2 and [r["seed"] for r in fp] == [0, 1]
    assert fp[0]["activation_ranges"] == fp[1]["activation_ranges"]  # one policy, one calibration
    assert fp[0]["fp32"] != fp[1]["fp32"]  # ... evaluated on two evaluation seeds
    qat = json.loads(written[4].read_text())
    assert qat["kind"] == "qat" and qat["bits"] == 6 and qat["schedule"] == "finetune"
    assert qat["finetune_start"] == 100 and qat["deploy_check"]["within_bound"]
    assert qat["lr_seen"] == [RECIPE.learning_rate]  # actor, critic and entropy optimizers alike
    assert len(qat["qat_deployed"]) == 2 and qat["curve"] is not None
    ctl = json.loads(written[2].read_text())
    assert ctl["kind"] == qat_study.CONTROL_KIND and ctl["fake_quant_layers"] == 0
    for key in ("replicate", "seed", "finetune_start", "lr_seen", "recipe", "agent", "env_run"):
        assert ctl[key] == qat[key], key  # the QAT cell's fine-tune of seed 0, unquantized
    assert len(ctl[qat_study.CONTROL_KIND]) == 2

    # more widths: the fp32 replicates are completed (as run_fp32_replicate computes them), QAT at 4 bits runs
    written = qat_zoo.run_zoo_grid(tmp_path, [ag], [6, 4], seeds=2, episodes=2)
    assert [p.name for p in written] == [
        "fp32_s0.json",
        "fp32_s1.json",
        "qat4_s0.json",
        "qat4_s1.json",
    ]  # no ft32
    rec = json.loads(written[1].read_text())
    assert rec["ptq_completed"] == [4] and set(rec["ptq_wa"]) == {"6", "4"}
    direct = qat_zoo.run_fp32_replicate(ag, 1, [4], episodes=2)
    assert rec["ptq_w"]["4"] == direct["ptq_w"]["4"] and rec["ptq_wa"]["4"] == direct["ptq_wa"]["4"]
    assert qat_zoo.run_zoo_grid(tmp_path, [ag], [6, 4], seeds=2, episodes=2) == []  # finished

    assert cli.main(["qat-report", str(tmp_path), "--pairs", ag.key]) == 0
    report = (tmp_path / "report.md").read_text()
    assert f"### {ag.key}" in report and "over 2 evaluation replicates" in report
    assert "**one policy**" in report and str(agent_dir) in report
    assert f"| {ag.key} | 2/2 | 2/2 | 2/2 | 2/2 |" in report  # fp32, ft32, qat6, qat4
    assert "QAT E% vs control" in report


def test_cli_runs_only_the_agents_and_refuses_bad_zoo_input(
    agent_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    _small_cells(monkeypatch)
    monkeypatch.setattr(qat_study, "run_grid", lambda *a, **k: pytest.fail("pairs ran without --pairs"))
    argv = ["qat-study", "--out", str(tmp_path), "--zoo", str(agent_dir), "--bits", "8", "--seeds", "1"]
    assert cli.main([*argv, "--episodes", "2"]) == 0
    names = sorted(p.name for p in (tmp_path / "records" / "zoo_sac_Pendulum-v1").iterdir())
    assert names == ["fp32_s0.json", "ft32_s0.json", "qat8_s0.json"]
    for bad, says in (
        (["--zoo", str(tmp_path / "nope")], "no such agent directory"),
        (["--zoo", f"{agent_dir},{agent_dir}"], "each once"),
        (["--zoo", str(agent_dir), "--schedule", "from-scratch"], "can only be fine-tuned"),
    ):
        e = cli.main(["qat-study", "--out", str(tmp_path / "x"), *bad])
        assert e == 2 and says in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
