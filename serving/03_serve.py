"""Serve a checkpoint with vLLM's OpenAI-compatible API on 127.0.0.1 (standard or fast variant).

    # tiny CPU: serve the exported standard variant until Ctrl-C
    python -m serving.03_serve --in checkpoints/export
    # the fast variant (quantized target + draft model, from its serving.json)
    python -m serving.03_serve --in checkpoints/fast --port 8001
    # start, run the client smoke test (chat completion through the chat template), stop cleanly
    python -m serving.03_serve --in checkpoints/export --smoke
    # cluster: the same script on a GPU node (serving.json carries the engine arguments)
    python -m serving.03_serve --in checkpoints/fast --host 127.0.0.1 --port 8000

Prints the exact vLLM command, waits for GET /health, prints the base URL. SIGINT/SIGTERM stop
the server's process group (and nothing else). Exit 2 on a bad --in, 1 if the server fails.
"""
from __future__ import annotations

import json
import shlex
import signal
import sys
import tempfile
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m serving.03_serve ...")

from model import cli, manifest  # noqa: E402
from model.config import ConfigError  # noqa: E402
from serving import server  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__, inp="serving/checkpoint directory (hf/, serving.json)")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (keep 127.0.0.1 unless behind a proxy)")
    ap.add_argument("--port", type=int, default=8000, help="port; 0 picks a free one")
    ap.add_argument("--name", default=None, help="served model name (default: the directory name)")
    ap.add_argument("--max-model-len", type=int, default=None, help="context length (default: serving.json / model's)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for /health")
    ap.add_argument("--log", type=Path, default=None, help="server log file (default: a temp file)")
    ap.add_argument("--smoke", action="store_true", help="run the client smoke test, then stop and exit")
    a = ap.parse_args(argv)
    with cli.input_errors(FileNotFoundError):
        manifest.verify(a.inp)
        port = a.port or server.free_port(a.host)
        cmd = server.command(a.inp, host=a.host, port=port, name=a.name, max_model_len=a.max_model_len)
        if not 0 < port < 65536:
            raise ConfigError(f"--port {port} is not a TCP port (1-65535, or 0 for a free one)")
    name = a.name or a.inp.resolve().name
    log = a.log or Path(tempfile.mkstemp(prefix="vllm-serve-", suffix=".log")[1])
    print("$ " + shlex.join(cmd), flush=True)
    proc = server.start(cmd, log)
    stopping = {"sig": None}

    def on_signal(sig, _frame):
        stopping["sig"] = sig
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    url = f"http://{a.host}:{port}"
    try:
        secs = server.wait_healthy(url, proc, log, a.timeout)
        print(f"serving {name} at {url}/v1 (healthy after {secs:.1f} s, pid {proc.pid}, log {log})", flush=True)
        if a.smoke:
            print("smoke: " + json.dumps(server.smoke(url, name)), flush=True)
            return 0
        proc.wait()
        print(f"error: server exited with {proc.returncode}; log {log}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        rc = server.stop(proc)
        print(f"server stopped (exit {rc}); process group {proc.pid} "
              f"{'still alive' if server.group_alive(proc.pid) else 'gone'}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
