"""HTTP server + Client: token, size and concurrency bounds, retryable overload, sessions, volume."""
from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandbox import Client, Limits, Task
from sandbox.client import SandboxClientError
from sandbox.tests.conftest import require_root

TOKEN = "t0ken-for-tests-0123456789abcdef"


@pytest.fixture(scope="module")
def server():
    from sandbox import Pool
    from sandbox.server import serve
    require_root()
    pool = Pool(slots=2)
    srv = serve(pool, "127.0.0.1", 0, TOKEN)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    pool.close()


def url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def raw(srv, method, path, body=b"", headers=None):
    c = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = json.loads(r.read() or b"{}")
    c.close()
    return r.status, data


def test_request_without_token_is_refused(server):
    status, body = raw(server, "POST", "/run", json.dumps(Task(cmd=["true"]).to_dict()).encode())
    assert status == 401 and body["retryable"] is False


def test_request_with_wrong_token_is_refused(server):
    status, _ = raw(server, "GET", "/health", headers={"Authorization": "Bearer " + "x" * len(TOKEN)})
    assert status == 401
    status, _ = raw(server, "GET", "/health", headers={"Authorization": "Bearer " + TOKEN})
    assert status == 200


def test_client_with_wrong_token_raises_without_retrying(server):
    t0 = time.monotonic()
    with pytest.raises(SandboxClientError, match="401"):
        Client(url(server), token="w" * 32).run(Task(cmd=["true"]))
    assert time.monotonic() - t0 < 2


def test_short_token_is_rejected_at_start():
    from sandbox.server import SandboxServer
    with pytest.raises(ValueError, match="16 characters"):
        SandboxServer(("127.0.0.1", 0), None, "short", 1, 1, 1, 1, 1)


def test_oversized_body_is_refused(server):
    old, server.max_body = server.max_body, 1000
    try:
        body = json.dumps(Task(cmd=["true"], files={"big": "x" * 5000}).to_dict()).encode()
        status, data = raw(server, "POST", "/run", body, {"Authorization": "Bearer " + TOKEN})
    finally:
        server.max_body = old
    assert status == 413 and "limit" in data["error"]


def _slow_request(server, client_id):
    body = json.dumps(Task(cmd=["sleep", "1.5"]).to_dict()).encode()
    return raw(server, "POST", "/run", body, {"Authorization": "Bearer " + TOKEN, "X-Sandbox-Client": client_id})


def test_per_client_concurrency_is_bounded(server):
    old, server.admission.per_client = server.admission.per_client, 1
    try:
        with ThreadPoolExecutor(2) as ex:
            first = ex.submit(_slow_request, server, "c1")
            time.sleep(0.3)
            second = _slow_request(server, "c1")
            assert first.result()[0] == 200
    finally:
        server.admission.per_client = old
    assert second[0] == 429 and second[1]["retryable"] is True


def test_overload_answers_retryable_503(server):
    old, server.admission.capacity = server.admission.capacity, 1
    try:
        with ThreadPoolExecutor(2) as ex:
            first = ex.submit(_slow_request, server, "a")
            time.sleep(0.3)
            second = _slow_request(server, "b")
            assert first.result()[0] == 200
    finally:
        server.admission.capacity = old
    assert second[0] == 503 and second[1]["retryable"] is True


def test_client_retries_overload_until_served(server):
    old, server.admission.capacity = server.admission.capacity, 1
    try:
        c = Client(url(server), token=TOKEN, concurrency=4)
        rs = c.map([Task(cmd=["python3", "-c", f"import time; time.sleep(0.2); print({i})"]) for i in range(4)])
    finally:
        server.admission.capacity = old
    assert [r.stdout for r in rs] == [f"{i}\n" for i in range(4)]
    assert server.admission.rejected > 0


def test_remote_session_keeps_state(server):
    c = Client(url(server), token=TOKEN)
    with c.session(files={"f.txt": "data"}) as sh:
        sh.run("cd /tmp && export Z=9")
        r = sh.run("echo $Z; pwd; cat /work/f.txt 2>/dev/null || true")
    assert r.stdout.startswith("9\n/tmp\n")


def _many(server, n_clients: int, n_tasks: int) -> list:
    # a generous wall limit: the property is "all come back"; on a host at load 50 a 10 s limit can
    # legitimately time out an echo (an honest timed_out result, but not what this test is about)
    lim = Limits(wall_s=120)

    def one_client(k):
        c = Client(url(server), token=TOKEN, concurrency=1, client_id=f"client{k}")
        return [(i, c.run(Task(cmd=["echo", f"{k}-{i}"], limits=lim))) for i in range(n_tasks // n_clients)]
    with ThreadPoolExecutor(n_clients) as ex:
        per = list(ex.map(one_client, range(n_clients)))
    return [(k, i, r) for k, rs in enumerate(per) for i, r in rs]


def test_tasks_from_8_concurrent_clients_all_come_back(server):
    got = _many(server, 8, 160)
    assert len(got) == 160
    assert all(r.stdout == f"{k}-{i}\n" and r.infra_error is None for k, i, r in got)


@pytest.mark.slow
def test_2000_tasks_from_8_concurrent_clients_all_come_back(server):
    got = _many(server, 8, 2000)
    bad = [(k, i, r.infra_error, r.stdout, r.exit_code, r.signal, r.timed_out, r.wall_s) for k, i, r in got
           if r.stdout != f"{k}-{i}\n"]  # every field, so a failure under load says what happened
    print(f"\n2000 tasks via server: {len(got)} results, {len(bad)} wrong/infra")
    assert len(got) == 2000 and not bad


def test_cli_serve_binds_loopback_by_default_and_needs_token(tmp_path):
    require_root()
    env = dict(os.environ, SANDBOX_TOKEN=TOKEN)
    p = subprocess.Popen([sys.executable, "-m", "sandbox", "serve", "--port", "0", "--slots", "1",
                          "--audit-log", str(tmp_path / "a.jsonl")], stderr=subprocess.PIPE, text=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        port = None
        for line in p.stderr:
            m = re.search(r"serving .* on http://([\d.]+):(\d+)", line)
            if m:
                assert m.group(1) == "127.0.0.1"
                port = int(m.group(2))
                break
        assert port
        r = Client(f"http://127.0.0.1:{port}", token=TOKEN).run(Task(cmd=["echo", "cli"]))
        assert r.stdout == "cli\n"
        with pytest.raises(SandboxClientError):
            Client(f"http://127.0.0.1:{port}", token="z" * 32).health()
    finally:
        p.terminate()
        p.wait(10)
    assert json.loads((tmp_path / "a.jsonl").read_text().splitlines()[-1])["result"]["exit_code"] == 0
