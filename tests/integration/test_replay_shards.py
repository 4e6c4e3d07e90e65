"""``actorq train ... replay.shards=2`` through the local placement: two replay processes, each actor writing to its
own, the learner sampling both, a summary whose replay counts are the shards' own, summed, and a resume that
restores every shard."""

from __future__ import annotations

import json

import pytest

from tests.training import train_summary

pytestmark = pytest.mark.integration


def test_two_shards_train_and_the_summary_adds_up_their_counts(tmp_path):
    run_dir = tmp_path / "run"
    overrides = [
        "replay.shards=2",
        "network.policy_layers=[64,64]",
        "replay.min_size=200",
        "learner.max_steps=150",  # ends the run (exit max_learner_steps)
        "evaluator.period_s=5",
        "evaluator.episodes=1",
        "target_return=null",  # an untrained CartPole policy can score 500 in one greedy episode
    ]
    args = ["configs/dqn/gym_cartpole.yaml", *overrides, "--launcher", "local", "--actors", "2"]
    summary = train_summary(args + ["--max-minutes", "3"], run_dir, timeout=300)
    assert summary["exit"] == "max_learner_steps", summary.get("failure")
    replay = summary["replay"]
    per_shard = replay["per_shard"]
    assert replay["shards"] == 2 and sorted(per_shard) == ["replay", "replay_1"]
    for label, counts in per_shard.items():
        record = json.loads((run_dir / label / "status.json").read_text())  # each shard's own final record
        assert (counts["inserts"], counts["samples"]) == (record["inserts"], record["samples"]), label
        assert counts["inserts"] > 0 and counts["samples"] > 0, (
            label
        )  # actor i -> shard i; the learner reads both
        # One n-step transition per env step of the shard's own actor (a few in flight when it stopped).
        assert 0.5 * counts["actor_steps"] <= counts["inserts"] <= counts["actor_steps"] + 10, (label, counts)
        assert (run_dir / "checkpoints" / label).is_dir()
    for key in ("inserts", "samples", "size", "actor_steps"):
        assert replay[key] == sum(counts[key] for counts in per_shard.values()), key
    assert replay["actor_steps"] == summary["actor_steps"]
    assert summary["learner_steps"] >= 150
    assert replay["samples"] >= 150 * 64  # every learner batch came from one shard or the other
    # --resume: each shard restores its own checkpoint (without it a shard would hold only the new inserts)
    resumed = train_summary(["--resume", str(run_dir), "--max-minutes", "0.4"], run_dir, timeout=300)
    for label, counts in resumed["replay"]["per_shard"].items():
        assert counts["size"] >= per_shard[label]["size"], (label, counts, per_shard[label])


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
