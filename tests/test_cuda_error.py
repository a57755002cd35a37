"""The run's CUDA errors other than out-of-memory get a word that says what
each means and what to do (`cuda_error`): a device-side assert (with the
kernel's own assertion quoted), an illegal memory access, no kernel image
for this GPU (a build without sm_90 on an H200), a CUDA runtime newer than
the driver, a driver/library mismatch in a container after a host update.
torch's texts verbatim. Fails on the old code (no such kind: the session's
death quoting the line, "relaunch" as the only key)."""

from __future__ import annotations

import pytest

from gputui.diagnose import KINDS, diagnose
from gputui.model import Finding, Severity
from test_diagnose import NOW, run

ASSERT_LINES = (
    "../aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce_cuda_kernel_2d: block: "
    "[0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.",
    "Traceback (most recent call last):",
    '  File "train.py", line 77, in <module>',
    "RuntimeError: CUDA error: device-side assert triggered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the "
    "stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
)


def _cuda(tail: tuple[str, ...], **kw: object) -> Finding | None:
    snap = run(session="dead", dead_status=1, log_tail=tail, **kw)  # type: ignore[arg-type]
    return next((f for f in diagnose(snap, NOW) if f.kind == "cuda_error"), None)


def test_a_device_side_assert_is_an_index_out_of_range_with_its_assertion() -> None:
    snap = run(session="dead", dead_status=1, log_tail=ASSERT_LINES)
    first = next(f for f in diagnose(snap, NOW) if f.severity != Severity.INFO)
    assert first.kind == "cuda_error" and first.severity == Severity.ERROR, first
    assert first.title.startswith("CUDA error at step 100: device-side assert triggered — an index")
    assert "the kernel's assertion: Assertion `t >= 0 && t < n_classes` failed" in first.evidence
    assert "CUDA_LAUNCH_BLOCKING=1" in first.fix and "num_classes" in first.fix
    assert KINDS["cuda_error"].alerts and KINDS["cuda_error"].host_word == "dead"


@pytest.mark.parametrize(
    ("line", "means", "fix"),
    [
        (
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            "outside its memory",
            "Xid",
        ),
        (
            "RuntimeError: CUDA error: no kernel image is available for execution on the device",
            "not built for this GPU's architecture",
            "sm_90",
        ),
        (
            "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). "
            "Please update your GPU driver by downloading and installing a new version",
            "newer than the NVIDIA driver",
            "cu118",
        ),
        (
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
            "functions before calling NumCudaDevices() that might have already set an error? "
            "Error 803: system has unsupported display driver / cuda driver combination",
            None,
            None,
        ),
        (
            "Failed to initialize NVML: Driver/library version mismatch",
            "another version than the driver",
            "--no-kernel-module",
        ),
        ("[rank6]: RuntimeError: CUDA error: misaligned address", "misaligned", "custom kernel"),
    ],
)
def test_each_cuda_error_says_what_it_means(line: str, means: str | None, fix: str | None) -> None:
    f = _cuda(("step 99 | loss 2.0", line))
    if means is None:  # not one of the known texts: the session's death says it
        assert f is None
        return
    assert f is not None and means in f.title and fix in f.fix, f.title if f else None


def test_a_cuda_error_line_far_up_a_healthy_log_is_not_news() -> None:
    tail = ("RuntimeError: CUDA error: an illegal memory access was encountered",)
    tail += tuple(f"step {n} | loss 2.0" for n in range(100))
    assert _cuda(tail) is None
    assert _cuda(("CUDA out of memory. Tried to allocate 2.00 GiB",)) is None  # cuda_oom's
