"""Which CPU kernels computed a float result, and a mode that pins them to code paths every x86-64 CPU has.

Why: the same fp32 training run differs by ~1.4% in perplexity between this project's Intel and AMD machines
(figures/README.md), because torch picks its CPU kernels by the CPU it finds:
- ATen's vectorised ops (softmax, SDPA, norms, ...) by instruction set (AVX512 or AVX2), env ATEN_CPU_CAPABILITY;
- MKL's GEMMs (every Linear) by vendor and instruction set. MKL's "conditional numerical reproducibility"
  branches (env MKL_CBWR) are honoured on Intel only: on AMD EPYC every branch request except COMPATIBLE
  reads back as AUTO and computes the default result (measured, bench_cpu_kernels). COMPATIBLE is the branch
  MKL documents as giving the same results on Intel and non-Intel processors;
- oneDNN's JIT kernels (GELU, bf16 matmuls) by instruction set, env ONEDNN_MAX_CPU_ISA.

`INTERP_CPU_KERNELS=portable` (in the environment before Python starts; `import interp` then sets the three
variables, before torch reads them) pins ATen and oneDNN to AVX2 and MKL to COMPATIBLE. It costs speed (MKL's
COMPATIBLE GEMMs are ~2-3x slower: benchmarks/RESULTS.md, bench_cpu_kernels) and rules out bf16 on the CPU,
whose kernels differ by CPU whatever the settings. Whether it makes Intel and AMD agree bit for bit is measured,
per op, by bench_cpu_kernels on each CPU kind (benchmarks/cpu_fingerprints.json), not assumed: every fingerprinted
op agrees, a 20-step training run does not yet (docs/cpu-kernels.md).

Every result records what ran: `settings()` (in provenance.hardware()["cpu_kernels"]) reads back ATen's capability
and MKL's branch from the running libraries; oneDNN's limit can only be read from the environment."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path

from interp._util.errors import InputError

MODE_VAR = "INTERP_CPU_KERNELS"
NATIVE, PORTABLE = "native", "portable"
MODES = (NATIVE, PORTABLE)
PORTABLE_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_CBWR": "COMPATIBLE"}
# What settings() reads back when PORTABLE_ENV is in effect.
PORTABLE_SETTINGS = {"aten": "AVX2", "onednn_max_isa": "AVX2", "mkl_cbwr": "COMPATIBLE"}
# mkl_cbwr_get(MKL_CBWR_BRANCH) results (mkl_service.h); the STRICT bit (0x10000) is masked off.
MKL_BRANCHES = {0: "OFF", 1: "default", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1",
                8: "SSE4_2", 9: "AVX", 10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1",
                14: "AVX512_E1"}


def requested() -> str:
    """The mode asked for in INTERP_CPU_KERNELS (native when unset); InputError naming the variable otherwise."""
    mode = os.environ.get(MODE_VAR, NATIVE).strip().lower() or NATIVE
    if mode not in MODES:
        raise InputError(f"environment variable {MODE_VAR}={os.environ[MODE_VAR]!r}: choose one of "
                         f"{', '.join(MODES)} (portable: the same CPU kernels on every x86-64 CPU kind, slower), "
                         f"or unset it")
    return mode


def request_from_env() -> None:
    """At `import interp`: under INTERP_CPU_KERNELS=portable, set PORTABLE_ENV's variables that are unset, so
    torch (imported later) reads them. A variable set to something else is left alone: settings() then says
    the kernels are not portable and check() names it. Never imports torch."""
    try:
        mode = requested()
    except InputError:
        return  # reported by check() when a result is about to be recorded: importing must not fail
    if mode == PORTABLE:
        for key, value in PORTABLE_ENV.items():
            os.environ.setdefault(key, value)


@functools.cache
def _mkl_cbwr_get():
    """MKL's mkl_cbwr_get, exported by libtorch_cpu.so in the x86 wheels; None where it is absent."""
    torch = sys.modules["torch"]
    library = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    try:
        function = ctypes.CDLL(str(library)).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_int], ctypes.c_int
    return function


def mkl_branch() -> str | None:
    """The branch MKL's GEMMs run on (what it reads back, not what was asked), None without MKL."""
    function = _mkl_cbwr_get()
    if function is None:
        return None
    code = function(1)  # MKL_CBWR_BRANCH
    return MKL_BRANCHES.get(code & 0xFFFF, str(code))


def settings() -> dict[str, object] | None:
    """The CPU kernels in effect, with `mode` portable when every one matches PORTABLE_SETTINGS; None when torch
    is not imported (this never imports it). ATen's capability and MKL's branch are read back from the
    libraries; oneDNN's limit is the environment's (oneDNN has no query for it)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    found = {"aten": torch.backends.cpu.get_cpu_capability(), "mkl_cbwr": mkl_branch(),
             "onednn_max_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "default")}
    portable = all(found[key] == value for key, value in PORTABLE_SETTINGS.items())
    return {"mode": PORTABLE if portable else NATIVE, **found}


def check() -> dict[str, object] | None:
    """settings(), or InputError when INTERP_CPU_KERNELS=portable was asked for but is not what runs. Called where
    work starts (the CLI before any command, the Trainer before its first step), never where a result is being
    recorded: provenance records settings(), what actually ran, and never fails."""
    found = settings()
    if found is None or requested() != PORTABLE or found["mode"] == PORTABLE:
        return found
    if found["mkl_cbwr"] is None:
        raise InputError(f"{MODE_VAR}=portable: this torch build exposes no MKL (mkl_cbwr_get), so its GEMMs cannot "
                         f"be pinned; portable kernels need an x86-64 torch build with MKL (the PyPI wheels). "
                         f"Unset {MODE_VAR}")
    wrong = [f"{key} is {found[key]} (portable: {value})" for key, value in PORTABLE_SETTINGS.items()
             if found[key] != value]
    raise InputError(f"{MODE_VAR}=portable, but the CPU kernels in effect are not: {'; '.join(wrong)}. "
                     f"Set {MODE_VAR}=portable in the environment before Python starts (`export {MODE_VAR}=portable`, "
                     f"or `{MODE_VAR}=portable interp ...`), import interp before torch, and leave "
                     f"{', '.join(PORTABLE_ENV)} unset: torch reads them once, at its first use")


def check_at_start() -> None:
    """The CLI's check before a command does any work: under INTERP_CPU_KERNELS=portable, import torch (only then)
    and check(); a bad INTERP_CPU_KERNELS value fails here too."""
    if requested() == PORTABLE:
        import torch  # noqa: F401  (loads the libraries whose settings check() reads back)

        check()


def is_portable() -> bool:
    """Whether portable kernels are asked for, or (set by hand) in effect: what the dtype choice follows."""
    try:
        if requested() == PORTABLE:
            return True
    except InputError:
        return False
    found = settings()
    return found is not None and found["mode"] == PORTABLE


def portable_label(hw: dict, dtype: object = None) -> bool:
    """Whether a result computed with recorded hardware `hw` (provenance.hardware()) in `dtype` may be labelled
    portable: portable kernels in effect, and no 16-bit float on the CPU (bf16 runs on oneDNN kernels that
    differ by CPU whatever the settings)."""
    kernels = hw.get("cpu_kernels") if isinstance(hw.get("cpu_kernels"), dict) else {}
    return kernels.get("mode") == PORTABLE and str(dtype).replace("torch.", "") not in LOW_PRECISION


LOW_PRECISION = ("bfloat16", "bf16", "float16", "fp16", "half")


__all__ = [
    "MODES",
    "MODE_VAR",
    "PORTABLE_ENV",
    "PORTABLE_SETTINGS",
    "check",
    "check_at_start",
    "is_portable",
    "mkl_branch",
    "portable_label",
    "request_from_env",
    "requested",
    "settings",
]
