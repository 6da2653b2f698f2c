# eval: long-context suite, regression set and held-out pass@k for every checkpoint (included by the Makefile).
# `make eval` evaluates the checkpoints present in CKPT and those its fellow goals build (`make rl eval`, demo), and
# builds or rebuilds no other: a results file is redone when missing or older than its checkpoint's manifest.

EVAL_BEFORE ?= sft## with `make eval-compare`: stage whose results/eval/<stage>.json is "before"
EVAL_AFTER ?= rl## with `make eval-compare`: stage whose results/eval/<stage>.json is "after"

EVAL_ALL := base sft rl fast
# decided once, before any rule runs (a recipe-time wildcard saw, under -j, only the checkpoints finished so far)
EVAL_BUILT := $(filter $(BUILDING),$(EVAL_ALL))
EVAL_PRESENT := $(foreach s,$(filter-out $(BUILDING),$(EVAL_ALL)),$(if $(wildcard $(CKPT)/$(s)/manifest.json),$(s)))
EVAL_STAGES := $(filter $(EVAL_BUILT) $(EVAL_PRESENT),$(EVAL_ALL))

eval: $(EVAL_STAGES:%=$(RESULTS)/eval/%.json) | setup ## long-context + regression + held-out pass@k of every checkpoint in CKPT -> results/eval/<stage>.json
	@test -n "$(EVAL_STAGES)" || { echo "error: no checkpoint in $(CKPT)/{base,sft,rl,fast}: run \`make base\` (or import-base) first" >&2; exit 2; }

# Static patterns (results/eval/ holds other files, rope_study.json). A checkpoint built by this make is a
# prerequisite, so the eval waits for it under -j. One only present is named as <stage>/./manifest.json, a name
# without a rule (make compares names): its time is compared, but make never rebuilds it, e.g. an imported base
# whose pretraining inputs (tokenizer, corpus) are absent, which `make -n eval` would otherwise retrain over the import.
EVAL_RUN = $(PRELOAD)$(PY) -m eval.01_eval --in $(CKPT)/$* --out $@ --recipe $(RECIPE)
$(EVAL_BUILT:%=$(RESULTS)/eval/%.json): $(RESULTS)/eval/%.json: $(CKPT)/%/manifest.json | setup
	$(EVAL_RUN)
$(EVAL_PRESENT:%=$(RESULTS)/eval/%.json): $(RESULTS)/eval/%.json: $(CKPT)/%/./manifest.json | setup
	$(EVAL_RUN)

eval-compare: | $(if $(filter eval demo,$(MAKECMDGOALS)),eval) ## before/after table of two stages' eval results (EVAL_BEFORE, EVAL_AFTER)
	$(PY) -m eval.02_compare $(RESULTS)/eval/$(EVAL_BEFORE).json $(RESULTS)/eval/$(EVAL_AFTER).json

eval-rope: setup | $(call after,base) ## RoPE scaling study on the base (none / linear / YaRN at 2-8x training length) -> results/eval/rope_study.json
	@test -f $(CKPT)/base/manifest.json || { echo "error: $(CKPT)/base is missing: run \`make base\` first" >&2; exit 2; }
	$(PRELOAD)$(PY) -m eval.03_rope_study --in $(CKPT)/base --out $(RESULTS)/eval/rope_study.json --recipe $(RECIPE)

bench-longctx: setup | $(call after,base) ## seconds to build each 1M-token long-context task vs one tokenization -> results/bench/longctx_gen.json
	@test -f $(CKPT)/tokenizer/tokenizer.json || { echo "error: $(CKPT)/tokenizer is missing: run \`make tokenizer\` first" >&2; exit 2; }
	$(PY) -m eval.bench_longctx --tokenizer $(CKPT)/tokenizer --out $(RESULTS)/bench/longctx_gen.json

.PHONY: eval eval-compare eval-rope bench-longctx
