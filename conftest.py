"""Repo-wide pytest set-up, loaded before any test module imports torch."""
import os

# OpenMP threads spinning at barriers collapse when the 2 cores are shared (8x slower measured);
# passive waiting keeps both threads useful. Subprocesses of the tests inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
