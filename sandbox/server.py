"""HTTP face of a Pool, so trainers on many nodes can share sandboxes on CPU nodes.

    SANDBOX_TOKEN=$(openssl rand -hex 16) python -m sandbox serve --host 127.0.0.1 --port 8600 --slots 8
    # client side: Client("http://HOST:8600", token=...)  (see client.py)

It runs arbitrary code on request, hence: binds 127.0.0.1 unless --host says otherwise; every request
needs `Authorization: Bearer <token>` (constant-time compare) or gets 401; bodies over --max-body-mb
get 413; a client (X-Sandbox-Client header, else its IP) with more than --per-client requests in
flight gets 429; more than slots + --max-queue requests in flight get 503. 429/503 carry
{"retryable": true} and Retry-After, and the Client retries them with backoff.

Endpoints (JSON): GET /health; POST /run (Task) -> Result; POST /session {files, limits, env} ->
{session_id}; POST /session/<id>/run {command, timeout_s} -> Result; DELETE /session/<id>.
"""
from __future__ import annotations

import hmac
import json
import logging
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .pool import Pool
from .task import Limits, Task

log = logging.getLogger("sandbox.server")


class Admission:
    """Counts requests in flight, globally and per client; refuses instead of queueing without limit."""

    def __init__(self, capacity: int, per_client: int):
        self.capacity, self.per_client = capacity, per_client
        self.total = 0
        self.by_client: dict[str, int] = {}
        self.lock = threading.Lock()
        self.rejected = 0

    def enter(self, client: str) -> str | None:
        with self.lock:
            if self.by_client.get(client, 0) >= self.per_client:
                self.rejected += 1
                return "429"
            if self.total >= self.capacity:
                self.rejected += 1
                return "503"
            self.total += 1
            self.by_client[client] = self.by_client.get(client, 0) + 1
            return None

    def leave(self, client: str) -> None:
        with self.lock:
            self.total -= 1
            n = self.by_client.get(client, 1) - 1
            if n:
                self.by_client[client] = n
            else:
                self.by_client.pop(client, None)


class SandboxServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, addr, pool: Pool, token: str, max_body: int, per_client: int, max_queue: int,
                 max_sessions: int, session_idle_s: float):
        if not token or len(token) < 16:
            raise ValueError("the server token must be at least 16 characters (e.g. `openssl rand -hex 16`)")
        super().__init__(addr, Handler)
        self.pool, self.token, self.max_body = pool, token.encode(), max_body
        self.admission = Admission(len(pool.slots) + max_queue, per_client)
        self.sessions: dict[str, list] = {}     # id -> [Session, lock, last_used]
        self.sessions_lock = threading.Lock()
        self.max_sessions, self.session_idle_s = max_sessions, session_idle_s
        self._reaper = threading.Thread(target=self._reap_sessions, daemon=True)
        self._reaper.start()

    def _reap_sessions(self) -> None:
        while True:
            time.sleep(5)
            now = time.monotonic()
            with self.sessions_lock:
                idle = [k for k, v in self.sessions.items() if now - v[2] > self.session_idle_s]
            for k in idle:
                self.close_session(k)

    def close_session(self, sid: str) -> bool:
        with self.sessions_lock:
            entry = self.sessions.pop(sid, None)
        if entry is None:
            return False
        with entry[1]:
            entry[0].close()
        return True

    def server_close(self) -> None:
        for sid in list(self.sessions):
            self.close_session(sid)
        super().server_close()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"     # keep-alive: a client reuses its connection across tasks
    timeout = 60                      # a stalled client cannot hold a handler thread forever
    server: SandboxServer

    def log_message(self, fmt, *args) -> None:  # quiet by default; errors are logged explicitly
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, code: int, obj: dict, headers: dict | None = None) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        got = self.headers.get("Authorization", "")
        given = got[7:].encode() if got.startswith("Bearer ") else b""
        return hmac.compare_digest(given, self.server.token)

    def _body(self) -> dict | None:
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if n < 0 or n > self.server.max_body:
            self.close_connection = True
            self._send(413, {"error": f"body of {n} bytes exceeds the server limit of {self.server.max_body}; "
                                      "send fewer/smaller files or raise --max-body-mb", "retryable": False})
            return None
        try:
            obj = json.loads(self.rfile.read(n) or b"{}")
        except ValueError as e:
            self._send(400, {"error": f"body is not JSON: {e}", "retryable": False})
            return None
        if not isinstance(obj, dict):
            self._send(400, {"error": "body must be a JSON object", "retryable": False})
            return None
        return obj

    def _handle(self, method: str) -> None:
        if not self._authorized():
            self.close_connection = True
            self._send(401, {"error": "missing or wrong token: send 'Authorization: Bearer <token>'",
                             "retryable": False})
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path == "/health":
            a = self.server.admission
            self._send(200, {"tier": self.server.pool.tier, "slots": len(self.server.pool.slots),
                             "env_hash": self.server.pool.rt.env_hash, "in_flight": a.total,
                             "rejected": a.rejected, "sessions": len(self.server.sessions)})
            return
        body = self._body() if method == "POST" else {}
        if body is None:
            return
        client = self.headers.get("X-Sandbox-Client") or self.client_address[0]
        verdict = self.server.admission.enter(client)
        if verdict:
            msg = ("too many requests in flight from this client" if verdict == "429"
                   else "server overloaded: all slots busy and the queue is full")
            self._send(int(verdict), {"error": msg + "; retry later", "retryable": True}, {"Retry-After": "1"})
            return
        try:
            self._route(method, path, body)
        except ValueError as e:
            self._send(400, {"error": str(e), "retryable": False})
        except Exception as e:  # noqa: BLE001
            log.exception("sandbox server error")
            self._send(500, {"error": f"{type(e).__name__}: {e}", "retryable": True})
        finally:
            self.server.admission.leave(client)

    def _route(self, method: str, path: str, body: dict) -> None:
        srv = self.server
        parts = path.strip("/").split("/")
        if method == "POST" and path == "/run":
            self._send(200, srv.pool.run(Task.from_dict(body)).to_dict())
        elif method == "POST" and path == "/session":
            with srv.sessions_lock:
                if len(srv.sessions) >= srv.max_sessions:
                    self._send(503, {"error": "too many open sessions; close one or retry later", "retryable": True},
                               {"Retry-After": "1"})
                    return
            files = body.get("files") or {}
            task = Task.from_dict({"cmd": ["bash"], "files": files, "limits": body.get("limits") or Limits(wall_s=600, cpu_s=600).to_dict(),
                                   "env": body.get("env") or {}})
            sess = srv.pool.session(task.files, task.limits, task.env).__enter__()
            sid = secrets.token_hex(12)
            with srv.sessions_lock:
                srv.sessions[sid] = [sess, threading.Lock(), time.monotonic()]
            self._send(200, {"session_id": sid})
        elif len(parts) == 3 and parts[0] == "session" and method == "POST" and parts[2] == "run":
            entry = srv.sessions.get(parts[1])
            if entry is None:
                self._send(404, {"error": f"no session {parts[1]!r} (closed or idle-reaped)", "retryable": False})
                return
            cmd = body.get("command")
            if not isinstance(cmd, str):
                raise ValueError("session run needs {\"command\": \"...\"}")
            timeout = body.get("timeout_s")
            with entry[1]:
                entry[2] = time.monotonic()
                r = entry[0].run(cmd, timeout_s=timeout)
                entry[2] = time.monotonic()
            self._send(200, r.to_dict())
        elif len(parts) == 2 and parts[0] == "session" and method == "DELETE":
            self._send(200, {"closed": srv.close_session(parts[1])})
        else:
            self._send(404, {"error": f"no route {method} {path}", "retryable": False})

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


def serve(pool: Pool, host: str, port: int, token: str, max_body_mb: float = 16, per_client: int | None = None,
          max_queue: int | None = None, max_sessions: int | None = None, session_idle_s: float = 600,
          ready=None) -> SandboxServer:
    """Build the server (call .serve_forever()). `ready(server)` is called once bound (port 0 = any)."""
    n = len(pool.slots)
    srv = SandboxServer((host, port), pool, token, int(max_body_mb * 2**20), per_client or 2 * n,
                        max_queue if max_queue is not None else 4 * n, max_sessions or max(1, n // 2), session_idle_s)
    if ready:
        ready(srv)
    return srv


