"""Every role in one process with tiny networks: learning steps, an int8 broadcast applied, transitions in replay,
evaluations reported, everything shut down."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from actorq.envs import UnknownTaskError
from actorq.launchers.inprocess import run_inprocess
from actorq.weights_key import load_key_file
from tests.conftest import tiny_config
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("algorithm,envs", [("dqn", 1), ("d4pg", 3)])
def test_all_roles_in_process(tmp_path, algorithm, envs):
    config = tiny_config(algorithm, max_actor_steps=600, max_minutes=3, **{"actor.envs_per_actor": envs})
    before = {t.name for t in threading.enumerate()}
    code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0, summary.get("errors")
    assert summary["exit"] == "max_actor_steps"
    assert summary["learner_steps"] > 0
    assert summary["actor_steps"] >= 600
    assert summary["min_broadcasts_received"] >= 1  # every int8 actor applied at least one quantizer message
    assert summary["rejected_messages"] == 0
    assert summary["message_bytes"] > 0 and summary["precision"] == "int8" and summary["comm_bits"] == 8
    assert summary["evaluations"] >= 1 and summary["best_eval_return"] is not None
    assert set(summary["breakdown"]) == {"inference", "env", "pull", "decode", "apply", "adder"}
    assert summary["breakdown"]["inference"] > 0 and summary["breakdown"]["adder"] > 0
    # Roles share the process here, so actors must not report its CPU time as their own.
    assert "cpu_s" not in (tmp_path / "actor_0" / "metrics.csv").read_text().splitlines()[0].split(",")
    replay_rows = (tmp_path / "replay" / "metrics.csv").read_text().splitlines()
    assert len(replay_rows) >= 2  # transitions arrived in replay (inserts column)
    assert summary["threads_alive_after_stop"] == []
    # Signed by default: the launcher made the run's key, 0600, and the summary names the run, not the key.
    key_file = tmp_path / "secrets" / "weights.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert summary["weights_signing"] == {
        "scheme": "hmac-sha256",
        "run_id": load_key_file(key_file).run_id_hex,
    }
    assert key_file.read_text().strip() not in (tmp_path / "summary.json").read_text()
    leftover = {t.name for t in threading.enumerate()} - before
    assert not {n for n in leftover if n in ("learner", "quantizer", "evaluator") or n.startswith("actor_")}


def test_the_in_process_run_checks_its_task_as_actorq_train_does(tmp_path):
    """run_inprocess goes through train.launch: an unknown task is refused before any role starts."""
    config = tiny_config("d4pg", **{"env.task": "cartpole:nope"})
    with pytest.raises(UnknownTaskError, match="cartpole:nope"):
        run_inprocess(config, tmp_path, quiet=True)
    assert not (tmp_path / "replay").exists() and not (tmp_path / "secrets").exists()


def test_the_learners_step_budget_ends_the_run_as_finished(tmp_path):
    """learner.max_steps: the learner stops itself after that many steps and the run ends on it, exit status 0
    (it used to end as a failed role: a learner that exits is fatal)."""
    config = tiny_config("dqn", max_actor_steps=10**7, max_minutes=3, **{"learner.max_steps": 40})
    code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["exit"] == "max_learner_steps", summary.get("failure") or summary.get("errors")
    assert code == 0 and "failure" not in summary and summary["errors"] == []
    assert summary["learner_steps"] == 40
    assert summary["role_end_order"][0] == "learner" and summary["threads_alive_after_stop"] == []


def test_insecure_weights_run_unsigned_and_every_actor_says_so(tmp_path, caplog):
    config = tiny_config("dqn", max_actor_steps=300, max_minutes=3)
    with caplog.at_level("WARNING"):
        code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2, insecure_weights=True)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0, summary.get("errors")
    assert summary["min_broadcasts_received"] >= 1 and summary["rejected_messages"] == 0
    assert summary["weights_signing"]["scheme"].startswith("none")
    assert not (tmp_path / "secrets").exists()
    for i in range(config.actor.num_actors):
        assert f"actor {i} ACCEPTS UNSIGNED WEIGHTS" in caplog.text


def test_sigterm_stops_the_learner_first_and_writes_the_summary(tmp_path):
    """SIGTERM to the process: the run ends as interrupted (130), the learner's thread ends before any other role's,
    no role thread is left, and CPU time is recorded like the other launchers do."""
    config = tiny_config("dqn", max_actor_steps=10**7, max_minutes=3)
    learner_rows = tmp_path / "learner" / "metrics.csv"
    sent = threading.Event()

    def learner_stepped() -> bool:
        return learner_rows.exists() and len(learner_rows.read_text().splitlines()) >= 2

    def send_sigterm_once_the_learner_steps():
        try:
            wait_until(learner_stepped, 150, "the learner's first metrics row", poll_s=0.2)
        except AssertionError:
            return  # `sent` stays unset: the test reports it below
        sent.set()
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=send_sigterm_once_the_learner_steps, daemon=True)
    killer.start()
    code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2)
    killer.join(timeout=5)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert sent.is_set(), "the learner wrote no metrics row in 150 s"
    assert code == 130 and summary["exit"] == "interrupted", summary.get("errors")
    order = summary["role_end_order"]
    assert order[0] == "learner" and set(order) == {"learner", "quantizer", "actor_0", "actor_1", "evaluator"}
    assert summary["threads_alive_after_stop"] == []
    assert summary["energy"]["launcher_cpu_seconds"] > 0
