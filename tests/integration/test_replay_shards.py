"""``replay.shards=2`` in process. The local placement's shards (and a resume that restores each) are
tests/slow/test_launchers.py's resume test; the Ray placement's, across hosts, tests/ray/test_ns_hosts.py's budget
run."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration


def test_two_shards_in_process(tmp_path):
    """The in-process placement serves each shard on its own port; both take their actor's inserts."""
    from actorq.launchers.inprocess import run_inprocess
    from tests.conftest import tiny_config

    # Ends on the learner's steps, not on an actor-step budget: the actors are built one after the other (the
    # first times the kernels) and start a second or so apart, while one CartPole actor alone reaches a few
    # hundred steps in well under a second, so a small actor budget could end the run before the second had written.
    config = tiny_config(max_minutes=3, **{"replay.shards": 2, "learner.max_steps": 400})
    code = run_inprocess(config, tmp_path, quiet=True, poll_s=0.2)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 0 and summary["exit"] == "max_learner_steps", summary.get("errors")
    ports = {
        json.loads((tmp_path / label / "status.json").read_text())["port"] for label in ("replay", "replay_1")
    }
    assert len(ports) == 2
    per_shard = summary["replay"]["per_shard"]
    assert all(counts["inserts"] > 0 and counts["samples"] > 0 for counts in per_shard.values()), per_shard
    assert summary["replay"]["inserts"] == sum(c["inserts"] for c in per_shard.values())
    assert summary["threads_alive_after_stop"] == []
