# eval: long-context suite, regression set and held-out pass@k for every checkpoint present (included by the Makefile).
# Evaluating never rebuilds a checkpoint: only the stages present in CKPT are read, and a results file is redone
# when it is missing or older than its checkpoint's manifest.

EVAL_BEFORE ?= sft## with `make eval-compare`: stage whose results/eval/<stage>.json is "before"
EVAL_AFTER ?= rl## with `make eval-compare`: stage whose results/eval/<stage>.json is "after"

EVAL_STAGES = $(strip $(foreach s,base sft rl fast,$(if $(wildcard $(CKPT)/$(s)/manifest.json),$(s))))

eval: setup ## long-context + regression + held-out pass@k of every checkpoint in CKPT -> results/eval/<stage>.json
	@test -n "$(EVAL_STAGES)" || { echo "error: no checkpoint in $(CKPT)/{base,sft,rl,fast}: run \`make base\` (or import-base) first" >&2; exit 2; }
	@for s in $(EVAL_STAGES); do out=$(RESULTS)/eval/$$s.json; \
	  if [ -f $$out ] && [ ! $(CKPT)/$$s/manifest.json -nt $$out ]; then echo "$$out is up to date"; continue; fi; \
	  echo "$(PRELOAD)$(PY) eval/04_eval.py --in $(CKPT)/$$s --out $$out --recipe $(RECIPE)"; \
	  $(PRELOAD)$(PY) eval/04_eval.py --in $(CKPT)/$$s --out $$out --recipe $(RECIPE) || exit $$?; done

eval-compare: ## before/after table of two stages' eval results (EVAL_BEFORE, EVAL_AFTER)
	$(PY) eval/05_compare.py $(RESULTS)/eval/$(EVAL_BEFORE).json $(RESULTS)/eval/$(EVAL_AFTER).json

eval-rope: setup ## RoPE scaling study on the base (none / linear / YaRN at 2-8x training length) -> results/eval/rope_study.json
	@test -f $(CKPT)/base/manifest.json || { echo "error: $(CKPT)/base is missing: run \`make base\` first" >&2; exit 2; }
	$(PRELOAD)$(PY) eval/06_rope_study.py --in $(CKPT)/base --out $(RESULTS)/eval/rope_study.json --recipe $(RECIPE)

bench-longctx: setup ## seconds to build each 1M-token long-context task vs one tokenization -> results/bench/longctx_gen.json
	@test -f $(CKPT)/tokenizer/tokenizer.json || { echo "error: $(CKPT)/tokenizer is missing: run \`make tokenizer\` first" >&2; exit 2; }
	$(PY) eval/bench_longctx.py --tokenizer $(CKPT)/tokenizer --out $(RESULTS)/bench/longctx_gen.json

.PHONY: eval eval-compare eval-rope bench-longctx
