# SFT: packed demonstrations -> Megatron-Core fine-tuning -> quick eval through vLLM (included by the Makefile).

sft-data: $(DATA)/sft/manifest.json ## packed, loss-masked SFT conversations from the domains datasets
$(DATA)/sft/manifest.json: $(DATA)/domains/manifest.json $(CKPT)/base/manifest.json
	$(PY) -m sft.01_data --in $(DATA)/domains --base $(CKPT)/base --out $(DATA)/sft --recipe $(RECIPE)

sft: $(CKPT)/sft/manifest.json ## supervised fine-tuning of the base (resumes after a kill)
$(CKPT)/sft/manifest.json: $(DATA)/sft/manifest.json $(CKPT)/base/manifest.json
	$(LAUNCH) -m sft.02_train --in $(CKPT)/base --data $(DATA)/sft --out $(CKPT)/sft --recipe $(RECIPE)

eval-sft: $(RESULTS)/base/eval.json $(RESULTS)/sft/eval.json ## pass rate per family, train and held-out domains, base and SFT

# the quick eval of base and SFT: results/<stage>/eval.json (schema eval.quick). A static pattern, not %/eval.json:
# results/rl/eval.json is rl/01_train.py's own (schema rl.eval), written with the rl checkpoint
QUICK_EVAL := base sft
$(QUICK_EVAL:%=$(RESULTS)/%/eval.json): $(RESULTS)/%/eval.json: $(CKPT)/%/manifest.json $(DATA)/domains/manifest.json
	$(PY) -m sft.03_eval --in $(CKPT)/$* --data $(DATA)/domains --out $@

.PHONY: sft-data sft eval-sft
