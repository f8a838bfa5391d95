"""What produced a result: package versions and the git commit, recorded beside every output."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import subprocess
import sys

from interp._util import cpu_kernels
from interp._util.paths import REPO_ROOT

TRACKED_PACKAGES = ("interp", "torch", "transformer-lens", "nnsight", "transformers", "numpy", "pandas")


@functools.cache
def package_versions() -> dict[str, str]:
    """Installed versions of the packages whose behaviour can change our numbers."""
    versions = {}
    for name in TRACKED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "absent"
    return versions


@functools.cache
def git_commit() -> str:
    """HEAD of the repo this code runs from, with '+dirty' if the tree has changes, untracked files included (a
    new module not yet committed made the result too); 'unknown' outside git.

    Read-only: GIT_OPTIONAL_LOCKS=0 stops `git status` from refreshing the index, which takes .git/index.lock; a
    git killed mid-write (a timeout, or a write refused by a full disk) left that lock behind and blocked the
    user's next commit (seen under the bad-input suite's file-size limit)."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True,
                              text=True, timeout=5, check=True, env=env).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=5, check=False, env=env).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


@functools.cache
def cpu_info() -> dict[str, object]:
    """The CPU a result ran on: model name, cores, and whether it has native bf16 (AVX512-BF16 / AMX), which
    decides what dtype="auto" resolves to and how fast bf16 runs: results differ between CPU kinds."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            lines = cpuinfo.readlines()
        for line in lines:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name in ("", platform.machine(), platform.processor()):
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    return {"cpu": name, "cores": os.cpu_count(), "bf16_native": bool(flags & {"avx512_bf16", "amx_bf16"})}


def hardware() -> dict[str, object]:
    """cpu_info() plus, when torch is already imported (never imported here: start-up stays cheap), its
    thread count, the CUDA device and the CPU kernels in effect (what ran, whatever was asked for: recording
    never fails; cpu_kernels.check() refuses a wrong setting where work starts)."""
    info = dict(cpu_info())
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        info["cpu_kernels"] = cpu_kernels.settings()  # which ATen / MKL / oneDNN code paths ran
    return info


def hardware_label(device: object = "cpu", hw: dict | None = None, dtype: object = None) -> str:
    """One table cell naming what computed a result: the GPU's name when `device` is a CUDA device, else the
    CPU model, cores and native bf16 ("AMD EPYC (2 cores, bf16 native)"): float results differ between them;
    ", portable kernels" when INTERP_CPU_KERNELS=portable was in effect and `dtype` (the forward's) is not 16-bit.
    hw: a recorded hardware() dict (a run's config.json), default this machine's."""
    hw = hardware() if hw is None else hw
    if str(device).startswith("cuda") and hw.get("cuda"):
        return str(hw["cuda"])
    portable = ", portable kernels" if cpu_kernels.portable_label(hw, dtype) else ""
    return f"{hw.get('cpu')} ({hw.get('cores')} cores{', bf16 native' if hw.get('bf16_native') else ''}{portable})"


def provenance() -> dict[str, object]:
    """One dict to store beside a checkpoint or a result table: packages, commit, hardware."""
    return {"packages": package_versions(), "git_commit": git_commit(), "hardware": hardware()}


def versions_string() -> str:
    """Compact form for a table column: 'torch=2.13.0;transformer-lens=4.3.0;...'."""
    return ";".join(f"{k}={v}" for k, v in package_versions().items())
