# serving: open-weights export with a model card, the OpenAI-compatible vLLM server, and the fast variant
# (W8A8 target + distilled draft for speculative decoding) with its benchmark (included by the Makefile).

SERVE_FROM ?= $(if $(or $(filter demo rl,$(MAKECMDGOALS)),$(wildcard $(CKPT)/rl/manifest.json)),rl,sft)## stage exported and made fast (default: rl if present or being built, else sft)
# decided once, before any rule runs: a recursive variable was read as sft for the prerequisites (no rl yet on a
# fresh clone) and as rl for the command once rl existed, so under `make -j demo` the fast variant could start beside RL
SERVE_FROM := $(SERVE_FROM)
SERVE ?= export## checkpoint that `make serve` serves: export (standard) or fast
PORT ?= 8000## port of `make serve` on 127.0.0.1
# the real base (RECIPE=smollm2_cpu): the bf16 standard beside the halves, pass rates on the whole eval split (10 tasks
# per domain), and batch-1 answers that stop at their end
BENCH_FAST_REAL := --sides standard,fast,quant_only,spec_only,standard_bf16 --per-domain 10 --natural-requests 24
BENCH_FAST_ARGS ?= $(if $(filter smollm2_cpu,$(RECIPE)),$(BENCH_FAST_REAL),--ablations)## extra serving/bench_fast.py arguments of `make bench-fast`

export: $(CKPT)/export/manifest.json ## HF weights + model card (evals, provenance) of SERVE_FROM -> checkpoints/export
$(CKPT)/export/manifest.json: $(CKPT)/$(SERVE_FROM)/manifest.json
	$(PY) -m serving.01_export --in $(CKPT)/$(SERVE_FROM) --out $(CKPT)/export --results $(RESULTS)

fast: $(CKPT)/fast/manifest.json ## quantized SERVE_FROM + draft model distilled from it (speculative decoding)
$(CKPT)/fast/manifest.json: $(CKPT)/$(SERVE_FROM)/manifest.json $(DATA)/domains/manifest.json
	$(PRELOAD)$(PY) -m serving.02_fast --in $(CKPT)/$(SERVE_FROM) --data $(DATA)/domains --out $(CKPT)/fast --results $(RESULTS) \
		--recipe $(RECIPE) --nproc $(NPROC)

# export's and fast's model cards list the results files measuring SERVE_FROM that exist when the card is written.
# Under -j the evals of SERVE_FROM made by the same make would race the card: they come after it, as in the
# sequential demo (fast, then eval). The quick evals are base's and sft's (sft/stage.mk): rl/01_train.py writes
# results/rl/eval.json itself, with the rl checkpoint.
SERVE_CARDS := $(call after,export fast)
ifneq ($(SERVE_CARDS),)
$(RESULTS)/eval/$(SERVE_FROM).json $(if $(filter base sft,$(SERVE_FROM)),$(RESULTS)/$(SERVE_FROM)/eval.json): | $(SERVE_CARDS)
endif

serve serve-smoke: | $(call after,$(SERVE))
serve: setup ## OpenAI API on 127.0.0.1:PORT for $(CKPT)/$(SERVE) until Ctrl-C (waits for /health, prints the URL)
	@test -f $(CKPT)/$(SERVE)/manifest.json || { echo "error: $(CKPT)/$(SERVE) is missing: run \`make $(SERVE)\` first" >&2; exit 2; }
	$(PRELOAD)$(PY) -m serving.03_serve --in $(CKPT)/$(SERVE) --port $(PORT)

serve-smoke: setup ## start the server, one chat completion through the chat template, clean shutdown
	@test -f $(CKPT)/$(SERVE)/manifest.json || { echo "error: $(CKPT)/$(SERVE) is missing: run \`make $(SERVE)\` first" >&2; exit 2; }
	$(PRELOAD)$(PY) -m serving.03_serve --in $(CKPT)/$(SERVE) --port 0 --smoke

bench-fast: setup $(CKPT)/fast/manifest.json ## fast vs standard tok/s at batch 1/8/64, acceptance, pass rates -> results/bench/fast.json
	$(PRELOAD)$(PY) -m serving.bench_fast --fast $(CKPT)/fast --data $(DATA)/domains --out $(RESULTS)/bench/fast.json $(BENCH_FAST_ARGS)

test-serving: setup ## serving tests only
	$(PY) -m pytest -q -ra serving/tests $(PYTEST_ARGS)

.PHONY: export fast serve serve-smoke bench-fast test-serving
