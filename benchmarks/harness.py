"""The measuring library this repository's benchmarks share (one place, imported as `benchmarks.harness`).

Peak RSS and other processes' CPU during a measurement, waiting for a quiet machine, alternating sides, one call of
our engines or of `model.generate` counted in real tokens, the machine and package versions, the command as typed,
an exclusive lock for timing runs, and `summary.json` (one entry per goal, each owned by the benchmark that
measures it). Run the benchmarks from the repository root as modules: `python -m benchmarks.speed`.
"""

from __future__ import annotations

import ctypes
import datetime
import fcntl
import gc
import json
import os
import platform
import shlex
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import torch

from reinforce_ada.types import Prompt, Request


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def real_tokens(completion_ids_RN: torch.Tensor, eos_ids: list[int]) -> int:
    """Tokens up to and including each row's first EOS (all N columns for a row without one), summed over rows."""
    if completion_ids_RN.shape[1] == 0:
        return 0
    is_eos_RN = torch.isin(completion_ids_RN, torch.tensor(eos_ids, dtype=completion_ids_RN.dtype))
    width = completion_ids_RN.shape[1]
    first_R = torch.where(is_eos_RN.any(dim=1), is_eos_RN.int().argmax(dim=1) + 1, width)
    return int(first_R.sum())


def _trim_heap() -> None:
    """Return freed heap to the OS (glibc only), so an RSS delta is not hidden by memory freed earlier."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc: RSS deltas may then read low for whichever side runs second
        pass


class PeakRss:
    """Poll this process's RSS every `interval_s` in a thread; `base`, `peak` and `delta` are in MiB."""

    def __init__(self, interval_s: float = 0.001):
        self.interval_s, self.proc = interval_s, psutil.Process()
        self.base = self.peak = 0.0
        self._stop = threading.Event()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss / 2**20)
            time.sleep(self.interval_s)

    def __enter__(self) -> PeakRss:
        _trim_heap()
        self.base = self.peak = self.proc.memory_info().rss / 2**20
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss / 2**20)

    @property
    def delta(self) -> float:
        return self.peak - self.base


class OtherCpu:
    """CPU that *other* processes used while the block ran, in cores: system busy time minus ours, over wall time."""

    @staticmethod
    def _now() -> tuple[float, float, float]:
        t, me = psutil.cpu_times(), psutil.Process().cpu_times()
        busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        return time.perf_counter(), busy, me.user + me.system + me.children_user + me.children_system

    def __enter__(self) -> OtherCpu:
        self.start, self.cores = self._now(), float("nan")
        return self

    def __exit__(self, *exc: Any) -> None:
        (w0, b0, o0), (w1, b1, o1) = self.start, self._now()
        self.cores = max(0.0, ((b1 - b0) - (o1 - o0)) / (w1 - w0))


def wait_for_idle(max_wait_s: float, *, threshold: float = 0.2, window_s: float = 2.0) -> tuple[float, float]:
    """Sleep in `window_s` windows until other processes use < `threshold` cores; return (waited s, last reading)."""
    t0, reading = time.perf_counter(), float("nan")
    while True:
        with OtherCpu() as cpu:
            time.sleep(window_s)
        reading = cpu.cores
        if reading < threshold or time.perf_counter() - t0 >= max_wait_s:
            return time.perf_counter() - t0, reading


def engine_call(engine: Any, prompts: list[Prompt], samples: int) -> int:
    """One `generate` of one of our engines over every prompt x samples; returns real tokens generated."""
    return sum(s.num_tokens for s in engine.generate([Request(p, samples) for p in prompts]))


def generate_call(model: Any, tokenizer: Any, prompts: list[Prompt], samples: int, gen_cfg: Any, eos: list[int]) -> int:
    """One `model.generate` with `num_return_sequences=samples`, tokenise to detokenise; returns real tokens."""
    enc = tokenizer([p.text for p in prompts], add_special_tokens=False, padding=True, return_tensors="pt")
    with torch.inference_mode():
        out_RT = model.generate(**enc, generation_config=gen_cfg)
    completion_RN = out_RT[:, enc["input_ids"].shape[1] :]
    tokenizer.batch_decode(completion_RN, skip_special_tokens=True)  # the engine returns texts too
    return real_tokens(completion_RN, eos)


def alternate(sides: dict[str, Any], repeats: int) -> tuple[dict[str, dict[str, list[float]]], float]:
    """A warm-up call per side, then `repeats` rounds calling each side in turn (ABAB...): per-call tokens and
    seconds, and the cores other processes used meanwhile."""
    runs: dict[str, dict[str, list[float]]] = {k: {"tokens": [], "seconds": []} for k in sides}
    for fn in sides.values():  # allocator, kernels, lazy imports
        fn()
    with OtherCpu() as other:
        for _ in range(repeats):
            for name, fn in sides.items():
                t0 = time.perf_counter()
                tokens = fn()
                runs[name]["seconds"].append(time.perf_counter() - t0)
                runs[name]["tokens"].append(tokens)
    return runs, other.cores


def machine() -> dict[str, Any]:
    cpu = ""
    if Path("/proc/cpuinfo").exists():
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    flags: set[str] = set()
    if Path("/proc/cpuinfo").exists():
        line = next((ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")), ":")
        flags = set(line.split(":", 1)[1].split())
    return {
        "platform": platform.platform(),
        "cpu": cpu or platform.processor(),
        # what decides bf16 speed on a CPU: without avx512_bf16 / amx_bf16, bf16 matmuls are emulated
        "cpu_flags": sorted(flags & {"avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"}),
        "logical_cpus": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "accelerate", "datasets", "trl", "peft", "numpy", "reinforce-ada"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _parent_flock() -> list[str]:
    """The parent's command line when it is a `flock` process (it then holds the lock for us), else []."""
    parent = psutil.Process().parent()
    cmd = parent.cmdline() if parent else []
    return cmd if cmd and Path(cmd[0]).name == "flock" else []


def command_line() -> str:
    """The command as typed: the parent `flock ...` line when flock started us, else python and argv."""
    return shlex.join(_parent_flock() or [sys.executable, *sys.argv])


def take_lock(path: str | None) -> tuple[Any, str]:
    """Hold an exclusive flock on `path` for the run, unless our parent is a `flock` process holding it already."""
    if not path:
        return None, "none (--no-lock)"
    if path in _parent_flock():
        return None, f"held by the parent: flock {path}"
    fh = open(path, "a")  # noqa: SIM115 - kept open for the whole run
    t0 = time.perf_counter()
    fcntl.flock(fh, fcntl.LOCK_EX)
    return fh, f"flock {path} taken by the script (waited {time.perf_counter() - t0:.1f} s)"


def update_summary(
    path: str | Path, goals_: dict[str, Any], command: str, *, nested: dict[str, str] | None = None
) -> None:
    """Merge this benchmark's goals into `summary.json` (other benchmarks own the other keys).

    A goal named in `nested` is owned by another benchmark: this one only sets `summary[goal][nested[goal]]` to its
    entry (command and date included) and leaves the goal's other fields alone.
    """
    path = Path(path)
    summary = json.loads(path.read_text()) if path.exists() else {}
    stamp = {"command": command, "date": datetime.date.today().isoformat()}
    for key, g in goals_.items():
        if nested and key in nested:
            summary[key] = {**summary.get(key, {}), nested[key]: {**g, **stamp}}
        else:
            summary[key] = {**g, **stamp}
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(dict(sorted(summary.items())), indent=1) + "\n")
    tmp.replace(path)
