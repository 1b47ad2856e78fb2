"""The real-model convergence study: its pre-registration and its analysis (pure numpy on run records).

`run` runs the study; this module reads what it ran.

1) Pre-registration: a TOML file (registrations/preregistration_llm.toml) committed before the runs, the same idea as
   `protocol.prereg` (whose loader knows only the testbed's C-figures and pools): the instrument (task, `ask`: the
   bare number or the working; `verifier`: `numeric` or `numeric_marked`; rows at once, `generation_batch` and
   `micro_batch`, 128 and 32 by default; held-out size,
   evaluation measure, horizon, seeds per arm, lr grid, targets) and the arm the headline figures L1 (tokens to
   target, GRPO-n4 / the arm) and L2 (CPU wall-clock to target, same) are read for. `load` checks every key and
   names what would be valid; provenance (committed or not) is `protocol.prereg.provenance`.
2) Analysis: every arm against GRPO-n4 on the `steps`, `tokens` and `cpu_s` axes with `bench.compute`'s paired
   time-scale factor (90% t-interval on per-seed log factors, bootstrap beside it) and its per-target factors;
   targets are fractions of GRPO-n4's median fitted gain (`compute.target_levels`). Where this departs from the
   compute-to-target benchmark: the reference is GRPO-n4 itself, not the best of a uniform family (the study runs one
   uniform n), and every arm runs at GRPO-n4's swept lr unless the registration sweeps it too (`lr_sweep_arms`) or
   fixes its lr (`fixed_lrs`). A registration may add arms of its own (`arm_specs`: a strategy spec and prompts per
   step, e.g. SPO at GRPO-n4's samples per step) and name its result (`name`: its own results folder).
3) L1/L2 are `partial` until every registered seed of GRPO-n4 and the registered arm is in, `unmeasured` below two
   paired seeds; a figure whose instrument differs from the committed file, or whose file is not marked
   `status = "final"` (the default), is labelled not pre-registered. Time factors (L2, L2p) whose paired runs were
   timed on different CPUs (a study continued on another machine) are listed as `machines_differ`: tokens and
   steps are unaffected, seconds are not.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.bench.compute import factor, per_target, target_levels
from reinforce_ada.bench.curves import area_gain, median_with_misses, ratio_of_means, to_target
from reinforce_ada.errors import ConfigError

REFERENCE = "grpo-n4"
DEFAULT_NAME = "llm_convergence"
"""A registration's `name` (its result's name and, for another name, its results folder), by default the first's."""
FIGURES = {
    "L1": ("tokens", "generated tokens to target, GRPO-n4 / the registered arm (time-scale factor, paired seeds)"),
    "L2": ("cpu_s", "CPU wall-clock to target (recorded step times), GRPO-n4 / the registered arm (paired seeds)"),
    "L2p": (
        "process_s",
        "process CPU seconds to target (time.process_time per step: with 1 torch thread, what the "
        "machine's load does not stretch), GRPO-n4 / the registered arm (paired seeds)",
    ),
}
AXES = ("steps", "tokens", "cpu_s", "process_s")
"""`process_s` only where every record has it (runs of code before it have not)."""
TIME_AXES = ("cpu_s", "process_s")
"""Axes read from recorded seconds: a factor on them compares machines as well as arms when a pair's runs ran on
different CPUs (`machines_differ`)."""
EVAL_MEASURES = ("exact", "sampled")
_INSTRUMENT: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "levels": dict,
    "train_prompts": int,
    "eval_prompts": int,
    "eval": str,
    "eval_samples": int,
    "check_samples": int,
    "steps": int,
    "batch_size": int,
    "eval_every": int,
    "max_new_tokens": int,
    "lora_r": int,
    "lrs": list,
    "extend_sweep": int,
    "sweep_seeds": list,
    "seeds": list,
    "other_seeds": list,
    "arms": list,
    "targets": list,
}


def load(path: str | Path, known_arms: Sequence[str]) -> dict[str, Any]:
    """Read and check the study's pre-registration; every error names the key, the value and what is valid."""
    from studies.protocol.prereg import read_file

    p = Path(path)
    data = read_file(p)
    inst = data.get("instrument")
    if not isinstance(inst, dict):
        raise ConfigError(f"pre-registration {p}: needs an [instrument] table with keys {sorted(_INSTRUMENT)}")
    for key, kind in _INSTRUMENT.items():
        if key not in inst:
            raise ConfigError(f"pre-registration {p}: [instrument] is missing {key!r} (needs {sorted(_INSTRUMENT)})")
        v = inst[key]
        if not isinstance(v, kind) or isinstance(v, bool) or (isinstance(v, list | dict) and not v):
            names = {list: "a non-empty list", dict: "a non-empty table", int: "an integer", str: "a string"}
            what = names.get(kind, f"a {getattr(kind, '__name__', kind)}")
            raise ConfigError(f"pre-registration {p}: [instrument] {key} = {v!r} must be {what}")
        low = 0 if key in ("extend_sweep", "lora_r") else 1
        if isinstance(v, int) and not isinstance(v, bool) and v < low:
            raise ConfigError(f"pre-registration {p}: [instrument] {key} = {v} must be >= {low}")
    if inst["eval"] not in EVAL_MEASURES:
        raise ConfigError(f"pre-registration {p}: [instrument] eval = {inst['eval']!r}; use one of {EVAL_MEASURES}")
    msg = inst.get("min_shared_gain", 1e-4)
    if not isinstance(msg, int | float) or isinstance(msg, bool) or not 0 < msg < 1:
        raise ConfigError(f"pre-registration {p}: [instrument] min_shared_gain = {msg!r} must be an accuracy in (0, 1)")
    mn = inst.get("matched_n")
    if (mn is not None or (inst["eval"] == "sampled" and "grpo-matched" in inst["arms"])) and not (
        isinstance(mn, int) and not isinstance(mn, bool) and mn > 0
    ):
        raise ConfigError(
            f"pre-registration {p}: [instrument] matched_n = {mn!r}: budget-matched GRPO's n must be "
            "registered as an integer >= 1 when eval = 'sampled' (without it, n comes from the start "
            "model's exact pass rates, which only the exact measure has)"
        )
    for key in ("seeds", "other_seeds", "sweep_seeds"):
        s = inst[key]
        if not all(isinstance(x, int) and x >= 0 for x in s) or len(set(s)) != len(s):
            raise ConfigError(f"pre-registration {p}: [instrument] {key} = {s} must be distinct integers >= 0")
    if not set(inst["other_seeds"]) <= set(inst["seeds"]):
        raise ConfigError(
            f"pre-registration {p}: other_seeds {inst['other_seeds']} must be among seeds {inst['seeds']}"
        )
    if set(inst["sweep_seeds"]) & set(inst["seeds"]):
        raise ConfigError(f"pre-registration {p}: sweep_seeds {inst['sweep_seeds']} must not be reported seeds")
    if not all(isinstance(t, int | float) and 0 < t < 1 for t in inst["targets"]):
        raise ConfigError(f"pre-registration {p}: [instrument] targets = {inst['targets']} must be fractions in (0, 1)")
    if len(inst["lrs"]) < 3 or not all(isinstance(x, int | float) and 0 < x < 1 for x in inst["lrs"]):
        raise ConfigError(
            f"pre-registration {p}: [instrument] lrs = {inst['lrs']} must be >= 3 learning rates in (0, 1)"
        )
    ask = inst.get("ask", "number")
    if ask not in ("number", "working"):  # `task.ASKS`
        raise ConfigError(
            f"pre-registration {p}: [instrument] ask = {ask!r}; use 'number' (the bare answer, the default) or "
            "'working' (the working, then 'The answer is <number>.')"
        )
    for key, default in (("generation_batch", 128), ("micro_batch", 32)):  # rows at once: memory, not results
        if isinstance(v := inst.get(key, default), bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(
                f"pre-registration {p}: [instrument] {key} = {v!r} must be an integer >= 1 (default {default})"
            )
    verifier = inst.get("verifier", "numeric")
    if verifier not in ("numeric", "numeric_marked"):
        raise ConfigError(
            f"pre-registration {p}: [instrument] verifier = {verifier!r}; use 'numeric' (the last number, the default) "
            "or 'numeric_marked' (the number the answer marks: for ask = 'working')"
        )
    for lv, w in inst["levels"].items():
        if not (str(lv).isdigit() and isinstance(w, int | float) and w > 0):
            raise ConfigError(
                f"pre-registration {p}: [instrument.levels] {lv} = {w!r}; keys are level numbers, values weights > 0"
            )
    own = _arm_specs(p, inst, known_arms)
    known_arms = [*known_arms, *own]
    unknown = [a for a in inst["arms"] if a not in known_arms]
    if unknown or REFERENCE not in inst["arms"]:
        raise ConfigError(
            f"pre-registration {p}: arms {unknown or inst['arms']}: every arm must be one of "
            f"{list(known_arms)} and {REFERENCE!r} must be among them"
        )
    _lr_plan(p, inst)
    name = data.get("name", DEFAULT_NAME)
    if not (isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9_]*", name)):
        raise ConfigError(
            f"pre-registration {p}: name = {name!r} must be a lower-case identifier (it names the "
            "result and its folder)"
        )
    claims = data.get("claim")
    if not isinstance(claims, list) or not claims:
        raise ConfigError(f"pre-registration {p}: needs [[claim]] tables with figure (one of {list(FIGURES)}) and arm")
    for i, c in enumerate(claims):
        if c.get("figure") not in FIGURES:
            raise ConfigError(
                f"pre-registration {p}: claim {i + 1} figure {c.get('figure')!r}; use one of {list(FIGURES)}"
            )
        if c.get("arm") not in inst["arms"]:
            raise ConfigError(
                f"pre-registration {p}: claim {i + 1} arm {c.get('arm')!r} is not among the "
                f"registered arms {inst['arms']}"
            )
    return data


def _arm_specs(p: Path, inst: dict[str, Any], builtin: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`[instrument.arm_specs]`: arms beyond the built-in four, each `{ strategy = "SPEC", batch_size = N }` (a
    strategy spec as `--strategy` takes it, checked by `run` before any run; prompts per step, default the
    instrument's `batch_size`)."""
    own = inst.get("arm_specs", {})
    if not isinstance(own, dict):
        raise ConfigError(f"pre-registration {p}: [instrument] arm_specs = {own!r} must be a table of arms")
    for arm, spec in own.items():
        if arm in builtin:
            raise ConfigError(
                f"pre-registration {p}: arm_specs.{arm}: a built-in arm ({list(builtin)}) cannot be "
                "redefined; give the new arm another name"
            )
        bs = spec.get("batch_size", inst["batch_size"]) if isinstance(spec, dict) else None
        extra = set(spec) - {"strategy", "batch_size"} if isinstance(spec, dict) else set()
        if (
            not isinstance(spec, dict)
            or not isinstance(spec.get("strategy"), str)
            or extra
            or not (isinstance(bs, int) and not isinstance(bs, bool) and bs >= 1)
        ):
            raise ConfigError(
                f"pre-registration {p}: arm_specs.{arm} = {spec!r} must be "
                '{ strategy = "SPEC", batch_size = N >= 1 } (batch_size optional)'
            )
    return own


def _lr_plan(p: Path, inst: dict[str, Any]) -> None:
    """`lr_sweep_arms` (default [GRPO-n4]: each gets its own sweep over `lrs` on the sweep seeds) and `fixed_lrs`
    (arm -> lr, e.g. an lr chosen by an earlier registration's sweep); every other arm runs at GRPO-n4's lr."""
    swept, fixed = inst.get("lr_sweep_arms", [REFERENCE]), inst.get("fixed_lrs", {})
    if not isinstance(swept, list) or not all(isinstance(a, str) for a in swept) or len(set(swept)) != len(swept):
        raise ConfigError(f"pre-registration {p}: [instrument] lr_sweep_arms = {swept!r} must be a list of arms")
    if not isinstance(fixed, dict):
        raise ConfigError(f"pre-registration {p}: [instrument] fixed_lrs = {fixed!r} must be a table arm = lr")
    for arm in [*swept, *fixed]:
        if arm not in inst["arms"]:
            raise ConfigError(f"pre-registration {p}: lr plan names {arm!r}, not among the arms {inst['arms']}")
    for arm, lr in fixed.items():
        if not (isinstance(lr, int | float) and not isinstance(lr, bool) and 0 < lr < 1):
            raise ConfigError(f"pre-registration {p}: fixed_lrs.{arm} = {lr!r} must be an lr in (0, 1)")
        if arm in swept:
            default = "" if "lr_sweep_arms" in inst else f" (by default lr_sweep_arms = [{REFERENCE!r}])"
            raise ConfigError(
                f"pre-registration {p}: fixed_lrs.{arm} = {lr!r}, but {arm!r} is in lr_sweep_arms{default}: an arm's "
                "lr is swept or fixed, not both (set lr_sweep_arms = [] to fix GRPO-n4's)"
            )
    if REFERENCE not in swept and REFERENCE not in fixed:
        raise ConfigError(
            f"pre-registration {p}: {REFERENCE}'s lr must be swept (lr_sweep_arms) or registered "
            "(fixed_lrs): the arms without an lr of their own run at it"
        )


def lr_plan(inst: dict[str, Any]) -> tuple[list[str], dict[str, float]]:
    """The arms swept (in order) and the registered fixed lrs (`_lr_plan`)."""
    return list(inst.get("lr_sweep_arms", [REFERENCE])), {a: float(v) for a, v in inst.get("fixed_lrs", {}).items()}


def registered_arm(prereg: dict[str, Any], figure: str = "L1") -> str:
    named = [c["arm"] for c in prereg["claim"] if c["figure"] == figure]
    if not named:
        raise ConfigError(f"the pre-registration names no arm for {figure}; add a [[claim]] with figure = {figure!r}")
    return named[0]


def seeds_for(prereg: dict[str, Any], arm: str) -> list[int]:
    """GRPO-n4 and the registered arm run every seed; the other arms `other_seeds`."""
    inst = prereg["instrument"]
    full = {REFERENCE, *(c["arm"] for c in prereg["claim"])}
    return list(inst["seeds"] if arm in full else inst["other_seeds"])


def chosen_lr(sweep: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A swept arm's lr (GRPO-n4's, by default): the largest mean `area_gain` over the sweep seeds of that arm's runs;
    `edge` says where the grid must grow."""
    by_lr: dict[float, list[float]] = defaultdict(list)
    for r in sweep:
        by_lr[float(r["lr"])].append(area_gain(r["eval_tokens"], r["accuracy"]))
    if not by_lr:
        raise ValueError("the lr sweep holds no finished run")
    lrs = sorted(by_lr)
    score = {lr: float(np.mean(v)) for lr, v in by_lr.items()}
    best = max(lrs, key=score.__getitem__)
    edge = "low" if best == lrs[0] else "high" if best == lrs[-1] else None
    return {"lr": best, "edge": edge, "area_gain": {f"{lr:g}": score[lr] for lr in lrs}}


def _by_arm(records: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    out: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        out[r["arm"]][r["seed"]] = r
    return out


def analyse(records: Sequence[dict[str, Any]], fractions: Sequence[float], min_gain: float = 1e-4) -> dict[str, Any]:
    """Per arm: factors vs GRPO-n4 per axis (whole curve and per target), x-to-target medians, no-signal share,
    samples per step, exact-vs-sampled gap. Needs GRPO-n4 runs. A seed whose curves share less than `min_gain` of
    accuracy with GRPO-n4's has no whole-curve factor (listed as `undefined`, and `headline` counts it against the
    arm): set it above the evaluation's noise so that a factor is never read from noise alone."""
    arms = _by_arm(records)
    axes = [a for a in AXES if a != "process_s" or all("process_s" in r for r in records)]
    if REFERENCE not in arms:
        raise ValueError(f"the analysis needs {REFERENCE!r} runs (every factor is read against it); have {list(arms)}")
    ref = arms[REFERENCE]
    start, gain, levels = target_levels(ref, fractions)
    out: dict[str, Any] = {"reference": REFERENCE, "start_accuracy": start, "reference_gain": gain}
    out.update(target_fractions=list(fractions), target_levels=levels, table={})
    ref_nosignal = {s: float(_mean(r["no_signal_share"])) for s, r in ref.items()}
    for arm, runs in arms.items():
        row: dict[str, Any] = {"seeds": sorted(runs), "lr": next(iter(runs.values()))["lr"]}
        for axis in axes:
            row[axis] = factor(runs, ref, axis, min_gain) if len(set(runs) & set(ref)) else {"value": None}
            row[f"{axis}_per_target"] = per_target(runs, ref, axis, levels, fractions)
            row[f"{axis}_to_target"] = _to_target(runs, axis, levels, fractions)
        row["machines_differ"] = machines_differ(runs, ref)
        row["samples_per_step"] = float(np.mean([_mean(r["samples_per_step"]) for r in runs.values()]))
        row["tokens_per_step"] = float(np.mean([_mean(r["tokens_per_step"]) for r in runs.values()]))
        ns = {s: float(_mean(r["no_signal_share"])) for s, r in runs.items()}
        row["no_signal_share"] = float(np.mean(list(ns.values())))
        paired = sorted(set(ns) & set(ref_nosignal))
        if paired and any(ref_nosignal[s] > 0 for s in paired):
            row["no_signal_vs_reference"] = ratio_of_means([ns[s] for s in paired], [ref_nosignal[s] for s in paired])
        gaps = [
            r["sampled_check"]["sampled"] - r["sampled_check"]["exact"] for r in runs.values() if r.get("sampled_check")
        ]
        row["sampled_minus_exact"] = {"mean": float(np.mean(gaps)), "per_seed": gaps} if gaps else None
        row["final_accuracy"] = float(np.mean([r["accuracy"][-1] for r in runs.values()]))
        out["table"][arm] = row
    return out


def machines(rec: dict[str, Any]) -> tuple[str, ...]:
    """The CPUs a run's steps were timed on: each session's `cpu` line (`warm_start.machine()`: "model, N cores,
    torch V, T threads") cut before its torch part, which is recorded apart; sorted; () for a record without
    sessions. Parsed here rather than imported so that the analysis stays free of torch."""
    return tuple(sorted({s["cpu"].split(", torch ")[0] for s in rec.get("sessions") or [] if s.get("cpu")}))


def machines_differ(runs: dict[int, dict[str, Any]], ref: dict[int, dict[str, Any]]) -> list[int]:
    """Paired seeds whose time factors (`TIME_AXES`) compare step seconds timed on different CPUs: the two runs name
    different CPUs, or one of them spans several (a study resumed on another machine). Tokens and steps are not
    affected; the seconds are, by the machines' speed ratio, which the factor cannot separate from the arms'."""
    out = []
    for s in sorted(set(runs) & set(ref)):
        a, b = machines(runs[s]), machines(ref[s])
        if a and b and (a != b or len(a) > 1):
            out.append(s)
    return out


def _mean(xs: Sequence[float | None]) -> float:
    return float(np.nanmean(np.asarray(xs, dtype=float)))


def _to_target(runs: dict[int, dict], axis: str, levels: Sequence[float], fractions: Sequence[float]) -> dict:
    from reinforce_ada.bench.compute import _curve

    xs = {s: to_target(*_curve(r, axis), levels) for s, r in runs.items()}
    return {
        f"{f:g}": {"median": median_with_misses([xs[s][i] for s in xs]), "misses": sum(xs[s][i] is None for s in xs)}
        for i, f in enumerate(fractions)
    }


def headline(
    analysis: dict[str, Any] | None,
    prereg: dict[str, Any],
    prov: dict[str, Any],
    run: dict[str, Any],
    deviations: Sequence[str] = (),
) -> dict[str, dict[str, Any]]:
    """summary.json's L1 and L2: value with intervals, status (complete / partial / unmeasured), pre-registered.
    `deviations`: how this run departs from the registration beyond `run`'s fields (model, template, code)."""
    goals = {c["figure"]: c.get("goal") for c in prereg["claim"]}
    inst = prereg["instrument"]
    out = {}
    for fig, (axis, what) in FIGURES.items():
        arm = registered_arm(prereg, fig) if any(c["figure"] == fig for c in prereg["claim"]) else None
        e: dict[str, Any] = {"what": what, "goal": goals.get(fig), "arm": arm, "reference": REFERENCE}
        row = (analysis or {}).get("table", {}).get(arm or "", {})
        f = row.get(axis) or {}
        pairs = list(zip(f.get("seeds", []), f.get("per_seed", []), strict=False))
        paired = [s for s, k in pairs if k is not None]
        e.update({k: f.get(k) for k in ("value", "t_lo", "t_hi", "lo", "hi", "per_seed", "seeds")})
        want = set(inst["seeds"])
        ran, done = {s for s, _ in pairs}, set(paired)
        e["status"] = "unmeasured" if len(done) < 2 else "complete" if want <= ran else "partial"
        if not want <= ran:
            e["missing"] = f"{len(ran & want)} of {len(want)} registered seeds run beside {REFERENCE}"
        e["undefined_seeds"] = sorted(ran - done)  # ran, but shared too little gain with GRPO-n4 for a factor
        if e["undefined_seeds"]:
            e["note"] = (
                f"seeds {e['undefined_seeds']} have no factor (the arm shared less than the registered "
                "min_shared_gain with GRPO-n4): they count against the arm, and no goal is met while any "
                "is undefined; the value is over the other seeds"
            )
        if axis in TIME_AXES and row.get("machines_differ"):
            e["machines_differ"] = row["machines_differ"]
            e["machines_note"] = (
                f"seeds {row['machines_differ']} pair step seconds timed on different CPUs: "
                "their factors mix the machines' speed with the arms'"
            )
        why = []
        if prereg.get("status", "final") != "final":
            why.append(f"the pre-registration is marked status = {prereg['status']!r}, not 'final'")
        if not prov.get("committed"):
            why.append("the pre-registration file differs from its last commit (or is not committed)")
        for key in ("steps", "eval_prompts", "eval", "batch_size", "max_new_tokens"):
            if run.get(key) != inst[key]:
                why.append(f"{key} {run.get(key)!r} differs from the registered {inst[key]!r}")
        why.extend(deviations)
        e["preregistered"] = not why
        e["why_not_preregistered"] = why
        out[fig] = e
    return out
