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
