"""The ActorQ paper's published numbers, to print beside ours where the task matches.

Source: Lam et al., "ActorQ: Quantization for Actor-Learner Distributed Reinforcement Learning" (QuaRL),
Table 2 ("ActorQ time and speedups to 95% reward"), Table 3 (steps trained, model pull period) and Section 3
(setup, communication-vs-computation ablation); carbon ratios from the Google AI blog post "Quantization for
Fast and Environmentally Sustainable Reinforcement Learning" (2022). Numbers are copied verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PaperRow:
    """One row of the paper's Table 2 (times in seconds)."""

    task: str
    reward: float
    fp32_s: float
    fp16_s: float
    int8_s: float
    fp16_speedup: float
    int8_speedup: float
    steps_trained: int
    pull_period: int
    note: str = ""

    def time_s(self, precision: str) -> float | None:
        return {"fp32": self.fp32_s, "fp16": self.fp16_s, "int8": self.int8_s}.get(precision)

    def speedup(self, precision: str) -> float | None:
        return {"fp32": 1.0, "fp16": self.fp16_speedup, "int8": self.int8_speedup}.get(precision)


# Keys are this project's task names, "<suite>:<task>" as summary.json spells them.
TABLE2: dict[str, PaperRow] = {
    "dmc:cartpole:balance": PaperRow(
        "Cartpole Balance", 941.22, 870.91, 284.65, 279.00, 3.06, 3.12, 40000, 1000
    ),
    "dmc:walker:stand": PaperRow("Walker Stand", 947.74, 871.32, 625.00, 534.37, 1.39, 1.63, 40000, 1000),
    "dmc:hopper:stand": PaperRow("Hopper Stand", 836.41, 2660.41, 2406.14, 1699.17, 1.11, 1.57, 100000, 1000),
    "dmc:reacher:hard": PaperRow("Reacher Hard", 948.12, 1597.00, 1122.24, 875.34, 1.42, 1.82, 70000, 1000),
    "dmc:cheetah:run": PaperRow("Cheetah Run", 732.31, 2517.30, 3012.00, 891.84, 0.84, 2.82, 200000, 1000),
    "dmc:finger:spin": PaperRow("Finger Spin", 810.32, 3256.56, 1527.76, 1065.52, 2.13, 3.06, 200000, 1000),
    "dmc:humanoid:stand": PaperRow(
        "Humanoid Stand", 884.89, 13964.92, 14371.84, 9302.82, 0.97, 1.51, 500000, 100
    ),
    "dmc:humanoid:walk": PaperRow(
        "Humanoid Walk", 649.91, 17990.66, 19106.88, 6223.35, 0.94, 2.89, 700000, 100
    ),
    "gym:CartPole-v1": PaperRow(
        "Cartpole (Gym)",
        198.22,
        963.67,
        535.09,
        260.10,
        1.80,
        3.70,
        60000,
        1000,
        note="the paper's reward (198.22) implies CartPole-v0 (returns capped at 200); we run CartPole-v1 (500)",
    ),
    "gym:MountainCar-v0": PaperRow(
        "Mountain Car (Gym)", -120.62, 2861.80, 2159.26, 1284.32, 1.32, 2.22, 200000, 1000
    ),
    "gym:Acrobot-v1": PaperRow("Acrobot (Gym)", -107.45, 912.24, 1148.90, 168.44, 0.79, 5.41, 100000, 1000),
}

PAPER_SETUP = (
    "one machine: learner on a V100 GPU, 4 actors each on its own Intel Xeon 2.2 GHz core, policy 3x2048, "
    "critic hidden 512, samples per insert 16, >= 3 runs averaged with a running mean (window 10)"
)
"""The paper's hardware and protocol (Section 3)."""

PAPER_COMM_ABLATION = (
    "quantizing communication gave up to 30% speedup at pull period 30 (communication-heavy) and little at "
    "period 1000 (computation-heavy), with 4 actors on one node"
)
"""Section 3, 'Communication vs computation' (Fig. 4a/4b)."""

BLOG_CARBON_RATIO = (1.9, 3.76)
"""fp32/int8 carbon emission ratio range over tasks (blog: 'from 1.9x to 3.76x')."""

PAPER_SPEEDUP_RANGE = (1.5, 5.41)
"""End-to-end speedup range claimed (paper abstract 1.5-2.5x; blog/TMLR 1.5-5.41x)."""
