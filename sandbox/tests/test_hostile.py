"""Hostile programs, one property per test, on every tier the machine offers. Each must be contained
and (checked by the `pool` fixture after every test) leave no process of a slot uid behind."""
from __future__ import annotations

import os
import socket
import subprocess
import threading
import time

import pytest

from sandbox import Limits, Task
from sandbox.tests.conftest import unavailable

SECRET = "sbx-host-secret-4b1d"
os.environ["SANDBOX_TEST_SECRET"] = SECRET        # must never reach a task


def py(code: str, **lim) -> Task:
    return Task(cmd=["python3", "-c", code], limits=Limits(**{"wall_s": 10, **lim}))


def test_fork_bomb_is_contained(pool):
    t0 = time.monotonic()
    r = pool.run(Task(script=":(){ :|:& };:; sleep 1", limits=Limits(wall_s=3, nproc=32)))
    assert r.infra_error is None
    assert time.monotonic() - t0 < 6
    ok = pool.run(py("print('alive')"))            # the slot and the host still work
    assert ok.stdout == "alive\n"


def test_python_fork_loop_hits_process_limit(pool):
    code = ("import os,sys\nn=0\ntry:\n    while n<10000:\n        if os.fork()==0:\n            import time; time.sleep(5); os._exit(0)\n"
            "        n+=1\nexcept OSError as e:\n    print('blocked', n, e.errno)\n")
    r = pool.run(py(code, nproc=16, wall_s=8))
    assert r.stdout.startswith("blocked"), r
    assert int(r.stdout.split()[1]) + 1 <= 16      # forked children + the main process


def test_cpu_loop_is_killed_at_cpu_limit(pool):
    r = pool.run(py("while True: pass", cpu_s=1, wall_s=60))   # generous wall: the machine is shared
    assert r.exit_code is None and r.signal is not None, r
    assert r.limit_hit == "cpu" and not r.timed_out, r
    assert r.cpu_s < 3, r                            # hard RLIMIT_CPU is cpu_s + 1


def has_memory_cgroup(pool) -> bool:
    return all(s.cg is not None and "memory" in s.cg.dirs for s in pool.slots)


def test_memory_bomb_is_ended_by_the_memory_cap(pool):
    # touches 16 MiB at a time up to 1 GiB (bounded, so an uncapped run cannot hurt the host), then says so and
    # exits 0; the wall limit is far beyond the ~0.5 s the cap takes, so only the memory cap can have ended it
    code = ("x=[]\nfor i in range(64):\n    x.append(b'x' * (16 << 20))\n    print(i, flush=True)\n"
            "print('ESCAPED the memory cap', flush=True)")
    r = pool.run(py(code, memory_mb=128, wall_s=120))
    assert r.infra_error is None and not r.timed_out and r.wall_s < 30, r
    assert "ESCAPED" not in r.stdout, r
    if has_memory_cgroup(pool):     # the cgroup's OOM kill, seen by its failcnt
        assert r.signal == 9 and r.exit_code is None and r.limit_hit == "memory", r
        assert 64 <= r.peak_memory_mb <= 128 + 2, r          # it got close to the cap, never past it
        assert len(r.stdout.split()) <= 128 // 16, r         # at most 8 chunks of 16 MiB were ever held
    else:                           # RLIMIT_AS (memory_mb + 64 MiB of address space): the allocation fails inside
        assert r.exit_code == 1 and "MemoryError" in r.stderr, r
        assert len(r.stdout.split()) <= (128 + 64) // 16, r


def test_disk_fill_stops_at_disk_limit(pool):
    r = pool.run(Task(script="dd if=/dev/zero of=big bs=1M count=200; echo dd_rc=$?; stat -c %s big",
                      limits=Limits(disk_mb=32, file_size_mb=1024, wall_s=20)))
    # the task itself was not killed (no signal, no limit): dd failed on a full disk and the script went on
    assert r.exit_code == 0 and r.signal is None and r.limit_hit is None and not r.timed_out, r
    dd_rc, size = r.stdout.split()
    assert dd_rc != "dd_rc=0" and "No space left" in r.stderr, r
    assert 24 << 20 <= int(size) <= 32 << 20, r              # filled up to the 32 MiB cap, not beyond
    assert "big" in r.files["created"]


def test_file_size_limit_kills_large_write(pool):
    r = pool.run(Task(script="head -c 20000000 /dev/zero > f", limits=Limits(file_size_mb=4, wall_s=10)))
    assert r.exit_code != 0
    assert "File size limit" in r.stderr or r.signal == 25


def test_huge_output_is_truncated_and_bounded(pool):
    r = pool.run(Task(cmd=["yes"], limits=Limits(output_bytes=10_000, wall_s=20)))
    assert r.stdout_truncated and len(r.stdout) == 10_000
    assert r.limit_hit in ("output", "wall")
    assert r.wall_s < 20


def test_tcp_to_host_loopback_listener_fails(pool):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    code = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1',{port}),timeout=2); print('CONNECTED')\n"
            "except OSError as e: print('refused', type(e).__name__)")
    control = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True)
    assert "CONNECTED" in control.stdout             # positive control: the listener is reachable from the host
    srv.accept()[0].close()
    r = pool.run(py(code))
    assert r.stdout.startswith("refused"), r
    with pytest.raises(socket.timeout):
        srv.accept()
    srv.close()


def test_dns_lookup_fails(pool):
    code = ("import socket\ntry:\n    print(socket.getaddrinfo('example.com',80)[0][4])\n"
            "except OSError as e: print('nodns', type(e).__name__)\n"
            "try:\n    s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.sendto(b'x',('8.8.8.8',53)); print('UDP SENT')\n"
            "except OSError as e: print('noudp', type(e).__name__)")
    r = pool.run(py(code))
    assert r.stdout.startswith("nodns") and "noudp" in r.stdout, r


def test_network_flag_allows_inet_sockets(pool):
    r = pool.run(py("import socket; socket.socket(); print('ok')", network=True))
    assert r.stdout == "ok\n", r


def test_etc_shadow_is_unreadable(pool):
    r = pool.run(py("print(open('/etc/shadow').read())"))
    assert r.exit_code == 1 and ("PermissionError" in r.stderr or "FileNotFoundError" in r.stderr)
    assert "root:" not in r.stdout


def test_root_home_is_unreadable(pool):
    host_entries = [e for e in os.listdir("/root") if len(e) > 3]
    assert host_entries                                   # positive control: there is something to hide
    r = pool.run(py("import os; print(os.listdir('/root'))"))
    assert r.infra_error is None
    assert not any(e in r.stdout for e in host_entries), r   # denied, absent, or an empty tmpfs


def test_other_slot_work_dir_is_unreadable(pool):
    with pool.session(files={"secret.txt": SECRET}) as sh:
        assert sh.run("cat secret.txt").stdout == SECRET
        other = sh.slot.work.path
        code = (f"import os\nfor p in [{other!r}, {other + '/secret.txt'!r}]:\n    try:\n"
                "        print(os.listdir(p) if os.path.isdir(p) else open(p).read())\n"
                "    except OSError as e: print('denied', type(e).__name__)")
        r = pool.run(py(code))
    assert SECRET not in r.stdout and "secret.txt" not in r.stdout
    assert r.stdout.count("denied") == 2, r


def test_host_environment_secrets_are_not_visible(pool):
    code = ("import os,glob\nprint(dict(os.environ))\nfor f in glob.glob('/proc/*/environ'):\n    try: print(open(f,'rb').read())\n"
            "    except OSError: pass")
    r = pool.run(py(code))
    assert os.environ["SANDBOX_TEST_SECRET"] == SECRET
    assert SECRET not in r.stdout and r.exit_code == 0


def test_writes_outside_work_dir_fail(pool):
    targets = ["/usr/sbx_probe", "/etc/sbx_probe", "/root/sbx_probe", "/sbx_probe", os.getcwd() + "/sbx_probe",
               "/var/sbx_probe"]
    code = (f"for p in {targets!r}:\n    try:\n        open(p,'w').write('x'); print('WROTE', p)\n"
            "    except OSError as e: print('denied', p)")
    r = pool.run(py(code))
    assert "WROTE" not in r.stdout, r
    assert not any(os.path.exists(p) for p in targets)


def test_private_tmp_does_not_reach_host(pool):
    r = pool.run(Task(script="echo x > /tmp/sbx_tmp_probe_$$ && echo wrote"))
    assert r.stdout == "wrote\n"
    # bwrap/unshare: a private tmpfs; rlimit: the shared /tmp, cleaned of the slot uid's files after the task
    assert not [f for f in os.listdir("/tmp") if f.startswith("sbx_tmp_probe_")]


def test_symlink_escape_is_not_followed_by_collect(pool):
    r = pool.run(Task(script="ln -s /etc/shadow out.txt; ln -s / rootlink; echo done",
                      collect=["out.txt", "rootlink/etc/shadow", "rootlink/etc/hostname"]))
    assert r.stdout == "done\n"
    assert r.read_files == {}
    assert sorted(r.files["created"]) == ["out.txt", "rootlink"]


def test_daemon_left_running_is_killed(pool):
    r = pool.run(Task(script="(setsid sleep 300 >/dev/null 2>&1 &); nohup sleep 301 >/dev/null 2>&1 & "
                             "python3 -c 'import os\nif os.fork()==0:\n os.setsid()\n if os.fork()==0:\n  import time; time.sleep(302)' ; echo started"))
    assert r.stdout == "started\n" and r.wall_s < 5
    # the pool fixture asserts that no process of the slot uids remains


def test_kill_minus_one_does_not_escape(pool):
    witness = subprocess.Popen(["sleep", "30"])
    r = pool.run(Task(script="kill -9 -1; echo after"))
    assert r.infra_error is None
    assert witness.poll() is None                    # a host process of another uid survived
    witness.kill()
    witness.wait()
    assert pool.run(py("print(2)")).stdout == "2\n"  # and the pool is fine


def test_ptrace_of_host_process_fails(pool):
    target = os.getpid()
    code = (f"import ctypes,os\nlibc=ctypes.CDLL(None,use_errno=True)\nrc=libc.ptrace(16,{target},0,0)\n"
            f"print('rc',rc,ctypes.get_errno())\ntry:\n    open('/proc/{target}/mem','rb').read(1); print('MEM')\n"
            "except OSError as e: print('nomem')")
    r = pool.run(py(code))
    assert r.stdout.startswith("rc -1") and "nomem" in r.stdout, r


def test_other_processes_under_proc_are_hidden_or_unreadable(pool):
    me = os.getpid()
    code = (f"import os\ntry:\n    print(open('/proc/{me}/cmdline','rb').read()[:0], 'VISIBLE')\nexcept OSError: print('hidden')\n"
            f"try:\n    print(open('/proc/{me}/environ','rb').read()); print('ENVIRON')\nexcept OSError: print('noenv')")
    r = pool.run(py(code))
    assert "ENVIRON" not in r.stdout and SECRET not in r.stdout
    if pool.tier == "bwrap":
        assert r.stdout.startswith("hidden"), r          # own pid namespace: host pids do not exist
        assert len([p for p in os.listdir("/proc") if p.isdigit()]) > 5


def test_wall_timeout_kills_whole_tree_within_1s(pool):
    t0 = time.monotonic()
    r = pool.run(Task(script="sleep 100 & (setsid sleep 100 &); python3 -c 'while True: pass'",
                      limits=Limits(wall_s=1.0, cpu_s=30)))
    elapsed = time.monotonic() - t0
    assert r.timed_out and r.limit_hit == "wall" and r.signal == 9
    assert 1.0 <= r.wall_s < 2.0, r.wall_s
    assert elapsed < 2.5


MANY_BOMBS = """
import os, select
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
kids = []
for i in range(8):
    pid = os.fork()
    if pid == 0:                                  # hold 40 MiB until every sibling holds its own or is dead
        os.close(go_w)
        x = b'x' * (40 << 20)
        os.write(ready_w, bytes([i]))
        os.read(go_r, 1)
        os._exit(0)
    kids.append(pid)
os.close(ready_w)
ready, ends = set(), {}
while len(ready | set(ends)) < 8:
    if select.select([ready_r], [], [], 0.05)[0]:
        ready.update(os.read(ready_r, 8))
    for i, k in enumerate(kids):
        if i not in ends and os.waitpid(k, os.WNOHANG)[0]:
            ends[i] = 'killed'
os.close(go_w)                                    # release the survivors
for i, k in enumerate(kids):
    if i not in ends:
        st = os.waitpid(k, 0)[1]
        ends[i] = 'exited' if st == 0 else 'killed'
print('killed', list(ends.values()).count('killed'), 'exited', list(ends.values()).count('exited'))
"""


def test_memory_bomb_of_many_processes_is_capped_as_a_whole(pool):
    # 8 children try to hold 40 MiB each at the same time (320 MiB against a 128 MiB cap); each waits until all
    # of them hold theirs or are dead, so at most 3 can survive; nothing sleeps, so the task ends on its own
    # well inside the wall limit, and only the memory cap kills
    if not has_memory_cgroup(pool):
        unavailable("no memory cgroup: RLIMIT_AS caps each process, not the task as a whole", pool.tier)
    code = MANY_BOMBS
    r = pool.run(py(code, memory_mb=128, wall_s=60))
    assert r.infra_error is None and not r.timed_out and r.wall_s < 30, r
    assert r.peak_memory_mb <= 128 + 2, r
    if r.exit_code == 0:        # the OOM killer took children (the largest), the parent saw it
        words = r.stdout.split()
        assert words[0] == "killed" and int(words[1]) >= 8 - 128 // 40 and int(words[1]) + int(words[3]) == 8, r
    else:                       # or it took the parent too: then the whole task is reported as a memory kill
        assert r.signal == 9 and r.limit_hit == "memory", r
    assert pool.run(py("print('pool ok')")).stdout == "pool ok\n"
