# ActorQ: two commands. `make run` trains with int8 actors and prints a summary (docs/measured.md says why it is
# DQN on CartPole-v1); `make test` runs the test suite.
# Both build the pinned Python 3.10 virtualenv .venv first when it is missing (about 3 minutes here).

SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# A new dated directory per `make run` (actorq train refuses a non-empty --run-dir unless it is --resume'd).
RUN_DIR ?= runs/make-run-$(shell date +%Y%m%d-%H%M%S)
PYTEST_ARGS ?=
# Disk a venv build needs, in MiB, measured 2026-11-26 on a fresh build (AMD EPYC Zen 4, pip 26.3): the venv ends at
# 7,543 MiB (3.2 GiB of it torch's CUDA libraries: PyPI's only torch for Python 3.10 on x86_64 is the CUDA build)
# and pip's downloads and unpacking peak 3,530 MiB above that in its temp dir. A build that runs out of disk dies
# minutes in with a bare "No space left on device", so the check comes first (VENV_DISK_CHECK=0 skips it), and pip
# keeps no cache (--no-cache-dir): its cache would hold a second copy of the 3.5 GB of wheels.
VENV_NEED_MIB := 7800
PIP_TMP_NEED_MIB := 3700
VENV_DISK_CHECK ?= 1

.PHONY: run test test-avx2 test-fast lint lock format bench reproduce reproduce-cpu reproduce-cpu-learnerbound \
  reproduce-cpu-actorbound reproduce-cpu-subset replicate-acrobot-int8 device-check reproduce-qat \
  reproduce-qat-subset venv clean help

help:
	@echo "make run        train DQN (3x2048) on CartPole-v1 with int8 actors to return 195 (<= 10 min), print the summary"
	@echo "make test       the full CPU test suite: unit and reverb tests on TEST_WORKERS xdist workers (a core, 2 GiB each),"
	@echo "                then integration, slow, faults, ray and docker tests one at a time"
	@echo "make test-fast  the unit tier: in-process tests of tests/unit, no Reverb server, no process started"
	@echo "make test-avx2  kernel and parity tests with oneDNN/ATen limited to AVX2 (part of make test on AVX512 CPUs)"
	@echo "make lint       ruff check + format check"
	@echo "make lock       re-resolve requirements.lock and requirements-runtime.lock from pyproject.toml"
	@echo "make bench      quick benchmarks and the report into runs/bench (BENCH_OUT=... to choose)"
	@echo "make reproduce  the paper's experiments (hours)"
	@echo "make reproduce-cpu  Table 2 on this CPU, resumable: issue 20's learner-bound grid (reproduce-cpu-learnerbound,"
	@echo "                ~16 h) and issue 34's actor-bound one (reproduce-cpu-actorbound: learner and actor on their own"
	@echo "                cores, spi 0.25, ~57.5 h; ACTORBOUND_EXPERIMENTS=NAMES runs only some of its cells);"
	@echo "                REPRODUCE_SUBSET=1 or reproduce-cpu-subset: the actor-bound subset (~86 min)"
	@echo "make device-check  torch-only check of a GPU box (actor forwards x N processes, fp32/int8/fp16; DQN and D4PG"
	@echo "                update twins on the GPU) into DEVICE_CHECK_OUT; the CPU part alone without a GPU"
	@echo "make replicate-acrobot-int8  issue 91's preregistered replication of the int8 Acrobot 1-env speed-up (fp32"
	@echo "                and int8 x 10 seeds, ~12-13 h on a 2-core Zen 3, alone on the machine), resumable; its report"
	@echo "                says replicated or not by the criterion frozen in its grid file"
	@echo "make reproduce-qat  issue 37's QAT study, reports/studies/qat_recipe: fp32 vs PTQ vs fine-tuned QAT at 8-2 bits,"
	@echo "                10 seeds, resumable (runs the cells without a record, then re-renders its report). From empty,"
	@echo "                on 2 cores: PPO+A2C CartPole ~1.9 h next to DDPG Pendulum ~3.2 h; ZOO=<rl-trained-agents dir> then"
	@echo "                adds zoo SAC Hopper (~4-5.5 min per cell, ~5.2 h) next to DDPG MountainCarContinuous"
	@echo "                (~3-4.5 min per cell, ~5.1 h). QAT_SUBSET=1 or reproduce-qat-subset: PPO CartPole + DDPG Pendulum,"
	@echo "                8 bits, 10 seeds (~77 min + the report). Times: mean cell_seconds of the committed records, made"
	@echo "                on a 2-vCPU AMD EPYC Zen 4 VM by two workers at OMP_NUM_THREADS=1 (Makefile comment: per cell)"

venv: $(STAMP)

# Re-resolve requirements.lock ('.[all]') and requirements-runtime.lock ('.') from pyproject.toml, keeping every pin
# that still fits (delete a line of requirements.lock first to move that pin). Needs a package index; ~3 min.
lock: $(STAMP)
	$(PY) .ci/lock.py

# Find Python 3.10: $PYTHON310, python3.10 on PATH (if it really runs), then pyenv's 3.10.x installs.
# pip byte-compiles what it installs one file at a time: for the lock's ~24,000 .py files that is about half of a
# 337-s venv build (compileall -f -j 1: 161 s; 2026-12-06, Zen 1 EPYC). So pip installs with --no-compile and
# compileall does it on every core (-j 0). It must be done here: these machines set PYTHONDONTWRITEBYTECODE=1, so
# a venv without .pyc files recompiles every module in every process (CI's first pass took 673 s, not 537).
# compileall's exit status is ignored as pip ignores files that do not compile (some packages' test data).
$(STAMP): requirements.lock pyproject.toml
	@set -e; \
	py="$${PYTHON310:-}"; \
	if [ -z "$$py" ] && command -v python3.10 >/dev/null 2>&1 && python3.10 -c 'import sys; assert sys.version_info[:2]==(3,10)' >/dev/null 2>&1; then py=python3.10; fi; \
	if [ -z "$$py" ]; then \
	  for root in "$${PYENV_ROOT:-}" "$$HOME/.pyenv" /root/.pyenv /opt/pyenv; do \
	    [ -n "$$root" ] || continue; \
	    for cand in $$(ls -d "$$root"/versions/3.10.* 2>/dev/null | sort -V -r); do \
	      if "$$cand/bin/python" -c 'import sys; assert sys.version_info[:2]==(3,10)' >/dev/null 2>&1; then py="$$cand/bin/python"; break 2; fi; \
	    done; \
	  done; \
	fi; \
	if [ -z "$$py" ]; then \
	  echo "error: ActorQ needs Python 3.10 (dm-launchpad 0.5.0 has no wheel for 3.11+), and none was found." >&2; \
	  echo "  Install one: 'apt-get install python3.10 python3.10-venv', 'pyenv install 3.10.13', or use a python:3.10 image;" >&2; \
	  echo "  or point PYTHON310=/path/to/python3.10 at one." >&2; \
	  exit 1; \
	fi; \
	if [ "$(VENV_DISK_CHECK)" != 0 ]; then \
	  vdir=$$(dirname "$(abspath $(VENV))"); mkdir -p "$$vdir"; tmp="$${TMPDIR:-/tmp}"; \
	  old=0; if [ -d "$(VENV)" ]; then old=$$(du -sm "$(VENV)" | cut -f1); fi; \
	  vfree=$$(( $$(df -Pm "$$vdir" | awk 'NR==2 {print $$4}') + old )); \
	  tfree=$$(df -Pm "$$tmp" | awk 'NR==2 {print $$4}'); \
	  same=0; [ "$$(df -P "$$vdir" | awk 'NR==2 {print $$6}')" = "$$(df -P "$$tmp" | awk 'NR==2 {print $$6}')" ] && same=1; \
	  need_v=$$(( $(VENV_NEED_MIB) + same * $(PIP_TMP_NEED_MIB) )); \
	  if [ "$$vfree" -lt "$$need_v" ] || { [ "$$same" = 0 ] && [ "$$tfree" -lt $(PIP_TMP_NEED_MIB) ]; }; then \
	    echo "error: building $(VENV) needs about $(VENV_NEED_MIB) MiB for the venv and $(PIP_TMP_NEED_MIB) MiB for pip's downloads:" >&2; \
	    echo "  $$need_v MiB free in $$vdir (it has $$vfree, counting the old venv)$$([ "$$same" = 1 ] && echo ", which also holds pip's temp dir $$tmp" || echo " and $(PIP_TMP_NEED_MIB) in pip's temp dir $$tmp (it has $$tfree)")." >&2; \
	    echo "  3.2 GiB of it are torch's CUDA libraries: PyPI has no CPU-only torch for Python 3.10." >&2; \
	    echo "  Free some space, or build elsewhere: VENV=/bigger/disk/venv and/or TMPDIR=/bigger/disk/tmp;" >&2; \
	    echo "  VENV_DISK_CHECK=0 skips this check." >&2; \
	    exit 1; \
	  fi; \
	fi; \
	echo "==> building $(VENV) with $$py ($$($$py --version 2>&1))"; \
	rm -rf $(VENV); \
	"$$py" -m venv $(VENV); \
	$(PY) -m pip install -q --no-cache-dir --upgrade "pip<27" wheel setuptools; \
	$(PY) -m pip install -q --no-cache-dir --no-compile -r requirements.lock; \
	$(PY) -m compileall -qq -j 0 $(VENV)/lib >/dev/null 2>&1 || true; \
	$(PY) -m pip install -q --no-cache-dir --no-deps --no-build-isolation -e .; \
	$(PY) -m pip check; \
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/actorq train configs/dqn/gym_cartpole.yaml --precision int8 --actors 2 \
		--max-minutes 10 --target-return 195 --run-dir $(RUN_DIR)

# The suite runs in two passes. Tests marked SERIAL_MARKERS start role processes pinned to cores, time things or
# learn against a clock (the compose stack, Ray and namespace hosts, link limits, real learning): they run one at a
# time, alone on the machine. The rest (unit and in-process Reverb tests: one process, no timing in an assertion)
# run on TEST_WORKERS pytest-xdist workers, a test file to a worker (its module fixtures, some of which train a
# policy, are made once). Each pass's exit status counts, except 5 (the pass had nothing to run: PYTEST_ARGS chose
# only the other pass's tests).
SERIAL_MARKERS := slow or integration or faults or docker or ray
# Workers: one per core, but no more than one per TEST_WORKER_MIB of available memory (never fewer than one). Each
# worker holds TensorFlow, torch and Reverb and trains small policies: 1.7 GiB peak RSS each (2026-11-28, Zen 3, 2
# workers; the machine's available memory fell by 2.7 GiB at most), so a 64-core box with 64 GiB would otherwise
# start 64 of them and run out of memory. TEST_CORES and TEST_MEMINFO exist so a test can check
# the rule; TEST_WORKERS=N sets the count outright.
TEST_WORKER_MIB := 2048
TEST_CORES ?= $(shell nproc 2>/dev/null || echo 1)
TEST_MEMINFO ?= /proc/meminfo
TEST_WORKERS ?= $(shell awk -v cores=$(TEST_CORES) -v per=$(TEST_WORKER_MIB) \
  '/^MemAvailable:/ {mem = int($$2 / 1024 / per)} END {w = (mem != "" && mem < cores) ? mem : cores; \
  print (w < 1 ? 1 : w)}' $(TEST_MEMINFO) 2>/dev/null || echo $(TEST_CORES))
XDIST := -n $(TEST_WORKERS) --dist loadfile
test: $(STAMP)
	@rc=0; \
	$(PY) -m pytest $(XDIST) -m "not ($(SERIAL_MARKERS))" $(PYTEST_ARGS) || { s=$$?; [ $$s = 5 ] || rc=$$s; }; \
	$(PY) -m pytest -m "$(SERIAL_MARKERS)" $(PYTEST_ARGS) || { s=$$?; [ $$s = 5 ] || rc=$$s; }; \
	exit $$rc
	@$(MAKE) --no-print-directory test-avx2

# The kernel and parity tests again with oneDNN and ATen limited to AVX2, on CPUs that have AVX512, so that a green
# run on a VNNI machine cannot hide a kernel that is wrong on AVX2-only CPUs (where int8 pair sums saturate).
# fbgemm and ONNX Runtime ignore these variables: on such a machine this pass covers the oneDNN-based kernels
# (torch._int_mm, the onednn engine) and ATen; the AVX2-only CPUs themselves cover the rest.
test-avx2: $(STAMP)
	@if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then \
	  echo "==> kernel and parity tests again with ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2"; \
	  ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 $(PY) -m pytest $(XDIST) \
	    tests/unit/actors tests/unit/networks/test_parity.py tests/unit/networks/test_conv_parity.py $(PYTEST_ARGS); \
	else \
	  echo "==> no AVX512 on this CPU: the run above already tested the AVX2 kernels"; \
	fi

test-fast: $(STAMP)
	$(PY) -m pytest $(XDIST) -m "not ($(SERIAL_MARKERS) or reverb or subprocess)" tests/unit $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check actorq launch tests
	$(VENV)/bin/ruff format --check actorq launch tests

format: $(STAMP)
	$(VENV)/bin/ruff format actorq launch tests
	$(VENV)/bin/ruff check --fix actorq launch tests

# Quick benchmarks and the report (about 15 minutes here, most of it the Acme comparison). Results go to the ignored
# $(BENCH_OUT); to curate them, pass BENCH_OUT=reports/<folder> and add a README (command, commit, date, machine).
BENCH_OUT ?= runs/bench
bench: $(STAMP)
	mkdir -p $(BENCH_OUT)
	$(VENV)/bin/actorq bench policy --quick --json $(BENCH_OUT)/policy.json
	$(VENV)/bin/actorq bench actors configs/d4pg/dmc_cartpole_balance.yaml --precisions fp32,int8 --actors 1 --update-period 1000 --seconds 10 --repeats 2 --json $(BENCH_OUT)/actors_quick.json
	$(VENV)/bin/actorq bench learner configs/d4pg/dmc_cartpole_balance.yaml --seconds 10 --repeats 2 --json $(BENCH_OUT)/learner_quick.json
	$(VENV)/bin/actorq ablation configs/d4pg/dmc_cartpole_balance.yaml --seconds 5 --repeats 1 --sweep-periods 10,100,1000 --json $(BENCH_OUT)/ablation_quick.json
	$(VENV)/bin/actorq acme-baseline configs/d4pg/dmc_cartpole_balance.yaml --quick --out $(BENCH_OUT)/acme-baseline-quick
	$(VENV)/bin/actorq report $(BENCH_OUT)/acme-baseline-quick --bench $(BENCH_OUT)/actors_quick.json --bench $(BENCH_OUT)/ablation_quick.json --out $(BENCH_OUT)/report

# The paper's task set per precision and seed, the Acme baseline, and the report (many hours; resumable), into the
# ignored $(REPRODUCE_OUT) unless told otherwise.
REPRODUCE_OUT ?= runs/reproduce
reproduce: $(STAMP)
	for cfg in configs/d4pg/dmc_*.yaml configs/dqn/gym_*.yaml; do \
	  $(VENV)/bin/actorq experiment $$cfg --precisions fp32,fp16,int8 --seeds 3 --out $(REPRODUCE_OUT)/$$(basename $$cfg .yaml) || exit 1; \
	done
	$(VENV)/bin/actorq acme-baseline configs/d4pg/dmc_cartpole_balance.yaml --out $(REPRODUCE_OUT)/acme-baseline
	$(VENV)/bin/actorq report $(REPRODUCE_OUT)/* --out $(REPRODUCE_OUT)/report

# Issue 20's Table 2 on this CPU (2 actors; no GPU): three tasks x fp32/fp16/int8 x $(CPU_SEEDS) seeds x two
# samples-per-insert values, each task an interleaved, resumable `actorq experiment` (rerun the same command after a
# crash or the next day: finished runs are skipped), then the report from the runs' curated records.
#   DQN CartPole-v1      spi 1,8   6 min per run   30 runs   ~3.5 h  (issue 20: spi 8 took up to 300 s to 195)
#   DQN Acrobot-v1       spi 1,8   8 min per run   30 runs   ~4.5 h
#   D4PG walker:stand    spi 8,32  15 min per run  30 runs   ~8 h   (batch 64, critic lr 3e-4: learns within budget)
# Every run lasts its wall-clock budget (--max-actor-steps 0 lifts the configs' step budgets: at spi 1, CartPole's
# 60k actor steps end a run after ~900 learner steps, two minutes, before it can reach 95% of fp32's best, so
# time to that reward would be censored by the step budget, not measured). About 16 h in all (each run's budget +
# ~1 min to start and stop). REPRODUCE_SUBSET=1 runs the subset that fits
# 90 minutes: DQN CartPole-v1 only, spi 1 only, fp32/fp16/int8 x 5 seeds, 4 min per run (15 runs, ~75 min).
# Results go to the ignored $(REPRODUCE_CPU_OUT); curate them under reports/ with the commit and CPU.
# CPU_RECORDS=DIR keeps each task's curated run records in DIR/<task>/records instead, and counts a run with a
# finished record there as done: the project's own grid goes on across sessions from the records committed in
# reports/experiments/table2-cpu (`make reproduce-cpu CPU_RECORDS=reports/experiments/table2-cpu`).
REPRODUCE_CPU_OUT ?= runs/reproduce-cpu
CPU_RECORDS ?=
CPU_SEEDS ?= 5
REPRODUCE_SUBSET ?=
# Appended to every experiment, e.g. a plumbing check: CPU_SEEDS=1 REPRODUCE_CPU_ARGS="--max-actor-steps 1500"
REPRODUCE_CPU_ARGS ?=
CPU_GRID = $(VENV)/bin/actorq experiment --precisions fp32,fp16,int8 --seeds $(CPU_SEEDS) --actors 2 \
  --max-actor-steps 0 $(REPRODUCE_CPU_ARGS)
# The folder `actorq report` reads for task $(1): its records (CPU_RECORDS) or its experiment directory.
cpu_task = $(if $(CPU_RECORDS),$(CPU_RECORDS)/$(1)/records,$(REPRODUCE_CPU_OUT)/$(1))
cpu_records = $(if $(CPU_RECORDS),--records $(CPU_RECORDS)/$(1)/records)
# Both grids: the learner-bound one stays as the contrast (REPRODUCE_SUBSET=1 runs only the actor-bound subset;
# the learner-bound subset: `make reproduce-cpu-learnerbound REPRODUCE_SUBSET=1`).
reproduce-cpu: $(if $(REPRODUCE_SUBSET),,reproduce-cpu-learnerbound) reproduce-cpu-actorbound
reproduce-cpu-learnerbound: $(STAMP)
	@grep -m1 'model name' /proc/cpuinfo; nproc
	@set -u; status=0; \
	if [ -n "$(REPRODUCE_SUBSET)" ]; then \
	  echo "==> subset: DQN CartPole-v1, spi 1, fp32/fp16/int8 x $(CPU_SEEDS) seeds, 4 min per run: expect ~75 min at 5 seeds"; \
	  $(CPU_GRID) configs/dqn/gym_cartpole.yaml --sweep replay.samples_per_insert=1 --max-minutes 4 \
	    --out $(REPRODUCE_CPU_OUT)/subset_dqn_cartpole $(call cpu_records,subset_dqn_cartpole) || status=$$?; \
	  tasks="$(call cpu_task,subset_dqn_cartpole)"; \
	else \
	  echo "==> full grid: 3 tasks x 3 precisions x $(CPU_SEEDS) seeds x 2 spi (90 runs at 5 seeds): expect ~16 h (resumable)"; \
	  $(CPU_GRID) configs/dqn/gym_cartpole.yaml --sweep replay.samples_per_insert=1,8 --max-minutes 6 \
	    --out $(REPRODUCE_CPU_OUT)/dqn_cartpole $(call cpu_records,dqn_cartpole) || status=$$?; \
	  [ $$status -eq 130 ] || $(CPU_GRID) configs/dqn/gym_acrobot.yaml --sweep replay.samples_per_insert=1,8 \
	    --max-minutes 8 --out $(REPRODUCE_CPU_OUT)/dqn_acrobot $(call cpu_records,dqn_acrobot) || status=$$?; \
	  [ $$status -eq 130 ] || $(CPU_GRID) configs/d4pg/dmc_walker_stand.yaml learner.batch_size=64 \
	    d4pg.critic_lr=3e-4 --sweep replay.samples_per_insert=8,32 --max-minutes 15 \
	    --out $(REPRODUCE_CPU_OUT)/d4pg_walker_stand $(call cpu_records,d4pg_walker_stand) || status=$$?; \
	  tasks="$(call cpu_task,dqn_cartpole) $(call cpu_task,dqn_acrobot) $(call cpu_task,d4pg_walker_stand)"; \
	fi; \
	[ $$status -eq 130 ] && { echo "interrupted: run the same make command again to resume"; exit 130; }; \
	$(VENV)/bin/actorq report $$tasks --out $(if $(CPU_RECORDS),$(CPU_RECORDS)/report,$(REPRODUCE_CPU_OUT)/report) || exit $$?; \
	exit $$status
# Issue 34's Table 2 where the regime model says int8 actors must be faster, defined (cells, budgets, hours and why)
# in $(ACTORBOUND_GRID) and run by `actorq grid`: DQN CartPole-v1 and Acrobot-v1 (3x2048) x fp32/fp16/int8 x 10
# seeds, the learner with replay, quantizer and evaluator on core 0 and one actor on core 1, spi 0.25, at 1 env per
# actor (the same setting for all) and at 8 (each precision's own best): 120 runs, at most ~57.5 h on the 2-core Zen 4
# that `actorq plan` timed (reports/plan-2026-11-27-zen4), about 27 h expected since each run stops at its task's fixed
# target return (the grid file says why). Resumable: each run's record is written as it finishes, and the
# same command skips finished runs. REPRODUCE_SUBSET=1 (`make reproduce-cpu-subset`): CartPole at 1 env, fp32 and
# int8 x 3 seeds, 13 min per run and a quick plan (~86 min), into its own folders. ACTORBOUND_RECORDS=DIR keeps the records in
# DIR/<machine slug>/<task>/records (.../subset/... for the subset; one folder per CPU, as `actorq.hardware.machine_slug`
# names it: wall-clock speed-ups are not compared across machines, and the grid refuses to add runs to another
# machine's folder) and counts a run with a finished record there as done, so the grid goes on across sessions from
# committed records:
# `make reproduce-cpu-actorbound ACTORBOUND_RECORDS=reports/experiments/table2-actorbound`.
ACTORBOUND_GRID ?= configs/experiments/table2-actorbound.yaml
ACTORBOUND_OUT ?= $(REPRODUCE_CPU_OUT)/actorbound
ACTORBOUND_RECORDS ?=
# task:config of each task the grid runs; before the first run each gets `actorq plan` on this machine (~5-10 min,
# alone; the subset's `--quick` one ~2 min; kept as <records>/plan-<task>.json and reused), and the report takes
# the learner's capacity C and the actors' supply from it: no run of this grid has a never-starved learner, so without a plan the predicted
# speed-up would be "-". A plan made on another machine or for another config is refused by the report.
ACTORBOUND_TASKS = dqn_cartpole:configs/dqn/gym_cartpole.yaml $(if $(REPRODUCE_SUBSET),,dqn_acrobot:configs/dqn/gym_acrobot.yaml)
# ACTORBOUND_EXPERIMENTS=NAMES (comma-separated, e.g. dqn_cartpole_env1,dqn_cartpole_env8): run only these
# experiments of the grid file (`actorq grid --experiments`); empty runs every one.
ACTORBOUND_EXPERIMENTS ?=
# ACTORBOUND_BUDGET_SCALE=X: `actorq grid --budget-scale X`, every budget times X, for a CPU slower than the one the
# grid file's budgets were sized for (X = that machine's planned fp32 env steps/s / this one's; the Zen 3's 1.7).
ACTORBOUND_BUDGET_SCALE ?=
reproduce-cpu-actorbound: $(STAMP)
	@grep -m1 'model name' /proc/cpuinfo; nproc
	@set -u; status=0; plans=""; \
	slug=$$($(VENV)/bin/python -c 'from actorq.hardware import machine_slug; print(machine_slug())'); \
	recs=$(if $(ACTORBOUND_RECORDS),$(ACTORBOUND_RECORDS)/$$slug); \
	rec=$${recs:-$(ACTORBOUND_OUT)}$(if $(REPRODUCE_SUBSET),/subset); mkdir -p $$rec; echo "records: $$rec"; \
	for tc in $(ACTORBOUND_TASKS); do \
	  plan=$$rec/plan-$${tc%%:*}.json; \
	  [ -f $$plan ] || $(VENV)/bin/actorq plan $${tc#*:} $(if $(REPRODUCE_SUBSET),--quick) --json $$plan || exit $$?; \
	done; \
	$(VENV)/bin/actorq grid $(ACTORBOUND_GRID) \
	  $(if $(REPRODUCE_SUBSET),--subset subset,$(if $(ACTORBOUND_EXPERIMENTS),--experiments $(ACTORBOUND_EXPERIMENTS))) \
	  $(if $(ACTORBOUND_BUDGET_SCALE),--budget-scale $(ACTORBOUND_BUDGET_SCALE)) \
	  --out $(ACTORBOUND_OUT) $${recs:+--records $$recs} || status=$$?; \
	[ $$status -eq 130 ] && { echo "interrupted: run the same make command again to resume"; exit 130; }; \
	for tc in $(ACTORBOUND_TASKS); do \
	  [ -d $$rec/$${tc%%:*}/records ] && plans="$$plans --plan $$rec/plan-$${tc%%:*}.json"; \
	done; \
	tasks=$$(ls -d $$rec/*/records 2>/dev/null); \
	if [ -n "$$tasks" ]; then $(VENV)/bin/actorq report $$tasks $$plans --out $$rec/report || exit $$?; fi; \
	exit $$status
reproduce-cpu-subset:
	$(MAKE) reproduce-cpu-actorbound REPRODUCE_SUBSET=1

# Issue 91: what a GPU box does for ActorQ, with torch alone (a lent device machine has Python 3.12 and torch, no
# TensorFlow and no registry): N actor processes (1, 2, 4, ... cores-1) timing forwards of the 3x2048 MLP and the
# Nature-CNN at fp32/int8/fp16, batch 1 and 8, each checked against fp32; and on a GPU, torch twins of the DQN and
# D4PG updates (learner steps/s for `actorq plan --learner-steps-per-s`). One JSON naming the machine; without a GPU
# the CPU part only (exit 0). No venv needed: it runs with whatever python has torch ($(DEVICE_PYTHON)).
DEVICE_CHECK_OUT ?= runs/device-check/device-check.json
DEVICE_PYTHON ?= $(if $(wildcard $(VENV)/bin/python),$(VENV)/bin/python,python3)
DEVICE_CHECK_ARGS ?=
device-check:
	$(DEVICE_PYTHON) actorq/bench/device_check.py --out $(DEVICE_CHECK_OUT) $(DEVICE_CHECK_ARGS)

# Issue 91: the preregistered replication of the one speed-up claim (int8 actors reach Acrobot-v1's -95 sooner than
# fp32 at 1 env per actor), frozen in $(REPLICATION_GRID) before its first run: the grid runs it whole (no budget
# scale, no subset) and refuses to start unless that file is committed unchanged; each record names the file's commit
# and sha256 and the run's DRAM bandwidth. Records go to $(REPLICATION_RECORDS)/<machine slug>/dqn_acrobot/records
# (one CPU kind per folder); rerunning the target resumes. Needs the machine alone for ~12-13 h (2-core Zen 3). The
# report (`--preregistered`) states "replicated" or "not replicated" by the frozen criterion once all 20 runs count.
REPLICATION_GRID ?= configs/experiments/replication-acrobot-int8.yaml
REPLICATION_OUT ?= runs/replication-acrobot-int8
REPLICATION_RECORDS ?= reports/experiments/replication-acrobot-int8
replicate-acrobot-int8: $(STAMP)
	@grep -m1 'model name' /proc/cpuinfo; nproc
	@set -u; status=0; \
	slug=$$($(VENV)/bin/python -c 'from actorq.hardware import machine_slug; print(machine_slug())'); \
	rec=$(REPLICATION_RECORDS)/$$slug; mkdir -p $$rec; echo "records: $$rec"; \
	$(VENV)/bin/actorq grid $(REPLICATION_GRID) --out $(REPLICATION_OUT) --records $$rec || status=$$?; \
	[ $$status -eq 130 ] && { echo "interrupted: run the same make command again to resume"; exit 130; }; \
	if [ -d $$rec/dqn_acrobot/records ]; then \
	  $(VENV)/bin/actorq report $$rec/dqn_acrobot/records --preregistered $(REPLICATION_GRID) --out $$rec/report || exit $$?; \
	fi; \
	exit $$status

# fp32 vs PTQ vs QAT to convergence (issues 22, 37): two workers (`actorq qat-study`, 1 torch thread each) on
# disjoint cells, then `actorq qat-report`. Resumable: each cell writes its JSON record when it finishes and a rerun
# skips cells whose record exists (interrupt and run the same command again; it does not check how a record was
# made, e.g. which ZOO agent). Default: issue 37's study, reports/studies/qat_recipe (10 training seeds per cell,
# the fine-tune recipe, 10 evaluation episodes; committed, so only its missing cells run, then the report is
# re-rendered in QAT_PAIRS order). The issue-22 study (3 seeds, QAT from scratch, 30 episodes; complete, so it only
# re-renders): `make reproduce-qat QAT_OUT=reports/studies/qat_convergence` (its 3 seeds, schedule and episodes
# follow from QAT_OUT).
# Durations: mean cell_seconds of the committed qat_recipe records per pair and cell (fp32 with PTQ at every width,
# ft32 fine-tune control, QAT at 8/6/5/4/3/2 bits), made on a 2-vCPU AMD EPYC Zen 4 VM by two workers at
# OMP_NUM_THREADS=1 (shared with other jobs, load 2-21, so high): PPO CartPole 177, 7, 63/53/27/28/28/11 s (10
# seeds: 66 min); A2C CartPole 151, 4, 34/35/17/15/12/5 s (46 min); DDPG Pendulum 196, 62, 267/106/113/179/125/108 s
# (193 min); zoo DDPG MountainCarContinuous 220, 184, 267/211/250/254/237/225 s (308 min); zoo SAC Hopper 28, 286,
# 242/329/266/238/246/240 s (5.2 h; 3 of its cells are left out of these means: their wall time includes a pause
# of the workers, 2376-2530 s). So worker A (PPO, A2C) 1.9 h, B (Pendulum) 3.2 h, then the zoo workers 5.1 h
# (MountainCar) next to Hopper (5.2 h).
# QAT_SUBSET=1 or reproduce-qat-subset: PPO CartPole and DDPG Pendulum, 8 bits, 10 seeds, each seed with its
# fine-tune control, into runs/qat-subset. The workers split it by --shard i/5 (each shard 2 PPO and 2 Pendulum
# seeds with all their cells, 26 min): A runs 3 shards (77 min), B 2 (51 min); by pair, B would take 88 min. It
# fits 90 min with the report (tests/unit/studies/test_qat_reproduce.py recomputes it from these flags and the
# records).
QAT_SUBSET ?=
QAT_OUT ?= $(if $(QAT_SUBSET),runs/qat-subset,reports/studies/qat_recipe)
# Non-empty when QAT_OUT is issue 22's study: its seeds, schedule and episodes differ (one rule, used below).
QAT_OLD_STUDY = $(filter reports/studies/qat_convergence,$(QAT_OUT))
# Seeds per cell as each study's records have them (qat_convergence: 3; a default of 10 there would train seeds 3-9
# from scratch, hours).
QAT_SEEDS ?= $(if $(QAT_OLD_STUDY),3,10)
# The pairs in report order (the committed report's); qat-report leaves out listed pairs without records.
QAT_PAIRS ?= ppo_CartPole-v1,a2c_CartPole-v1,ddpg_Pendulum-v1,zoo_sac_Hopper-v3,zoo_ddpg_MountainCarContinuous-v0
# The committed qat_convergence records were trained from scratch (quant delay = half the steps) and evaluated over
# 30 episodes; anything else uses the fine-tune recipe (actorq/studies/qat_finetune.py) and 10, as qat_recipe's.
QAT_SCHEDULE ?= $(if $(QAT_OLD_STUDY),from-scratch,finetune)
QAT_EPISODES ?= $(if $(QAT_OLD_STUDY),30,10)
QAT_WORKER_A := --pairs ppo_CartPole-v1,a2c_CartPole-v1 --bits 2,4,8,6,5,3 --seeds $(QAT_SEEDS)
QAT_WORKER_B := --pairs ddpg_Pendulum-v1 --bits 4,2,8,6,5,3 --seeds $(QAT_SEEDS)
# Pretrained RL Baselines3 Zoo agents where PTQ W+A loses >= 10% at 4-6 bits (issue 37 item 2; measured in
# reports/studies/qat_recipe/ptq_zoo): their QAT fine-tunes go into the same records and report. ZOO = a folder in
# the layout of DLR-RM/rl-trained-agents (<algo>/<env>_1/<env>.zip; <algo>/<env>/ is accepted too); unset: the zoo
# cells are skipped, and it says so; set but without an agent: an error naming the folder looked for (exit 2).
ZOO ?=
QAT_ZOO_AGENTS := sac/Hopper-v3 ddpg/MountainCarContinuous-v0
QAT_ZOO := --bits 6,4,5,8,3,2 --seeds $(QAT_SEEDS)
QAT_SUBSET_GRID := --pairs ppo_CartPole-v1,ddpg_Pendulum-v1 --bits 8 --seeds 10
QAT_SUBSET_A := 0/5 1/5 2/5
QAT_SUBSET_B := 3/5 4/5
QAT_RUN = OMP_NUM_THREADS=1 nice -n 10 $(VENV)/bin/actorq qat-study --out $(QAT_OUT) --episodes $(QAT_EPISODES)
# qat_worker SHARDS FLAGS...: one worker, its shards one after the other; on TERM it stops the running one.
reproduce-qat: $(STAMP)
	set -u; qat_worker() { local shards=$$1 c=; shift; trap 'kill $$c 2>/dev/null; exit 143' TERM; \
	  for s in $$shards; do $(QAT_RUN) "$$@" --shard $$s & c=$$!; wait $$c || return $$?; done; }; \
	qat_worker "$(if $(QAT_SUBSET),$(QAT_SUBSET_A),0/1)" --schedule $(QAT_SCHEDULE) $(if $(QAT_SUBSET),$(QAT_SUBSET_GRID),$(QAT_WORKER_A)) & pid=$$!; \
	qat_worker "$(if $(QAT_SUBSET),$(QAT_SUBSET_B),0/1)" --schedule $(QAT_SCHEDULE) $(if $(QAT_SUBSET),$(QAT_SUBSET_GRID),$(QAT_WORKER_B)) || { kill $$pid; exit 1; }; \
	wait $$pid
	@set -u; if [ -n "$(QAT_SUBSET)" ]; then echo "reproduce-qat: the zoo agents are not in the subset"; \
	elif [ "$(QAT_SCHEDULE)" != finetune ]; then echo "reproduce-qat: zoo agents skipped: QAT_SCHEDULE=$(QAT_SCHEDULE); a pretrained agent is only fine-tuned"; \
	elif [ -z "$(ZOO)" ]; then \
	  echo "reproduce-qat: zoo agents skipped: ZOO is not set (ZOO=<a DLR-RM/rl-trained-agents checkout> adds $(QAT_ZOO_AGENTS))"; \
	else zoo_agent() { for d in "$(ZOO)/$$1_1" "$(ZOO)/$$1"; do [ -d "$$d" ] && { echo "$$d"; return 0; }; done; \
	    echo "reproduce-qat: ZOO='$(ZOO)' has no $$1_1 (the zoo's layout) nor $$1" >&2; return 1; }; \
	  hopper=$$(zoo_agent sac/Hopper-v3) && mountaincar=$$(zoo_agent ddpg/MountainCarContinuous-v0) || exit 2; \
	  $(QAT_RUN) --zoo "$$hopper" $(QAT_ZOO) & pid=$$!; \
	  $(QAT_RUN) --zoo "$$mountaincar" $(QAT_ZOO) || { kill $$pid; exit 1; }; \
	  wait $$pid; fi
	$(VENV)/bin/actorq qat-report $(QAT_OUT) --pairs $(QAT_PAIRS)
reproduce-qat-subset:
	$(MAKE) reproduce-qat QAT_SUBSET=1

clean:
	rm -rf runs .pytest_cache .ruff_cache .hypothesis
