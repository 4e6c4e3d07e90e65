"""The QuaRL Table 2 analogue over pretrained agents (``actorq studies-report DIR --zoo-table2``).

``DIR`` holds one folder per agent (``<algo>_<env>``), each with ``ptq_per_tensor/ptq.json`` and optionally
``ptq_per_channel/ptq.json`` (``actorq ptq --out``) and ``ptq_per_tensor/fidelity.json`` (our fp32 evaluation
against the agent's own). Two tables: rewards and E% per precision and scheme beside the paper's rows, and the
fidelity check. Agents are taken in :data:`AGENTS` order, then any others alphabetically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

AGENTS = ("ppo_CartPole-v1", "dqn_CartPole-v1", "ddpg_MountainCarContinuous-v0", "sac_Hopper-v3")
"""The order of the committed study's agents."""
PAPER = {
    "ppo_CartPole-v1": (500, 500, 0.00, 500, 0.00),
    "dqn_CartPole-v1": (500, 500, 0.00, 500, 0.00),
    "ddpg_MountainCarContinuous-v0": (92, 92, 0.00, 92, 0.00),
}
"""QuaRL (Krishnan et al., SysML 2020) Table 2: fp32, fp16, E_fp16 %, int8, E_int8 %."""
PRECISIONS = ("fp32", "fp16", "int8", "int6", "int4", "int2")
SCHEMES = ("per_tensor", "per_channel")


def _agents(root: Path) -> list[str]:
    found = sorted(p.name for p in root.iterdir() if (p / "ptq_per_tensor" / "ptq.json").is_file())
    return [a for a in AGENTS if a in found] + [a for a in found if a not in AGENTS]


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable ({exc}); rerun the study that writes it") from None


def table2_markdown(root: str | Path, out: str | Path | None = None) -> str:
    """Both tables as markdown (also written to ``out`` when given).

    Raises:
        ValueError: a ``ptq.json`` or ``fidelity.json`` that cannot be read.
    """
    root = Path(root)
    agents = _agents(root)
    head = "| agent | source | scheme | " + " | ".join(
        p if p == "fp32" else f"{p} | E_{p} %" for p in PRECISIONS
    )
    lines = [head + " |", "|" + "---|" * (3 + 1 + 2 * (len(PRECISIONS) - 1))]
    for agent in agents:
        if agent in PAPER:
            f, h, eh, q, eq = PAPER[agent]
            cells = [f"{f}", f"{h} | {eh:.2f}", f"{q} | {eq:.2f}"] + ["- | -"] * 3
            lines.append(f"| {agent} | QuaRL Table 2 | (paper) | " + " | ".join(cells) + " |")
        for scheme in SCHEMES:
            path = root / agent / f"ptq_{scheme}" / "ptq.json"
            if not path.exists():
                continue
            rows = {r["precision"]: r for r in _json(path)["rows"]}
            cells = []
            for precision in PRECISIONS:
                r = rows.get(precision)
                if precision == "fp32":
                    cells.append(f"{r['mean']:.1f}")
                elif r is None:
                    cells.append("= per-tensor | =" if precision == "fp16" else "- | -")
                else:
                    cells.append(f"{r['mean']:.1f} | {r['E%']:.2f}")
            n = rows["fp32"]["episodes"]
            lines.append(
                f"| {agent} | ours ({n} ep) | {scheme.replace('_', '-')} | " + " | ".join(cells) + " |"
            )
    lines += [
        "",
        "| agent | ours fp32 (mean +/- std, episodes, env) | zoo final eval (mean +/- std, episodes, step, env) "
        "| difference | verdict |",
        "|---|---|---|---|---|",
    ]
    for agent in agents:
        path = root / agent / "ptq_per_tensor" / "fidelity.json"
        if not path.exists():
            continue
        c = _json(path)
        saved = f" (model saved at step {c['model_timestep']})" if c["trained_after_eval"] else ""
        lines.append(
            f"| {agent} | {c['ours_mean']:.1f} +/- {c['ours_std']:.1f}, {c['ours_episodes']}, {c['ours_env']} | "
            f"{c['zoo_mean']:.1f} +/- {c['zoo_std']:.1f}, {c['zoo_episodes']}, {c['zoo_timestep']}, "
            f"{c['zoo_env']} | {c['difference']:+.1f} | {c['verdict']}{saved} |"
        )
    text = "\n".join(lines) + "\n"
    if out:
        Path(out).write_text(text)
    return text
