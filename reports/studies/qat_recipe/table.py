"""Markdown table of a qat-study output dir: per-seed means and qat_report's E% CIs (fp32 vs QAT, PTQ W+A)."""

import sys
from pathlib import Path

import numpy as np

from actorq.studies import qat_report

out = Path(sys.argv[1])
recs = qat_report.load(out)
print(
    "| pair | bits | fp32 per seed | PTQ W+A per seed | QAT per seed (deployed int) | QAT mean [95% CI] | QAT E% [95% CI] | PTQ W+A E% [95% CI] |"
)
print("|---|---|---|---|---|---|---|---|")


def f(vals: list) -> str:
    return ", ".join(f"{np.mean(v):.1f}" for v in vals)


for pair, r in sorted(recs.items()):
    fp = r.get("fp32", {})
    bits = sorted({int(k[3:]) for k in r if k.startswith("qat")}, reverse=True)
    s = qat_report.summarize(r, bits)
    for row in s["rows"]:
        b = row["bits"]
        q = r.get(f"qat{b}", {})
        qat, wa = row["qat"], row["ptq_wa"]
        print(
            f"| {pair} | {b} | {f([fp[k]['fp32'] for k in sorted(fp)])} | {f([fp[k]['ptq_wa'][str(b)] for k in sorted(fp)])} | "
            f"{f([q[k]['qat_deployed'] for k in sorted(q)])} (n={len(q)}) | {qat['mean']:.1f} [{qat['ci'][0]:.1f}, {qat['ci'][1]:.1f}] | "
            f"{qat['E%']:.1f} [{qat['E%_ci'][0]:.1f}, {qat['E%_ci'][1]:.1f}] | {wa['E%']:.1f} [{wa['E%_ci'][0]:.1f}, {wa['E%_ci'][1]:.1f}] |"
        )
