"""Every test under tests/integration/ carries the ``integration`` or ``slow`` marker, so `make test-fast` (which
deselects both) never runs one; a test without either fails collection here, naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def unmarked(items: list[pytest.Item]) -> list[str]:
    """Node ids of the items under this directory that have neither marker."""
    return [
        item.nodeid
        for item in items
        if HERE in Path(str(item.fspath)).resolve().parents
        and not any(item.get_closest_marker(m) for m in ("integration", "slow"))
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = unmarked(items)
    if missing:
        raise pytest.UsageError(
            "tests/integration/ tests need @pytest.mark.integration (or slow): " + ", ".join(missing)
        )
