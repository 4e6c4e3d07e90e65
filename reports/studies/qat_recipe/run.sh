#!/usr/bin/env bash
# QAT recipe study: one worker per pair ($1 = ppo_CartPole-v1 | a2c_CartPole-v1 | ddpg_Pendulum-v1)
set -u  # issue 37 QAT recipe study; ran with outputs under /tmp/qatw/qat_recipe, records copied to reports/studies/qat_recipe
cd /work/wt/qat
export PYTHONPATH=$PWD OMP_NUM_THREADS=1
/work/main/.venv/bin/python -m actorq.studies.cli qat-study --out /tmp/qatw/qat_recipe --pairs $1 \
  --bits 8,6 --seeds ${SEEDS:-3} --episodes 10 --schedule finetune
