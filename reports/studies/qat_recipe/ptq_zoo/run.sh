#!/usr/bin/env bash
# PTQ W and W+A of three shared RL Baselines3 Zoo agents at 8/6/5/4/3 bits, per-tensor symmetric weights, asymmetric
# activations calibrated on 1000 recorded observations (issue 37 item 2, "measure first").
# Usage: ZOO=/path/to/zoo-agents bash reports/studies/qat_recipe/ptq_zoo/run.sh   (run from the repository root)
# Ran 2026-11-27 00:58-01:00 UTC, commit 6c21ed0 (the PTQ code is unchanged on branch qat), outputs under /tmp and
# copied here without the PNGs.
set -u
export OMP_NUM_THREADS=1
ZOO=${ZOO:-/work/shared/zoo-agents}
OUT=reports/studies/qat_recipe/ptq_zoo
for a in "dqn CartPole-v1 20 10" "ddpg MountainCarContinuous-v0 20 10" "sac Hopper-v3 10 10"; do
  read -r algo env eps nenv <<<"$a"
  for mode in w wa; do
    extra=""; [ $mode = wa ] && extra="--activations"
    .venv/bin/actorq ptq --policy "$ZOO/$algo/$env" --env $env --bits fp32,8,6,5,4,3 --seeds 2 \
      --episodes $eps --n-envs $nenv $extra --out $OUT/${algo}_${env}/ptq_$mode
  done
done
