"""``actorq/report``'s docstring names every module, bottom up, and each imports only modules named before it
(function-level imports included), so the package has no import circle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import actorq.report

PACKAGE = Path(actorq.report.__file__).parent


def _order() -> list[str]:
    return re.findall(r"``(\w+)``", actorq.report.__doc__.split("Modules,", 1)[1])


def _report_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "actorq.report":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("actorq.report."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("actorq.report.")}
    return found


def test_the_docstring_names_every_module():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert set(_order()) >= modules, (
        f"not in actorq/report/__init__.py's list: {sorted(modules - set(_order()))}"
    )


def test_each_module_imports_only_modules_listed_before_it():
    order = [m for m in _order() if (PACKAGE / f"{m}.py").is_file()]
    for i, module in enumerate(order):
        later = _report_imports(PACKAGE / f"{module}.py") & set(order[i:])
        assert not later, f"actorq.report.{module} imports {sorted(later)}, listed at or after it"
