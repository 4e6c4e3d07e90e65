"""``--track wandb`` on a real (in-process, tiny) run: the offline W&B run holds every scalar the roles' TensorBoard
events hold, at the same steps, with the run's config and summary; no network is used."""

from __future__ import annotations

import json
import math

import pytest

from actorq.config import replace
from actorq.launchers.inprocess import run_inprocess
from tests.conftest import tiny_config
from tests.unit.launchers.test_tracking import _key, wandb_records
from tests.unit.roles.test_tensorboard import tensorboard_scalars
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


def test_a_tracked_run_sends_what_tensorboard_shows(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # any network use would fail
    config = replace(tiny_config("dqn", max_actor_steps=600, max_minutes=3), **{"tracking.backend": "wandb"})
    assert run_inprocess(config, tmp_path, quiet=True, poll_s=0.2) == 0
    records = wait_until(
        lambda: (r := wandb_records(tmp_path)).get("exit") and r, 60, "the W&B run's exit record"
    )
    sent: dict[str, list[tuple[int, float]]] = {}
    for record in records["history"]:
        items = {_key(item): json.loads(item.value_json) for item in record.history.item}
        for key, value in items.items():
            role, _, column = key.partition("/")
            if column and column != "step" and not role.startswith("_"):
                sent.setdefault(key, []).append((int(items[f"{role}/step"]), value))
    shown = {
        f"{tb.parent.name}/{tag}": points
        for tb in sorted(tmp_path.glob("*/tb"))
        for tag, points in tensorboard_scalars(tb).items()
    }
    assert {k.split("/")[0] for k in shown} >= {"learner", "actor_0", "evaluator", "replay", "quantizer"}
    assert set(sent) == set(shown)
    for key, points in shown.items():  # TensorBoard keeps float32
        assert len(sent[key]) == len(points), key
        for (s1, v1), (s2, v2) in zip(points, sent[key], strict=True):
            assert s1 == s2 and math.isclose(v1, v2, rel_tol=1e-6, abs_tol=1e-9), (key, s1, v1, v2)
    summary = {_key(i): json.loads(i.value_json) for r in records["summary"] for i in r.summary.update}
    assert summary["summary/exit"] == "max_actor_steps"
    config_sent = {_key(i): json.loads(i.value_json) for r in records["run"] for i in r.run.config.update}
    assert config_sent["algorithm"] == "dqn" and config_sent["tracking"]["backend"] == "wandb"
