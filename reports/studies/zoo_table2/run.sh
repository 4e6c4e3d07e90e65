#!/usr/bin/env bash
# QuaRL Table 2 analogue on the four shared RL Baselines3 Zoo agents (../shared/zoo-agents, MIT licence).
# Usage: bash reports/studies/zoo_table2/run.sh {per-tensor|per-channel|weights|deploy}
# Two chains (per-tensor, per-channel) were run side by side; each runs the agents one after another, 1 thread.
set -euo pipefail
MODE=$1
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
ZOO=../shared/zoo-agents
OUT=reports/studies/zoo_table2
# algo env episodes-per-seed env-copies-stepped-together (batched inference: same episodes, less overhead)
AGENTS=("ppo CartPole-v1 100 20" "dqn CartPole-v1 100 20" "ddpg MountainCarContinuous-v0 100 20" "sac Hopper-v3 30 10")
for a in "${AGENTS[@]}"; do
  read -r algo env eps nenv <<<"$a"
  case "$MODE" in
    per-tensor)
      .venv/bin/actorq ptq --policy $ZOO/$algo/$env --env $env --bits fp32,fp16,8,6,4,2 --seeds 3 --episodes $eps \
        --n-envs $nenv --out $OUT/${algo}_${env}/ptq_per_tensor ;;
    per-channel)
      .venv/bin/actorq ptq --policy $ZOO/$algo/$env --env $env --bits fp32,8,6,4,2 --seeds 3 --episodes $eps \
        --n-envs $nenv --per-channel-linear --out $OUT/${algo}_${env}/ptq_per_channel ;;
    weights)
      for b in 8 4; do
        .venv/bin/actorq weights --policy $ZOO/$algo/$env --env $env --bits $b --out $OUT/${algo}_${env}/weights_int$b
      done ;;
    deploy)
      .venv/bin/actorq bench deploy --policy $ZOO/$algo/$env --env $env --backends onnx,torchscript --iters 2000 \
        --out $OUT/${algo}_${env}/deploy ;;
  esac
done
