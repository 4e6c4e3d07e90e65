"""``actorq bench replay``: its pure parts, and a tiny real run whose counts must be the server's."""

from __future__ import annotations

import json

import pytest

from actorq.bench.replay import bench_config, block_kinds
from actorq.bench.replay_summary import format_table, notes, projection, summarize
from actorq.cli import main
from actorq.config import replace, save_config
from tests.conftest import tiny_config


def test_block_kinds_cover_each_writer_count_and_the_sampler_alone():
    assert block_kinds([1, 2], "both") == [(1, False), (1, True), (2, False), (2, True), (0, True)]
    assert block_kinds([4], "off") == [(4, False)]
    assert block_kinds([4], "on") == [(4, True), (0, True)]


def test_bench_config_disables_only_the_rate_limiter():
    config = tiny_config("dqn", **{"replay.samples_per_insert": 8.0, "learner.checkpoint_period_s": 60.0})
    cfg = bench_config(config)
    assert cfg.replay.samples_per_insert == 0 and cfg.learner.checkpoint_period_s == 0
    assert (cfg.replay.max_size, cfg.replay.prioritized, cfg.replay.n_step) == (
        config.replay.max_size,
        config.replay.prioritized,
        config.replay.n_step,
    )


def _block(writers: int, sampler: bool, inserts: int, samples: int, cpu: float) -> dict:
    return {
        "writers": writers, "sampler": sampler, "inserts_server": inserts, "samples_server": samples,
        "env_steps": int(inserts / 1.01), "inserts_per_s": inserts / 10.0, "samples_per_s": samples / 10.0,
        "server_cpu_s": cpu, "server_cores": cpu / 10.0,
        "server_cpu_s_per_1000_inserts": 1e3 * cpu / inserts if inserts and not sampler else None,
        "server_cpu_s_per_1000_samples": 1e3 * cpu / samples if samples and not writers else None,
        "writer_cpu_s_per_1000_inserts": 0.05 if writers else None, "machine_busy": 1.0, "load_before": 2.0,
    }  # fmt: skip


def test_projection_adds_the_per_item_costs_of_inserting_and_sampling():
    # 0.04 s per 1000 inserts, 0.01 s per 1000 sampled items: one core takes 25000 inserts/s alone, and
    # 1000 / (0.04 + 8 * 0.01) = 8333 when the learner samples 8 items per insert.
    records = [
        _block(2, False, 100_000, 0, 4.0),
        _block(0, True, 0, 200_000, 2.0),
        _block(2, True, 50_000, 100_000, 3.0),
    ]
    proj = projection(records, {"config_samples_per_insert": 8.0}, actor_rate=1000.0)
    assert proj["insert_cost"] == pytest.approx(0.04) and proj["sample_cost"] == pytest.approx(0.01)
    assert proj["core_inserts_per_s"] == pytest.approx(25_000)
    assert proj["core_inserts_per_s_at_spi"] == pytest.approx(1e3 / 0.12)
    assert proj["mixed_measured_over_predicted"] == pytest.approx(1.0)  # 50k*0.04e-3 + 100k*0.01e-3 = 3.0
    per_actor = 1000.0 * proj["items_per_env_step"]
    assert proj["actors_per_core"] == pytest.approx(25_000 / per_actor)
    rows = summarize(records)
    text = "\n".join(notes(rows, proj, cores=2))
    assert "25000 inserts/s with no sampling" in text and "8333 inserts/s" in text
    assert len(format_table(rows).splitlines()) == 2 + len(rows) + 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--writers", "0"], "--writers"),
        (["--writers", "two"], "--writers"),
        (["--seconds", "0"], "--seconds"),
        (["--actor-rate", "-5"], "--actor-rate"),
    ],
)
def test_bad_arguments_are_refused_with_what_to_fix(tmp_path, capsys, args, message):
    path = tmp_path / "c.yaml"
    save_config(tiny_config("dqn"), path)
    assert main(["bench", "replay", str(path), *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.reverb
def test_tiny_run_counts_are_the_servers(tmp_path, capsys):
    """One writer process with and without the learner's sampler, and the sampler alone, for 1 s each: the server
    inserted exactly what the writer says it wrote and confirmed, and sampled what the learner took (give or take
    the dataset's prefetch and in-flight samples)."""
    config = replace(tiny_config("dqn"), **{"replay.n_step": 3, "replay.samples_per_insert": 4.0})
    path = tmp_path / "c.yaml"
    save_config(config, path)
    out = tmp_path / "replay.json"
    args = ["bench", "replay", str(path), "--writers", "1", "--seconds", "1", "--repeats", "1"]
    assert main([*args, "--episode-steps", "50", "--actor-rate", "100", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "replay" and {"meta", "records", "summary", "notes"} <= set(doc)
    meta = doc["meta"]
    assert meta["machine"]["cpu"] and meta["machine"]["cpus"] >= 1 and "flags" in meta["machine"]
    table = meta["table"]
    assert table["rate_limiter"].startswith("MinSize") and table["config_samples_per_insert"] == 4.0
    assert table["sampler"] == "prioritized" and table["n_step"] == 3 and table["observation_shape"] == [4]
    assert table["transition_bytes"] == 2 * 4 * 4 + 4 + 4 + 4  # CartPole: 4 float32 obs, int32 action
    # Samples the server counts that the learner has not taken yet: the prefetch buffer, and per parallel call
    # Acme's 2 batches in flight (max_in_flight_samples_per_worker = 2 x batch) plus what tf.data's parallel
    # interleave buffers of each call's output (up to 2 batches seen) and the batch being assembled. Under load the
    # old bound of 3 batches per call was exceeded by one or two batches (176, 192 > 160).
    in_flight = (
        config.learner.prefetch_size + 5 * config.learner.sample_parallelism
    ) * config.learner.batch_size
    records = doc["records"]
    assert sorted((r["writers"], r["sampler"]) for r in records) == [(0, True), (1, False), (1, True)]
    for r in records:
        assert r["window_s"] >= 1.0 and r["server_cpu_s"] > 0 and r["server_cores"] < meta["machine"]["cpus"]
        assert 0 < r["machine_busy"] <= 1
        if r["writers"]:
            writer = r["per_writer"][0]
            assert r["inserts_server"] == r["inserts_writers"] == writer["items"] > 0
            # From the scheduled start: a writer that started late (late_start_s) wrote for less than 1 s itself.
            assert writer["seconds"] + writer["late_start_s"] >= 1.0 and writer["cpu_s"] > 0
            assert r["inserts_per_s"] == pytest.approx(r["inserts_server"] / writer["seconds"])
            # n-step 3: every env step writes one transition, every episode end (each 50 steps) two more.
            ends = writer["env_steps"] // 50 + 1
            assert writer["env_steps"] <= writer["items"] <= writer["env_steps"] + 2 * ends
        else:
            assert r["inserts_server"] == 0
        if r["sampler"]:
            taken = r["sampler_result"]["items"]
            assert taken > 0 and taken == r["batches"] * config.learner.batch_size
            assert abs(r["samples_server"] - taken) <= in_flight
            assert r["samples_per_s"] == pytest.approx(taken / r["sampler_result"]["seconds"])
        else:
            assert r["samples_server"] <= in_flight and r["samples_per_s"] == 0
    proj = meta["projection"]
    assert proj["insert_cost"] > 0 and proj["sample_cost"] > 0 and proj["actors_per_core"] > 0
    printed = capsys.readouterr().out
    assert "inserts/s" in printed and "CPU:" in printed and "per server core" in printed


@pytest.mark.reverb
def test_tiny_shard_run_reads_every_shard_at_the_configs_ratio(tmp_path, capsys):
    """``--shards 1,2`` for 1 s each: two server processes behind the config's limiter; in the 2-shard block both
    take inserts (writer w -> shard w % 2) and the sampler reads both; every confirmed write is a server insert."""
    config = replace(tiny_config("dqn"), **{"replay.samples_per_insert": 4.0})
    path = tmp_path / "c.yaml"
    save_config(config, path)
    out = tmp_path / "shards.json"
    args = ["bench", "replay", str(path), "--shards", "1,2", "--writers", "2", "--seconds", "1"]
    assert main([*args, "--repeats", "1", "--episode-steps", "50", "--json", str(out)]) == 0
    assert "CPU s/1000 inserts" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["kind"] == "replay_shards" and doc["meta"]["table"]["samples_per_insert"] == 4.0
    records = {r["shards"]: r for r in doc["records"]}
    assert sorted(records) == [1, 2] and [row["shards"] for row in doc["summary"]] == [1, 2]
    for shards, r in records.items():
        assert len(r["per_shard"]) == shards
        assert r["inserts_server"] == r["inserts_writers"] > 0  # writers flushed: all confirmed, none lost
        assert r["samples_sampler"] > 0 and r["server_cpu_s"] > 0
        assert all(s["inserts"] > 0 and s["samples"] > 0 and s["cpu_s"] > 0 for s in r["per_shard"])
        assert r["server_cpu_s_per_1000_inserts"] == pytest.approx(
            1e3 * r["server_cpu_s"] / r["inserts_server"]
        )
