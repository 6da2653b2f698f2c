# RL: multi-domain GRPO with vLLM rollouts, domain verifiers and Megatron-Core updates (included by the Makefile).
RL_KS ?= 1,4,16,64,all## domain counts of the RL domain-scaling experiment
RL_SEEDS ?= 0## seeds of the RL experiments (comma-separated)
RL_EXP_SET ?=## extra recipe overrides for every experiment arm, e.g. --set train.steps=10
RL_EXP_LAUNCH = $(PY)$(if $(filter 1,$(NPROC)),, -m torch.distributed.run --standalone --nproc-per-node $(NPROC))

rl: $(CKPT)/rl/manifest.json ## RL from the SFT checkpoint over the training domains (resumes after a kill)
$(CKPT)/rl/manifest.json: $(CKPT)/sft/manifest.json $(DATA)/domains/manifest.json
	$(LAUNCH) -m rl.01_train --in $(CKPT)/sft --data $(DATA)/domains --out $(CKPT)/rl --results $(RESULTS)/rl --recipe $(RECIPE)

rl-scaling: $(RESULTS)/rl/experiments/domain_scaling.json ## RL on k in RL_KS training domains, equal steps, held-out pass rate
rl-sched-ablation: $(RESULTS)/rl/experiments/scheduler.json ## uniform vs pass-rate-aware task scheduler at equal steps
rl-seeds: $(RESULTS)/rl/experiments/seeds.json ## the rl recipe once per seed in RL_SEEDS (train.seed = 1234 + seed), paired held-out gain of each
RL_MISMATCH_SOURCES ?= stale0,stale1,stale2,stale4,bf16,int8,flip10## mismatch sources of rl-mismatch-lab: stale<k> (rollouts k versions behind), bf16 engine, int8 (W8A8) engine, flip<p> (p% forced router flips)
RL_MISMATCH_CORRECTIONS ?= none,tis,mis,replay## corrections of rl-mismatch-lab: none, tis, mis, seq_mis, replay (routing replay)
rl-mismatch-lab: $(RESULTS)/rl/experiments/mismatch.json ## one mismatch source at a time x one correction: logprob mismatch, reward curve, held-out gain

# each experiment of rl/02_experiments.py: its summary under results/, its arms' weights under checkpoints/
RL_EXPERIMENTS := domain_scaling scheduler seeds mismatch
$(RL_EXPERIMENTS:%=$(RESULTS)/rl/experiments/%.json): $(RESULTS)/rl/experiments/%.json: $(CKPT)/sft/manifest.json $(DATA)/domains/manifest.json
	$(PY) -m rl.02_experiments $* --in $(CKPT)/sft --data $(DATA)/domains --out $@ --recipe $(RECIPE) \
		--work $(CKPT)/rl_experiments/$*$(if $(filter domain_scaling,$*), --ks $(RL_KS)) --seeds $(RL_SEEDS) \
		$(if $(filter mismatch,$*),--sources $(RL_MISMATCH_SOURCES) --corrections $(RL_MISMATCH_CORRECTIONS)) \
		--launch "$(RL_EXP_LAUNCH)" $(RL_EXP_SET)

rl-experiments: rl-scaling rl-sched-ablation ## both RL experiments -> results/rl/experiments/

BENCH_RL_STEPS ?= 6## steps of each of bench-rl's three step runs (max_staleness 0 and 1, packed; 0 = skip them)
bench-rl: setup | $(call after,sft rl) ## vLLM vs transformers rollout tok/s, weight-sync s vs bytes, RL step split, step time at staleness 0 vs 1 and packed -> results/bench/rl.json
	$(PRELOAD)$(PY) -m rl.bench_rl --in $(CKPT)/sft --out $(RESULTS)/bench/rl.json --metrics $(RESULTS)/rl/metrics.jsonl \
		--data $(DATA)/domains --recipe $(RECIPE) --staleness-steps $(BENCH_RL_STEPS)

test-rl: setup ## the rl/ tests only
	$(PY) -m pytest -q -ra rl/tests $(PYTEST_ARGS)

.PHONY: rl rl-scaling rl-sched-ablation rl-seeds rl-mismatch-lab rl-experiments bench-rl test-rl
