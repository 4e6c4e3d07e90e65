"""The QuaRL Table 2 analogue over pretrained agents, from their ptq.json and fidelity.json files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actorq.studies.zoo_table import table2_markdown

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "reports" / "studies" / "zoo_table2"


def _ptq(path: Path, rows: list[dict]) -> None:
    path.mkdir(parents=True)
    (path / "ptq.json").write_text(json.dumps({"rows": rows}))


def test_rows_per_agent_and_scheme_beside_the_papers(tmp_path):
    fp32 = {"precision": "fp32", "mean": 500.0, "episodes": 300}
    _ptq(
        tmp_path / "dqn_CartPole-v1" / "ptq_per_tensor",
        [
            fp32,
            {"precision": "fp16", "mean": 500.0, "E%": 0.0},
            {"precision": "int8", "mean": 490.0, "E%": 2.0},
        ],
    )
    _ptq(tmp_path / "dqn_CartPole-v1" / "ptq_per_channel", [fp32])
    _ptq(tmp_path / "new_Agent-v0" / "ptq_per_tensor", [fp32])
    text = table2_markdown(tmp_path, tmp_path / "t.md")
    lines = text.splitlines()
    assert lines[2].startswith(
        "| dqn_CartPole-v1 | QuaRL Table 2 | (paper) | 500 | 500 | 0.00 | 500 | 0.00 |"
    )
    assert lines[3] == (
        "| dqn_CartPole-v1 | ours (300 ep) | per-tensor | 500.0 | 500.0 | 0.00 | 490.0 | 2.00 | - | - | - | - | - | - |"
    )
    # fp16 is swept per tensor only: the per-channel row points there.
    assert "| dqn_CartPole-v1 | ours (300 ep) | per-channel | 500.0 | = per-tensor | = | - | -" in text
    assert lines[5].startswith("| new_Agent-v0 | ours")  # agents outside the study's list come after it
    assert (tmp_path / "t.md").read_text() == text


def test_an_unreadable_file_says_which(tmp_path):
    (tmp_path / "a_B-v0" / "ptq_per_tensor").mkdir(parents=True)
    (tmp_path / "a_B-v0" / "ptq_per_tensor" / "ptq.json").write_text("{")
    with pytest.raises(ValueError, match="a_B-v0/ptq_per_tensor/ptq.json: unreadable"):
        table2_markdown(tmp_path)
