"""The seccomp policy of every tier, compiled once to BPF with `pyseccomp` (libseccomp).

Denied with EPERM/EACCES (not killed, so programs see a normal error):
- socket(AF_INET / AF_INET6) unless Limits.network: no TCP/UDP/DNS even if a namespace leaks;
- ptrace, process_vm_readv/writev: no reading other processes' memory;
- io_uring (it can open sockets behind the socket() rule), bpf, perf_event_open, userfaultfd,
  keyctl/add_key/request_key, kexec, module loading: kernel attack surface a task never needs.
Returns None when pyseccomp/libseccomp is missing (the tier then logs "seccomp: off").
"""
from __future__ import annotations

import errno
import os
import socket
import tempfile

ALWAYS_DENIED = ["ptrace", "process_vm_readv", "process_vm_writev", "io_uring_setup", "io_uring_enter",
                 "io_uring_register", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
                 "request_key", "kexec_load", "kexec_file_load", "init_module", "finit_module",
                 "delete_module", "open_by_handle_at", "name_to_handle_at"]


def compile_bpf(network: bool) -> bytes | None:
    try:
        import pyseccomp as sc
    except Exception:  # noqa: BLE001 - missing module or missing libseccomp.so
        return None
    f = sc.SyscallFilter(sc.ALLOW)
    for name in ALWAYS_DENIED:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except Exception:  # noqa: BLE001 - syscall unknown on this arch/kernel headers
            pass
    if not network:
        for fam in (socket.AF_INET, socket.AF_INET6):
            f.add_rule(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.EQ, fam))
    with tempfile.TemporaryFile() as fh:
        f.export_bpf(fh)
        fh.flush()
        fh.seek(0)
        return fh.read()


def write_bpf(bpf: bytes, directory: str, network: bool) -> str:
    """Store the program as a file that bwrap reads via --seccomp FD (one fresh fd per spawn)."""
    path = os.path.join(directory, f"seccomp-{'net' if network else 'nonet'}.bpf")
    with open(path, "wb") as fh:
        fh.write(bpf)
    return path
