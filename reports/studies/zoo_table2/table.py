"""Render the Table 2 analogue of this folder from its ptq.json / fidelity.json files (prints markdown)."""

import json
from pathlib import Path

HERE = Path(__file__).parent
AGENTS = ["ppo_CartPole-v1", "dqn_CartPole-v1", "ddpg_MountainCarContinuous-v0", "sac_Hopper-v3"]
# QuaRL (Krishnan et al., SysML 2020) Table 2: fp32, fp16, E_fp16 %, int8, E_int8 %.
PAPER = {
    "ppo_CartPole-v1": (500, 500, 0.00, 500, 0.00),
    "dqn_CartPole-v1": (500, 500, 0.00, 500, 0.00),
    "ddpg_MountainCarContinuous-v0": (92, 92, 0.00, 92, 0.00),
}
PRECISIONS = ["fp32", "fp16", "int8", "int6", "int4", "int2"]


def main() -> None:
    head = "| agent | source | scheme | " + " | ".join(
        p if p == "fp32" else f"{p} | E_{p} %" for p in PRECISIONS
    ) + " |"
    print(head)
    print("|" + "---|" * (3 + 1 + 2 * (len(PRECISIONS) - 1)))
    for agent in AGENTS:
        if agent in PAPER:
            f, h, eh, q, eq = PAPER[agent]
            cells = [f"{f}", f"{h} | {eh:.2f}", f"{q} | {eq:.2f}"] + ["- | -"] * 3
            print(f"| {agent} | QuaRL Table 2 | (paper) | " + " | ".join(cells) + " |")
        for scheme in ("per_tensor", "per_channel"):
            p = HERE / agent / f"ptq_{scheme}" / "ptq.json"
            if not p.exists():
                continue
            rows = {r["precision"]: r for r in json.loads(p.read_text())["rows"]}
            n = rows["fp32"]["episodes"]
            cells = []
            for prec in PRECISIONS:
                r = rows.get(prec)
                if prec == "fp32":
                    cells.append(f"{r['mean']:.1f}")
                elif r is None:
                    cells.append("= per-tensor | =" if prec == "fp16" else "- | -")
                else:
                    cells.append(f"{r['mean']:.1f} | {r['E%']:.2f}")
            print(f"| {agent} | ours ({n} ep) | {scheme.replace('_', '-')} | " + " | ".join(cells) + " |")
    print()
    print("| agent | ours fp32 (mean +/- std, episodes, env) | zoo final eval (mean +/- std, episodes, step, env) | difference | verdict |")
    print("|---|---|---|---|---|")
    for agent in AGENTS:
        p = HERE / agent / "ptq_per_tensor" / "fidelity.json"
        if not p.exists():
            continue
        c = json.loads(p.read_text())
        print(
            f"| {agent} | {c['ours_mean']:.1f} +/- {c['ours_std']:.1f}, {c['ours_episodes']}, {c['ours_env']} | "
            f"{c['zoo_mean']:.1f} +/- {c['zoo_std']:.1f}, {c['zoo_episodes']}, {c['zoo_timestep']}, {c['zoo_env']} | "
            f"{c['difference']:+.1f} | {c['verdict']}{' (model saved at step %d)' % c['model_timestep'] if c['trained_after_eval'] else ''} |"
        )


if __name__ == "__main__":
    main()
