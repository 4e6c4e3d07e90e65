"""Render every study output found under a directory into one markdown report."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from actorq.studies import deploy, mixed_precision, ptq, qat, weights

logger = logging.getLogger(__name__)

# (file name, section title, renderer, figures drawn beside it)
SECTIONS = [
    (
        "ptq.json",
        "Post-training quantization (QuaRL Table 2, sweet spot Fig. 7)",
        ptq.table_markdown,
        ["sweet_spot.png"],
    ),
    ("qat.json", "Quantization-aware training vs PTQ (QuaRL Fig. 1)", qat.table_markdown, ["qat_vs_ptq.png"]),
    ("weight_stats.json", "Weight distributions (QuaRL Figs. 2-3)", weights.table_markdown, ["weights.png"]),
    (
        "mixed_precision.json",
        "Mixed precision training (QuaRL Table 5, Fig. 5)",
        mixed_precision.table_markdown,
        ["mixed_precision_rewards.png"],
    ),
    ("deploy.json", "Deployment benchmark (QuaRL Table 4 / ActorQ Table 6)", deploy.table_markdown, []),
]


def render(root: str | Path, out: str | Path | None = None) -> str:
    """Markdown of all results under ``root``; written to ``out`` (default ``root/README.md``).

    Images are linked relative to the report file.
    """
    root = Path(root)
    out = Path(out) if out else root / "README.md"
    parts = ["# QuaRL studies report", "", f"Generated from `{root}` by `actorq studies-report`.", ""]
    found = 0
    for fname, title, renderer, figs in SECTIONS:
        files = sorted(root.rglob(fname))
        if not files:
            continue
        parts += [f"## {title}", ""]
        for f in files:
            found += 1
            try:
                data = json.loads(f.read_text())
                parts += [f"### `{f.parent.relative_to(root)}`", "", renderer(data), ""]
                if fname == "ptq.json":
                    parts += [ptq.layers_markdown(data), ""]
            except (KeyError, ValueError, TypeError) as e:
                logger.warning("could not render %s: %s", f, e)
                parts += [f"(could not render `{f}`: {e})", ""]
                continue
            for fig in figs:
                if (f.parent / fig).exists():
                    rel = os.path.relpath(f.parent / fig, out.parent)
                    parts += [f"![{fig}]({rel})", ""]
    if not found:
        parts.append("No study outputs found.")
    text = "\n".join(parts) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text
