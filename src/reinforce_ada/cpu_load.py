"""Is this CPU oversubscribed? One warning, with the setting to change, instead of silently slow steps. And how much
memory this process can get (`usable_memory`: the bound every up-front memory check compares with; `physical_memory`
is the machine's total, one of its terms).

Under contention the minute-long warm start took 35 minutes and RL steps went from 0.09 s to 6 s with
nothing on screen. torch's intra-op threads spin and wait for each other, so a run with T threads on a machine whose
other work already keeps B cores busy slows down far more than T / (cores - B) once T + B exceeds the cores.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_warned = False


def free_cores(load: float, cores: int) -> int:
    """Cores left by other work (1-minute load average), at least 1."""
    return max(1, int(cores - load))


def oversubscription(
    threads: int, load: float, cores: int, *, slack: float = 0.5, flag: str = "--model.threads", lowered: bool = False
) -> str | None:
    """The warning for `threads` torch threads when `load` cores are already busy (1-minute load average, which
    counts other processes) out of `cores`; None when they fit. `slack` absorbs the load our own start-up adds.

    With more threads than free cores it names the count to use (`flag N`), or says it was lowered to it
    (`lowered`); at one thread, or when the threads already fit the free cores, there is nothing to lower and it says
    only that other jobs share the CPU.
    """
    if cores < 1 or threads < 1 or threads + load <= cores + slack:
        return None
    free = free_cores(load, cores)
    busy = f"this machine looks busy (load average {load:.1f} on {cores} cores)"
    if free >= threads:  # e.g. one thread: fewer is not possible, only other jobs can give the time back
        return (
            f"note: {busy}; other jobs share the CPU, so steps run slower than on an idle machine "
            f"({threads} thread{'s' if threads != 1 else ''} already fit the free cores: nothing to lower)."
        )
    if lowered:
        return (
            f"warning: {busy}: using {free} torch thread{'s' if free != 1 else ''} instead of {threads} (threads "
            f"that wait for busy cores make steps many times slower). Pass {flag} {threads} to keep {threads}."
        )
    return (
        f"warning: {busy} and torch uses {threads} threads; steps can run many times slower than on an idle "
        f"machine. Use fewer threads ({flag} {free}) or stop other jobs."
    )


def warn_if_oversubscribed(threads: int, *, explicit: bool = True, flag: str = "--model.threads") -> int:
    """Check the load once per process and print the warning to stderr when the threads do not fit; returns the
    thread count to use: `threads` itself when it fits or was set explicitly, else the free cores."""
    global _warned
    if _warned or not hasattr(os, "getloadavg"):
        return threads
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if oversubscription(threads, load, cores) is None:
        return threads
    use = threads if explicit else min(threads, free_cores(load, cores))
    msg = oversubscription(threads, load, cores, flag=flag, lowered=use < threads)
    if msg:
        _warned = True
        print(msg, file=sys.stderr, flush=True)
    return use


def runs_on_cpu(device: str) -> bool:
    """Whether a `device` setting (cpu, cuda..., auto) puts the model on the CPU here: `auto` does without CUDA."""
    if device == "auto":
        import torch

        return not torch.cuda.is_available()
    return device == "cpu"


def physical_memory() -> int:
    """Bytes of physical memory on this machine."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # deliberate: a platform without these names
        return 16 * 2**30


def usable_memory() -> int:
    """Bytes of memory this process can get now: the least of physical memory, what the kernel reports available
    (`MemAvailable`), the process's own address-space and data limits (`ulimit -v`, `-d`) and its cgroup's
    `memory.max` less what the cgroup uses. The bound every up-front memory check compares with: a check against
    physical memory alone let a request through that a 2 GiB `ulimit -v` or a container limit then killed."""
    limits = [physical_memory()]
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):  # deliberate: not Linux
        pass
    try:
        import resource

        for which in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            soft = resource.getrlimit(which)[0]
            if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
                limits.append(soft)
    except (ImportError, OSError, ValueError, AttributeError):  # deliberate: a platform without rlimits
        pass
    for limit_file, used_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            raw = Path(limit_file).read_text().strip()
            if raw != "max" and int(raw) < 2**60:
                limits.append(max(0, int(raw) - int(Path(used_file).read_text().strip())))
            break
        except (OSError, ValueError):  # deliberate: no cgroup limit (or another cgroup version)
            continue
    return max(1, min(limits))
