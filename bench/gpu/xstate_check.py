"""Why gdb cannot call into a process on this machine: compare the XSAVE size
the CPU reports (CPUID leaf 0xD, what gdb sizes its register buffer by) with
the size the kernel's ptrace wants (PTRACE_GETREGSET NT_X86_XSTATE returns
it), and try PTRACE_SETREGSET with each on a child of our own.

Linux's xstateregs_set() answers EFAULT ("Bad address") unless the buffer is
exactly the kernel's user XSAVE size; gdb 13 on the H200 machine failed with
"Couldn't write extended state status: Bad address". x86-64 Linux only;
prints JSON.

    python3 bench/gpu/xstate_check.py
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import signal
import time
from typing import Any

PTRACE_ATTACH, PTRACE_DETACH = 16, 17
PTRACE_GETREGSET, PTRACE_SETREGSET = 0x4204, 0x4205
NT_X86_XSTATE = 0x202

# cpuid(eax=leaf, ecx=sub) -> ebx (rbx saved); xgetbv(ecx=0) -> edx:eax
CPUID_EBX = b"\x53\x89\xf8\x89\xf1\x0f\xa2\x89\xd8\x5b\xc3"
CPUID_ECX = b"\x53\x89\xf8\x89\xf1\x0f\xa2\x89\xc8\x5b\xc3"
XGETBV = b"\x89\xf9\x0f\x01\xd0\x48\xc1\xe2\x20\x48\x09\xd0\xc3"


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def machine_code(code: bytes, restype: Any, *argtypes: Any) -> Any:
    buf = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    buf.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    fn = ctypes.CFUNCTYPE(restype, *argtypes)(addr)
    fn._keep = buf  # the page lives as long as the function
    return fn


def main() -> None:
    out: dict[str, Any] = {}
    ebx = machine_code(CPUID_EBX, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)
    ecx = machine_code(CPUID_ECX, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)
    xgetbv = machine_code(XGETBV, ctypes.c_uint64, ctypes.c_uint32)
    out["cpuid_0xd_ebx_size_for_xcr0"] = ebx(0xD, 0)
    out["cpuid_0xd_ecx_max_size"] = ecx(0xD, 0)
    out["xcr0"] = hex(xgetbv(0))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    try:
        if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
            out["attach_error"] = os.strerror(ctypes.get_errno())
            return
        os.waitpid(pid, 0)
        buf = ctypes.create_string_buffer(1 << 16)
        iov = Iovec(ctypes.addressof(buf), len(buf))
        rc = libc.ptrace(PTRACE_GETREGSET, pid, NT_X86_XSTATE, ctypes.byref(iov))
        out["getregset"] = "ok" if rc == 0 else os.strerror(ctypes.get_errno())
        kernel_size = int(iov.len)
        out["kernel_xstate_size"] = kernel_size
        out["xcr0_in_xsave_area"] = hex(int.from_bytes(buf.raw[464:472], "little"))
        for label, size in (
            ("kernel size", kernel_size),
            ("cpuid ebx size", out["cpuid_0xd_ebx_size_for_xcr0"]),
            # gdb 13's fixed buffer, X86_XSTATE_MAX_SIZE (AVX-512 + PKU); the
            # kernel clamps a larger buffer to its size, never a smaller one
            ("gdb13 size 2696", 2696),
        ):
            iov2 = Iovec(ctypes.addressof(buf), size)
            rc = libc.ptrace(PTRACE_SETREGSET, pid, NT_X86_XSTATE, ctypes.byref(iov2))
            out[f"setregset_with_{label.replace(' ', '_')}"] = (
                "ok" if rc == 0 else os.strerror(ctypes.get_errno())
            )
        libc.ptrace(PTRACE_DETACH, pid, None, None)
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
