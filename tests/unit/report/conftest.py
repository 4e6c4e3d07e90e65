"""Report tests render whole reports: simulate each comparison's coverage with few draws (the figures are checked
in test_censored.py, the report only prints them)."""

import pytest

from actorq.report import coverage


@pytest.fixture(autouse=True)
def _few_coverage_sims(monkeypatch):
    monkeypatch.setattr(coverage, "EFFECT_SIMS", 10)
