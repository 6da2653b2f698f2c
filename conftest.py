"""Repo-wide pytest set-up, loaded before any test module imports torch."""
import os
import sys

# OpenMP threads spinning at barriers collapse when the 2 cores are shared (8x slower measured);
# passive waiting keeps both threads useful. Subprocesses of the tests inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Cache bytecode even where the shell sets PYTHONDONTWRITEBYTECODE (the Makefile unexports it too): set-up
# installs with --no-compile, so otherwise this process and every vLLM/Megatron subprocess recompile them.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# session fixtures shared across stages' tests (micro chain, memorised datasets, a target that passes tasks)
pytest_plugins = ["tests.trained_fixtures"]
