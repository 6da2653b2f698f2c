"""Command line: run one task in a fresh sandbox, serve a pool over HTTP, or show the probed tier.

    python -m sandbox run [--wall-s 5 --memory-mb 256 --network --file main.py=@local.py --collect out.txt ...] -- python3 main.py
    python -m sandbox run --script 'echo hi && ls'
    SANDBOX_TOKEN=... python -m sandbox serve --host 127.0.0.1 --port 8600 --slots 8 [--audit-log PATH]
    python -m sandbox probe

`run` prints the Result as JSON and exits 0, or 2 on an infra error (the task's own exit code is in
the JSON, never in ours).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import sys

from .task import Limits, Task

LIMIT_FLAGS = {f: t for f, t in [("wall_s", float), ("cpu_s", float), ("memory_mb", int), ("file_size_mb", int),
                                  ("nproc", int), ("nofile", int), ("output_bytes", int), ("disk_mb", int),
                                  ("collect_bytes", int)]}


def _parse_file(spec: str) -> tuple[str, str | bytes]:
    if "=" not in spec:
        raise SystemExit(f"--file {spec!r}: use NAME=TEXT or NAME=@LOCAL_PATH")
    name, val = spec.split("=", 1)
    if val.startswith("@"):
        try:
            with open(val[1:], "rb") as fh:
                return name, fh.read()
        except OSError as e:
            raise SystemExit(f"--file {spec!r}: cannot read {val[1:]!r}: {e.strerror}")
    return name, val


def _limits(a: argparse.Namespace) -> Limits:
    kw = {k: getattr(a, k) for k in LIMIT_FLAGS if getattr(a, k) is not None}
    return Limits(network=a.network, **kw)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    cmd: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, cmd = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run one task in a fresh sandbox; print the Result JSON")
    for k, t in LIMIT_FLAGS.items():
        r.add_argument("--" + k.replace("_", "-"), type=t, default=None, help=f"Limits.{k}")
    r.add_argument("--network", action="store_true", help="allow network (off by default)")
    r.add_argument("--script", help="bash script instead of a command after --")
    r.add_argument("--file", action="append", default=[], help="NAME=TEXT or NAME=@LOCAL_PATH placed in the work dir")
    r.add_argument("--stdin-file", help="local file fed to the task's stdin ('-' = our stdin)")
    r.add_argument("--env", action="append", default=[], help="NAME=VALUE for the task")
    r.add_argument("--collect", action="append", default=[], help="work-dir file to return in read_files")
    r.add_argument("--tier", default="auto", help="auto | bwrap | unshare | rlimit")
    s = sub.add_parser("serve", help="serve a pool over HTTP (token required)")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; 0.0.0.0 exposes it)")
    s.add_argument("--port", type=int, default=8600)
    s.add_argument("--slots", type=int, default=os.cpu_count() or 2)
    s.add_argument("--tier", default="auto")
    s.add_argument("--token-file", help="file holding the shared secret (else $SANDBOX_TOKEN, else generated)")
    s.add_argument("--max-body-mb", type=float, default=16)
    s.add_argument("--per-client", type=int, default=None, help="requests in flight per client (default 2*slots)")
    s.add_argument("--max-queue", type=int, default=None, help="requests waiting beyond the slots (default 4*slots)")
    s.add_argument("--audit-log", default="results/sandbox/audit.jsonl")
    sub.add_parser("probe", help="print the tier this machine gets and the pinned environment")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)

    from .pool import Pool
    if a.what == "probe":
        with Pool(slots=1) as pool:
            print(json.dumps({"tier": pool.tier, "env_hash": pool.rt.env_hash, "env": pool.env_description,
                              "unavailable": pool.probe_errors}, indent=2))
        return 0
    if a.what == "run":
        if bool(cmd) == bool(a.script):
            raise SystemExit("give a command after -- or --script '...', not both/neither "
                             "(e.g. python -m sandbox run -- python3 -c 'print(1)')")
        stdin: bytes = b""
        if a.stdin_file:
            stdin = sys.stdin.buffer.read() if a.stdin_file == "-" else open(a.stdin_file, "rb").read()
        env = {}
        for e in a.env:
            if "=" not in e:
                raise SystemExit(f"--env {e!r}: use NAME=VALUE")
            k, v = e.split("=", 1)
            env[k] = v
        try:
            task = Task(cmd=cmd or None, script=a.script, files=dict(_parse_file(f) for f in a.file), stdin=stdin,
                        env=env, limits=_limits(a), collect=a.collect)
        except ValueError as e:
            raise SystemExit(str(e))
        with Pool(slots=1, tier=a.tier) as pool:
            res = pool.run(task)
        print(json.dumps(res.to_dict(), indent=2))
        return 2 if res.infra_error else 0
    # serve
    token = os.environ.get("SANDBOX_TOKEN", "")
    if a.token_file:
        token = open(a.token_file).read().strip()
    if not token:
        token = secrets.token_hex(16)
        print(f"sandbox: no token given; generated one: {token}", file=sys.stderr)
    from .server import serve
    with Pool(slots=a.slots, tier=a.tier, audit_log=a.audit_log) as pool:
        srv = serve(pool, a.host, a.port, token, a.max_body_mb, a.per_client, a.max_queue)
        print(f"sandbox: serving {pool.tier} x{a.slots} on http://{a.host}:{srv.server_address[1]}", file=sys.stderr)
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            srv.server_close()
    return 0
