"""Checks the commands run on their flags before any work starts: numbers in range, input files that are regular
files, output paths that can be written, and sizes that fit in memory.

Each failure is a `ConfigError` naming the flag, the value given and what would be valid (`main` turns it into exit
status 2 and one line). They run first so that an hour of sampling does not end in a traceback at the final write,
and a request too big for the machine is refused before anything is allocated.

Memory estimates are upper bounds on what the command must hold at once, compared with the memory this process can
get (`usable_memory`: free memory, the process's own limits and its cgroup's, not the machine's total): a request
whose estimate exceeds it is refused with the largest value that fits.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from reinforce_ada import cpu_load
from reinforce_ada.errors import ConfigError


def at_least(flag: str, value: int | None, least: int = 1) -> None:
    """`value` (None: not given) is a whole number >= `least`."""
    if value is not None and value < least:
        raise ConfigError(f"{flag} must be >= {least}, got {value}")


def whole(text: str) -> int:
    """An argparse type for a count that may be written as 1e6: a whole number, in digits or in float notation.

    >>> whole("12"), whole("1e6"), whole("2.0e3")
    (12, 1000000, 2000)
    """
    try:
        return int(text)
    except ValueError:
        pass
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not math.isfinite(x) or not x.is_integer():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(x)


def finite(flag: str, value: float, *, least: float | None = None, note: str = "") -> None:
    """`value` is a finite number, >= `least` when given (`note` says what the bound means)."""
    if not math.isfinite(value) or (least is not None and value < least):
        bound = f" >= {least:g}" if least is not None else ""
        raise ConfigError(f"{flag} must be a finite number{bound}{note}, got {value}")


def input_file(flag: str, path: str | Path) -> Path:
    """An existing regular file: a folder, FIFO or device is refused before it is opened (a FIFO blocks)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{flag} {p}: no such file")
    if not p.is_file():
        kind = "a folder" if p.is_dir() else "not a regular file (a FIFO, socket or device)"
        raise ConfigError(f"{flag} {p} is {kind}; give a file")
    return p


def read_json_object(flag: str, path: str | Path) -> dict:
    """A UTF-8 JSON file holding an object (a result file of an earlier run), else a ConfigError naming the flag."""
    p = input_file(flag, path)
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{flag} {p}: not UTF-8 text (byte {e.start}); give a result JSON") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{flag} {p}: not valid JSON ({e.msg}, line {e.lineno}); give a result JSON") from None
    except RecursionError:  # deliberate: Python's JSON parser recurses once per nesting level
        raise ConfigError(f"{flag} {p}: nested too deeply to read as JSON") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{flag} {p}: a result JSON is an object, got {type(obj).__name__}")
    return obj


def read_lrs(path: str | Path) -> dict[str, float]:
    """`compare --lrs-from`: the `lrs` object of an earlier result, {arm: its chosen lr}, each a finite lr >= 0."""
    lrs = read_json_object("--lrs-from", path).get("lrs")
    if not isinstance(lrs, dict) or not lrs:
        raise ConfigError(f"--lrs-from {path}: needs a non-empty object 'lrs' mapping arm names to learning rates")
    out = {}
    for arm, lr in lrs.items():
        if isinstance(lr, bool) or not isinstance(lr, int | float) or not math.isfinite(lr) or lr < 0:
            raise ConfigError(f"--lrs-from {path}: lrs[{arm!r}] must be a finite number >= 0, got {lr!r}")
        out[str(arm)] = float(lr)
    return out


def given(args: argparse.Namespace, *names: str) -> None:
    """Each flag of `names` either left out or given a value: `--rates ""` was read as not given and ignored (and
    `--arms ""` as every arm), so the user never learned the flag did nothing."""
    for name in names:
        value = getattr(args, name, None)
        for v in value if isinstance(value, list) else [value]:  # a repeatable flag: each time it is given
            if isinstance(v, str) and not v.strip():
                raise ConfigError(f"--{name.replace('_', '-')} {v!r}: give a value, or leave the flag out")


def output_file(
    flag: str, path: str | Path, *, suffixes: tuple[str, ...] = ("",), inputs: dict[str, Any] | None = None
) -> Path:
    """A path the command can write at the end: not a folder, and in a folder that exists or can be made and
    accepts new files (probed by creating and removing a temporary file). Missing parent folders are made when the
    command writes (not here, so a command that fails first leaves nothing behind). `suffixes`: the command writes
    `path.with_suffix(s)` for each (`""`: the path itself). `inputs`: {flag: path} of the files the command reads;
    an output that is one of them (`os.path.samefile`: another spelling, a link or a hard link counts) is refused,
    since writing it destroys what is read (`filter --out` naming its `--dataset` left the file with 0 rows)."""
    if not str(path).strip():
        raise ConfigError(f"{flag} {str(path)!r}: give a file path")
    out = Path(path)
    for s in suffixes:
        target = out.with_suffix(s) if s else out
        not_an_input(flag, path, target, inputs or {})
        if target.is_dir():
            raise ConfigError(f"{flag} {path}: {target} is a folder; give a file path")
        if target.exists() and not target.is_file():
            raise ConfigError(f"{flag} {path}: {target} is not a regular file; give a file path")
        if target.exists() and not os.access(target, os.W_OK):
            raise ConfigError(f"{flag} {path}: {target} exists and is read-only; give another path")
    existing = out.absolute().parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {path}: {existing} is a file, so the folder {out.parent} cannot be made")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        raise ConfigError(
            f"{flag} {path}: cannot write in {existing} ({e.strerror or e}); give a path in a writable folder"
        ) from None
    return out


def not_an_input(flag: str, given_as: str | Path, target: Path, inputs: dict[str, Any]) -> None:
    """Refuse writing `target` (for `flag given_as`) when it is the same file as one of `inputs` ({flag: path})."""
    for in_flag, source in inputs.items():
        try:
            same = source is not None and os.path.samefile(target, source)
        except (OSError, ValueError):  # deliberate: either does not exist (yet), so they cannot be one file
            same = False
        if same:
            raise ConfigError(
                f"{flag} {given_as}: {target} is the {in_flag} file {source}, which the command reads; writing it "
                "would overwrite the input: give another path"
            )


def check_sampling_flags(args: argparse.Namespace) -> None:
    """`eval` and `filter`'s numeric flags, before anything is read or loaded."""
    for flag in ("samples", "limit", "threads", "batch_size", "max_new_tokens"):
        at_least("--" + flag.replace("_", "-"), getattr(args, flag))
    finite("--temperature", args.temperature, least=0.0, note=" (0 = greedy; the paper samples at 1.0)")
    check_device("--device", args.device)
    if not 0 <= args.seed < 2**63:  # torch's generators take a 64-bit seed
        raise ConfigError(f"--seed must be in [0, 2**63 - 1], got {args.seed}")


DEVICE = re.compile(r"(cpu|auto|mps|cuda(:\d+)?)")


def check_device(flag: str, name: str) -> None:
    """A device name torch knows on the machines we run (checked before torch is imported; CUDA's presence is
    checked when the model loads)."""
    if not DEVICE.fullmatch(name):
        raise ConfigError(f"{flag} {name!r} is not a device this command runs on; use cpu, cuda, cuda:N, mps or auto")


def kv_bytes_per_token(folder: Path) -> int:
    """Bytes of key/value cache one token of one sequence takes in fp32, from the folder's config.json (0 when it
    does not say: an adapter folder or an architecture without these fields)."""
    try:
        c = json.loads((folder / "config.json").read_text())
        heads = int(c["num_attention_heads"])
        head_dim = int(c.get("head_dim") or int(c["hidden_size"]) // heads)
        return 2 * int(c["num_hidden_layers"]) * int(c.get("num_key_value_heads") or heads) * head_dim * 4
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError):  # deliberate: see above
        return 0


def check_generation_memory(
    folder: Path, prompts: int, samples: int, max_new_tokens: int, batch_size: int, *, given: bool = True
) -> None:
    """`eval`/`filter`: the samples of the largest benchmark are held at once (`evaluation.metrics.sample_bytes`
    each) and the engine caches keys and values for up to `batch_size` sequences of `max_new_tokens` new tokens
    (`kv_bytes_per_token`). Refuses --samples, then --max-new-tokens (`given`: whether the user set it), past
    the memory this process can get, with the largest value that fits (--samples 10**9 was once a MemoryError,
    --max-new-tokens 10**9 a 3 TB allocation, both after the model had loaded)."""
    from reinforce_ada.evaluation.metrics import sample_bytes

    limit, kv = usable_memory(), kv_bytes_per_token(folder)

    def need(k: int, tokens: int) -> int:
        return prompts * k * sample_bytes(tokens) + min(batch_size, prompts * k) * kv * tokens

    def largest(fits: Any) -> int:  # the largest n >= 0 with fits(n); fits is monotone
        lo, hi = 0, 1
        while fits(hi):
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return lo

    if need(samples, 1) > limit:
        n = largest(lambda k: need(k, 1) <= limit)
        raise ConfigError(
            f"--samples {samples}: {prompts} prompts x {samples} samples would need about {_size(need(samples, 1))} "
            f"of memory at once, more than the {_size(limit)} this process can get; the largest --samples here is {n}"
        )
    if need(samples, max_new_tokens) > limit:
        n = largest(lambda t: need(samples, t) <= limit)
        raise ConfigError(
            f"--max-new-tokens {max_new_tokens}{'' if given else ' (the default)'}: {prompts} prompts x {samples} "
            f"samples of up to {max_new_tokens} new tokens (and the cache of {min(batch_size, prompts * samples)} "
            f"sequences decoded together) would need about {_size(need(samples, max_new_tokens))} of memory, more "
            f"than the {_size(limit)} this process can get; the largest --max-new-tokens here is {n}"
        )


def check_simulate_flags(args: argparse.Namespace, arms: int) -> None:
    """`simulate`'s numeric flags, and what its run holds in memory: the pool, and per arm x seed x step a few
    numbers in the curves and again in the JSON (`simulation.simulate.SIM_BYTES_PER_*`)."""
    from reinforce_ada.simulation.simulate import SIM_BYTES_PER_PROMPT, SIM_BYTES_PER_STEP

    finite("--sim-lr", args.sim_lr, least=0.0, note=" (0 freezes the policy)")
    for flag, value in (("--steps", args.steps), ("--seeds", args.seeds), ("--batch-size", args.batch_size)):
        at_least(flag, value)
    at_least("--pool-size", args.pool_size)
    if args.batch_size > args.pool_size:
        raise ConfigError(
            f"--batch-size {args.batch_size} must be <= --pool-size {args.pool_size} (a step draws distinct prompts)"
        )
    fits_in_memory("--pool-size", args.pool_size, SIM_BYTES_PER_PROMPT, f"a pool of {args.pool_size} prompts")
    per_step = arms * SIM_BYTES_PER_STEP
    fits_in_memory("--steps", args.steps, per_step, f"{arms} arms x {args.steps} steps of one seed")
    fits_in_memory(
        "--seeds", args.seeds, per_step * args.steps, f"{arms} arms x {args.steps} steps x {args.seeds} seeds"
    )


def check_monte_carlo(reps: int, rates: int, max_samples: int) -> None:
    """`plan --monte-carlo`: 0 (exact) or a rep count whose samples fit in memory: each rep holds up to max_samples
    samples per listed rate (est/knapsack run them all in one batch)."""
    from reinforce_ada.simulation.plan import MC_BYTES_PER_SAMPLE

    at_least("--monte-carlo", reps, 0)
    if reps:
        fits_in_memory("--monte-carlo", reps, rates * max_samples * MC_BYTES_PER_SAMPLE, f"{reps} reps x {rates} rates")


def usable_memory() -> int:
    """Bytes of memory this process can get (`cpu_load.usable_memory`: the bound the memory estimates are compared
    with; tests replace it to pretend a smaller machine)."""
    return cpu_load.usable_memory()


def fits_in_memory(flag: str, value: int, per_unit: float, what: str) -> None:
    """Refuse `value` units of `per_unit` bytes each when they would not fit in usable memory; the message names
    `flag`, the estimate and the largest value that fits. `what` describes the request, for the message."""
    limit = usable_memory()
    if value * per_unit > limit:
        largest = int(limit // per_unit)
        raise ConfigError(
            f"{flag} {value}: {what} would need about {_size(value * per_unit)} of memory at once, more than the "
            f"{_size(limit)} this process can get; the largest {flag} here is {largest}"
        )


def _size(n: float) -> str:
    units = ("B", "KB", "MB", "GB", "TB", "PB", "EB")
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n, i = n / 1024, i + 1
    return f"{n:.1f} {units[i]}"


def free_stem(stem: str) -> str:
    """`stem`, or `stem-1`, `stem-2`, ... : the first whose .json and .png do not exist yet (default outputs never
    overwrite an earlier run's)."""
    candidate, n = stem, 0
    while any(Path(candidate + suffix).exists() for suffix in (".json", ".png")):
        n += 1
        candidate = f"{stem}-{n}"
    return candidate
