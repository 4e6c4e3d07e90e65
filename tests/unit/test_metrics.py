"""Metric records: NaN and inf never reach a JSON file (strict JSON has neither)."""

from __future__ import annotations

import json
import math

from actorq.metrics import json_safe


def test_json_safe_replaces_every_non_finite_float_and_keeps_the_rest():
    record = {
        "a": float("nan"),
        "b": [1.0, float("inf"), {"c": -math.inf, "d": "x"}],
        "e": (2, 3.5),
        "f": None,
    }
    safe = json_safe(record)
    assert safe == {"a": None, "b": [1.0, None, {"c": None, "d": "x"}], "e": [2, 3.5], "f": None}
    json.loads(json.dumps(safe, allow_nan=False))  # strict JSON accepts it


def test_new_columns_extend_the_header_and_keep_every_value(tmp_path):
    from actorq.metrics import MetricsWriter, read_metrics

    writer = MetricsWriter(tmp_path)
    writer.write({"step": 1, "loss": 0.5})
    writer.write({"step": 2, "loss": 0.4, "quantized_return": 7.0})  # a column the first row did not have
    writer.write({"step": 3})
    writer.close()
    rows = read_metrics(tmp_path / "metrics.csv")
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["quantized_return"] for r in rows] == [None, 7.0, None]
    assert [r["loss"] for r in rows] == [0.5, 0.4, None]
    # Resuming into the same file: its header stands, and a newer column still extends it.
    again = MetricsWriter(tmp_path)
    again.write({"step": 4, "loss": 0.3, "agreement": 0.99})
    again.close()
    rows = read_metrics(tmp_path / "metrics.csv")
    assert list(rows[0]) == ["step", "loss", "time", "quantized_return", "agreement"]
    assert [r["agreement"] for r in rows] == [None, None, None, 0.99]
