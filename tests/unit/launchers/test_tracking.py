"""``--track wandb|mlflow``: the launcher sends each role's metrics rows, the same scalars TensorBoard gets, with
the config and the summary, to a tracker that needs no network (W&B offline files, an MLflow file store in the run
directory); a failing tracker never stops the run."""

from __future__ import annotations

import glob
import json

import pytest

from actorq.config import replace
from actorq.errors import UsageError
from actorq.launchers import tracking
from actorq.launchers.tracking import Tracker, check_tracker
from actorq.metrics import MetricsWriter
from actorq.roles.tensorboard import writer
from tests.conftest import tiny_config
from tests.unit.roles.test_tensorboard import tensorboard_scalars
from tests.waiting import wait_until

ROLES = ("learner", "actor_0")
SUMMARY = {"exit": "target", "wall_seconds": 12.5, "learner": {"steps": 30}}


def open_writers(run_dir) -> dict[str, MetricsWriter]:
    """One metrics writer per role for the whole test, as a role has: TensorFlow names an event file by the second
    and a per-process counter, so two writers opened for one directory in one second may sort out of creation order
    (counter 10 before 8), and TensorBoard then skips the earlier file's points."""
    return {role: MetricsWriter(run_dir / role, tensorboard=writer) for role in ROLES}


def close_writers(writers: dict[str, MetricsWriter]) -> None:
    for metrics in writers.values():
        metrics.close()


def write_rows(writers: dict[str, MetricsWriter], first: int, last: int, extra: bool = False) -> None:
    for metrics in writers.values():
        for i in range(first, last):
            row = {"step": 10 * i, "steps_per_s": 1.0 + i, "label": "x"}
            if extra:
                row["loss"] = 0.5 / (i + 1)  # a column the first rows did not have
            metrics.write(row)


def tracked_run(tmp_path, backend: str) -> Tracker:
    config = replace(tiny_config(), **{"tracking.backend": backend})
    tracker = Tracker(config, tmp_path, ROLES)
    writers = open_writers(tmp_path)
    write_rows(writers, 0, 3)
    assert tracker.poll() == 6
    write_rows(writers, 3, 5, extra=True)
    assert tracker.poll() == 4 and tracker.poll() == 0  # only new rows are sent
    close_writers(writers)
    assert all(len(list((tmp_path / role / "tb").iterdir())) == 1 for role in ROLES)  # one event file each
    tracker.finish(SUMMARY)
    assert tracker.active
    return tracker


def tensorboard_points(tmp_path) -> dict[str, list[tuple[int, float]]]:
    return {
        f"{role}/{tag}": points
        for role in ROLES
        for tag, points in tensorboard_scalars(tmp_path / role / "tb").items()
    }


def _key(item) -> str:
    """A W&B record item's key (``learner/step`` may come as the nested key ``["learner", "step"]``)."""
    return item.key or "/".join(item.nested_key)


def wandb_records(run_dir) -> dict[str, list]:
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal import datastore

    paths = glob.glob(str(run_dir / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(paths) == 1, paths
    path = paths[0]
    store = datastore.DataStore()
    store.open_for_scan(path)
    records: dict[str, list] = {}
    while (data := store.scan_data()) is not None:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        records.setdefault(record.WhichOneof("record_type"), []).append(record)
    return records


def test_wandb_offline_files_hold_the_tensorboard_scalars_config_and_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # any network use would fail
    tracked_run(tmp_path, "wandb")
    # W&B's service may still be writing the file when finish() returns: wait for its exit record.
    records = wait_until(
        lambda: (r := wandb_records(tmp_path)).get("exit") and r, 30, "the W&B offline run's exit record"
    )
    points: dict[str, list[tuple[int, float]]] = {}
    for record in records["history"]:
        items = {_key(item): json.loads(item.value_json) for item in record.history.item}
        for key, value in items.items():
            role, _, column = key.partition("/")
            if role in ROLES and column != "step":
                points.setdefault(key, []).append((items[f"{role}/step"], value))
    tb = tensorboard_points(tmp_path)
    assert set(points) == set(tb) == {f"{r}/{c}" for r in ROLES for c in ("steps_per_s", "loss")}
    for key, want in tb.items():
        assert [(s, pytest.approx(v, rel=1e-6)) for s, v in want] == points[key]
    config = {_key(item): item.value_json for r in records["run"] for item in r.run.config.update}
    assert json.loads(config["algorithm"]) == "dqn"
    summary = {
        _key(item): json.loads(item.value_json) for r in records["summary"] for item in r.summary.update
    }
    assert summary["summary/exit"] == "target" and summary["summary/learner.steps"] == 30


def test_mlflow_file_store_holds_the_tensorboard_scalars(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    tracked_run(tmp_path, "mlflow")
    import mlflow

    client = mlflow.tracking.MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("actorq").experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["algorithm"] == "dqn"
    for key, want in tensorboard_points(tmp_path).items():
        got = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, key)]
        assert sorted(got) == [(s, pytest.approx(v, rel=1e-6)) for s, v in want]


def test_a_missing_tracker_package_is_a_usage_error(monkeypatch):
    monkeypatch.setitem(tracking.PACKAGES, "wandb", "no_such_tracker_package")
    with pytest.raises(UsageError, match=r"pip install .*\[track\]"):
        check_tracker(replace(tiny_config(), **{"tracking.backend": "wandb"}))


def test_a_failing_tracker_is_dropped_and_the_run_goes_on(tmp_path, monkeypatch):
    config = replace(tiny_config(), **{"tracking.backend": "mlflow"})
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").resolve().as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    tracker = Tracker(config, tmp_path, ROLES)

    def broken(*_args):
        raise OSError("No space left on device")

    monkeypatch.setattr(tracker._backend, "log_role", broken)
    writers = open_writers(tmp_path)
    write_rows(writers, 0, 2)
    close_writers(writers)
    assert tracker.poll() == 0 and not tracker.active
    tracker.finish(SUMMARY)  # no error
