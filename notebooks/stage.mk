# Figures (included by the Makefile): the notebooks/NN_*.py notebooks run headless and write $(FIGURES)/*.png
# from fresh $(RESULTS)/ files, else from $(RESULTS)/reference/ (committed results of a real run).

FIGURES ?= figures## where `make figures` writes PNGs and the executed notebooks

.PHONY: figures reference

# the notebooks read every results file: under -j they wait for the other goals of the same make (demo: its steps)
figures: | $(filter-out figures demo,$(MAKECMDGOALS)) $(if $(filter demo,$(MAKECMDGOALS)),$(DEMO))
figures: | setup ## run every notebook headless -> figures/*.png (fresh results/, else results/reference/)
	$(PY) -m notebooks --results $(RESULTS) --figures $(FIGURES)

reference: | setup ## copy every results/ file into results/reference/ (to commit), with the manifests they measured
	$(PY) -m notebooks.reference --all --results $(RESULTS)
