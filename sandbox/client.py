"""Client of `python -m sandbox serve`: the same run/map/submit/session interface as Pool.

    from sandbox import Client, Task
    c = Client("http://127.0.0.1:8600", token=os.environ["SANDBOX_TOKEN"])
    r = c.run(Task(cmd=["python3", "-c", "print(1)"]))
    rs = c.map(tasks)                       # up to `concurrency` requests at once, order kept
    with c.session(files={...}) as sh: sh.run("ls")

Overload answers (429/503) and dropped connections are retried with jittered backoff until
`retry_s`; if the server still cannot be reached the Result carries `infra_error` (the task's outcome
is unknown, never a task failure). A wrong token or a bad task raises at once (config bugs).
"""
from __future__ import annotations

import http.client
import json
import os
import random
import threading
import time
import urllib.parse
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Iterable

from .result import Result
from .task import Limits, Task


class SandboxClientError(RuntimeError):
    """A non-retryable refusal (bad token, bad request): fix the call, retrying will not help."""


class Client:
    def __init__(self, url: str, token: str | None = None, concurrency: int = 8, timeout_s: float = 900.0,
                 retry_s: float = 300.0, client_id: str | None = None):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"Client url {url!r} must look like http://HOST:PORT")
        self.host, self.port = u.hostname, u.port or 80
        self.token = token or os.environ.get("SANDBOX_TOKEN", "")
        if not self.token:
            raise ValueError("Client needs token=... or $SANDBOX_TOKEN (the server's shared secret)")
        self.timeout_s, self.retry_s = timeout_s, retry_s
        self.client_id = client_id or f"{os.uname().nodename}:{os.getpid()}"
        self._local = threading.local()
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="sandbox-client")

    # ---- transport ----------------------------------------------------------------------------
    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = self._local.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        return c

    def _drop_conn(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        """One JSON call with retries on overload/connection loss. Raises SandboxClientError or TimeoutError."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
                   "X-Sandbox-Client": self.client_id}
        end, delay, last = time.monotonic() + self.retry_s, 0.05, ""
        while True:
            try:
                c = self._conn()
                c.request(method, path, body=data, headers=headers)
                resp = c.getresponse()
                raw = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self._drop_conn()
                try:
                    obj = json.loads(raw or b"{}")
                except ValueError:
                    obj = {"error": raw[:200].decode(errors="replace"), "retryable": resp.status >= 500}
                if resp.status == 200:
                    return obj
                if not obj.get("retryable"):
                    raise SandboxClientError(f"HTTP {resp.status} from sandbox server: {obj.get('error')}")
                last = f"HTTP {resp.status}: {obj.get('error')}"
            except (ConnectionError, http.client.HTTPException, OSError) as e:
                if isinstance(e, SandboxClientError):
                    raise
                self._drop_conn()
                last = f"{type(e).__name__}: {e}"
            if time.monotonic() + delay > end:
                raise TimeoutError(f"sandbox server at {self.host}:{self.port} kept refusing for {self.retry_s}s: {last}")
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    # ---- Pool interface -----------------------------------------------------------------------
    def run(self, task: Task) -> Result:
        if not isinstance(task, Task):
            raise TypeError(f"expected a sandbox.Task, got {type(task).__name__}")
        try:
            return Result.from_dict(self.request("POST", "/run", task.to_dict()))
        except TimeoutError as e:
            return Result.infra(str(e), task_hash=task.hash(), task_id=task.id)

    def submit(self, task: Task) -> "Future[Result]":
        return self._executor.submit(self.run, task)

    def map(self, tasks: Iterable[Task]) -> list[Result]:
        futs = [self.submit(t) for t in tasks]
        return [f.result() for f in futs]

    def health(self) -> dict[str, Any]:
        return self.request("GET", "/health")

    def session(self, files: dict[str, str | bytes] | None = None, limits: Limits | None = None,
                env: dict[str, str] | None = None) -> "RemoteSession":
        return RemoteSession(self, files or {}, limits or Limits(wall_s=600.0, cpu_s=600.0), env or {})

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._drop_conn()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RemoteSession:
    def __init__(self, client: Client, files: dict, limits: Limits, env: dict[str, str]):
        task = Task(cmd=["bash"], files=files, limits=limits, env=env)   # validates locally first
        self.client, self._spec, self.id = client, task.to_dict(), None

    def __enter__(self) -> "RemoteSession":
        self.id = self.client.request("POST", "/session", {k: self._spec[k] for k in ("files", "limits", "env")})["session_id"]
        return self

    def run(self, command: str, timeout_s: float | None = None) -> Result:
        if self.id is None:
            raise RuntimeError("session is not open; use `with client.session(...) as sh:`")
        return Result.from_dict(self.client.request("POST", f"/session/{self.id}/run",
                                                    {"command": command, "timeout_s": timeout_s}))

    def close(self) -> None:
        if self.id is not None:
            try:
                self.client.request("DELETE", f"/session/{self.id}")
            finally:
                self.id = None

    def __exit__(self, *exc) -> None:
        self.close()
