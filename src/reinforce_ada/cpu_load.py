"""Is this CPU oversubscribed? One warning, with the setting to change, instead of silently slow steps.

Issue 17: under contention the minute-long warm start took 35 minutes and RL steps went from 0.09 s to 6 s with
nothing on screen. torch's intra-op threads spin and wait for each other, so a run with T threads on a machine whose
other work already keeps B cores busy slows down far more than T / (cores - B) once T + B exceeds the cores.
"""

from __future__ import annotations

import os
import sys

_warned = False


def oversubscription(threads: int, load: float, cores: int, *, slack: float = 0.5) -> str | None:
    """The warning for `threads` torch threads when `load` cores are already busy (1-minute load average, which
    counts other processes) out of `cores`; None when they fit. `slack` absorbs the load our own start-up adds."""
    if cores < 1 or threads < 1 or threads + load <= cores + slack:
        return None
    free = max(1, int(cores - load))
    return (
        f"warning: this machine looks busy (load average {load:.1f} on {cores} cores) and torch uses {threads} "
        f"thread{'s' if threads != 1 else ''}; steps can run many times slower than on an idle machine. "
        f"Use fewer threads (--model.threads {free} for train, --threads {free} for eval/filter) or stop other jobs."
    )


def warn_if_oversubscribed(threads: int) -> str | None:
    """Print the oversubscription warning to stderr once per process; returns it (None when all is well)."""
    global _warned
    if _warned or not hasattr(os, "getloadavg"):
        return None
    msg = oversubscription(threads, os.getloadavg()[0], os.cpu_count() or 1)
    if msg:
        _warned = True
        print(msg, file=sys.stderr, flush=True)
    return msg


def runs_on_cpu(device: str) -> bool:
    """Whether a `device` setting (cpu, cuda..., auto) puts the model on the CPU here: `auto` does without CUDA."""
    if device == "auto":
        import torch

        return not torch.cuda.is_available()
    return device == "cpu"
