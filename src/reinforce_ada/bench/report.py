"""`reinforce-ada compare`'s outputs: the JSON (every curve of every run), the PNG and the printed tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.bench import evidence


def _f(x: Any, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def _ci(d: dict[str, Any] | None, fmt: str = ".2f") -> str:
    if not d or d.get("value") is None:
        return "—"
    if d.get("lo") is None:
        return _f(d["value"], fmt)
    return f"{d['value']:{fmt}} [{d['lo']:{fmt}}, {d['hi']:{fmt}}]"


def format_pool(name: str, s: dict[str, Any]) -> str:
    lines = [
        f"pool {name}: start accuracy {s['start_accuracy']:.3f}, reference gain {s['reference_gain']:.3f}, "
        f"targets {' / '.join(f'{x:.3f}' for x in s['target_levels'])}",
        f"{'arm':<13}{'lr':>7}{'seeds':>6}{'k steps [90%]':>20}{'k tokens':>20}{'k tok vs matched':>20}"
        f"{'area':>7}{'steps→50%':>10}{'final':>7}{'no-sig':>7}{'smp/st':>7}{'s/step':>7}",
    ]
    for arm, r in s["table"].items():
        t50 = r["targets"]["0.5"]
        lines.append(
            f"{arm:<13}{r['lr']:>7.0e}{len(r['seeds']):>6}{_ci(r['k_steps']):>20}{_ci(r['k_tokens']):>20}"
            f"{_ci(r.get('k_tokens_vs_matched')):>20}{_f(r['area']['value'], '.2f'):>7}"
            f"{_f(t50['steps'], '.0f'):>10}{_f(r['final_accuracy']['median'], '.3f'):>7}"
            f"{_f(r['no_signal_share']['median'], '.2f'):>7}{_f(r['samples_per_step']['median'], '.0f'):>7}"
            f"{_f(r['time_step_s']['median'], '.3f'):>7}"
            + (f"  (identical to {', '.join(r['identical_to'])}: not ranked)" if r.get("identical_to") else "")
        )
    for k, g in s.get("goals", {}).items():  # figures a caller added to the pool's summary
        lines.append(f"{k}: {_ci(g, '.3f')} (goal {g['goal']}) — {g['what']}")
    return "\n".join(lines)


def format_compute(results: dict[str, Any]) -> str:
    """Compute to target per pool: factors against the best uniform arm (t-intervals), oracle share, headlines."""
    out = []
    heads = results.get("compute", {})
    for pool, s in results["by_pool"].items():
        comp = s.get("compute")
        if not comp:
            continue
        best = {ax: v["best_uniform"] for ax, v in comp["axes"].items()}
        out.append(
            f"compute to target, pool {pool}: best uniform arm per axis {best}; oracle {comp.get('oracle')}; "
            f"targets {', '.join(f'{f:g}' for f in comp['target_fractions'])} of {best.get('tokens')}'s gain"
        )
        eq = comp.get("equal_lr", {}).get("arms", {})
        out.append(
            f"  {'arm':<15}{'lr':>7}{'seeds':>6}{'tokens [90% t]':>22}{'CPU s':>20}{'GPU model s':>20}"
            f"{'oracle share':>14}{'equal lr':>10}{'tok@0.1/0.5/0.9':>20}"
        )
        for arm, r in comp["table"].items():
            t = lambda d: _ci({"value": d.get("value"), "lo": d.get("t_lo"), "hi": d.get("t_hi")})  # noqa: E731
            pt = r.get("tokens_per_target", {})
            cells = "/".join(_f(pt.get(f, {}).get("value"), ".2f") for f in ("0.1", "0.5", "0.9"))
            twin = s["table"].get(arm, {}).get("identical_to")
            out.append(
                f"  {arm:<15}{r['lr']:>7.0e}{len(r['seeds']):>6}{t(r.get('tokens', {})):>22}"
                f"{t(r.get('cpu_s', {})):>20}{t(r.get('gpu_s', {})):>20}"
                f"{_f(r.get('oracle_share', {}).get('value'), '.2f'):>14}"
                f"{_f(eq.get(arm, {}).get('value'), '.2f'):>10}{cells:>20}"
                + (f"  (identical to {', '.join(twin)}: not ranked)" if twin else "")
            )
        for fig, h in heads.get("by_pool", {}).get(pool, {}).items():
            pre = h.get("preregistration")  # a study's registration check, when it added one
            mark = ""
            if pre is not None:
                mark = (
                    "  (pre-registered)"
                    if pre.get("preregistered")
                    else "  (NOT pre-registered: " + "; ".join(pre.get("why", [])) + ")"
                )
            out.append(
                f"  {fig:<13}{h.get('arm') or '—':<15}"
                f"{_ci({'value': h.get('value'), 'lo': h.get('t_lo'), 'hi': h.get('t_hi')}):>22}{mark}"
            )
        late = heads.get("best_after_the_fact", {}).get(pool, {})
        if late.get("arm"):
            out.append(f"  best adaptive arm on tokens, {late['label']}: {late['arm']} {late['tokens']:.2f}")
    return "\n".join(out)


def format_table(results: dict[str, Any]) -> str:
    tb = results["testbed"]
    out = [
        f"testbed weights sha256 {tb['sha256']} ({'shipped' if tb['matches'] else 'NOT the shipped warm start'})",
    ]
    if results.get("skipped_arms"):
        out.append("skipped arms: " + ", ".join(results["skipped_arms"]))
    sw = results["lr_sweep"]["arms"]
    if sw:
        out.append("lr sweep (curve-area gain per lr; * = chosen):")
        for arm, r in sw.items():
            cells = " ".join(f"{lr}{'*' if float(lr) == r['best'] else ''}={v:.4f}" for lr, v in r["area_gain"].items())
            out.append(f"  {arm:<13}{cells}{'  (best at the grid edge)' if r['at_edge'] else ''}")
    for name, s in results["by_pool"].items():
        out.append(format_pool(name, s))
    compute = format_compute(results)
    return "\n".join([*out, compute] if compute else out)


def compact_runs(results: dict[str, Any]) -> dict[str, Any]:
    """The results with each run's per-step series replaced by their means and the cumulative costs at each
    evaluation (`cpu_s`, `gpu_s`): what the tables and figures read, a fraction of the size. The full records stay
    in the records folder."""
    from reinforce_ada.bench.compute import axis_x
    from reinforce_ada.bench.run import SERIES

    def one(r: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in r.items() if k not in SERIES}
        finite = {k: np.asarray(r[k], dtype=float) for k in SERIES if k in r}
        finite = {k: v[np.isfinite(v)] for k, v in finite.items()}  # a series the run's trainer did not log: None
        out["means"] = {k: float(v.mean()) if len(v) else None for k, v in finite.items()}
        for axis in ("cpu_s", "gpu_s"):
            try:
                out[f"eval_{axis}"] = axis_x(r, axis, steps_only=True)  # the prior's cost is added when read
            except (KeyError, ValueError, ImportError):  # an old record without the series the axis needs
                out[f"eval_{axis}"] = None
        return out

    runs = {phase: [one(r) for r in rs] for phase, rs in results["runs"].items()}
    return {**results, "runs": runs}


def write(results: dict[str, Any], out: str | Path, command: str, *, series: bool = True) -> tuple[Path, Path]:
    """OUT.json (`write_json`) and OUT.png (`plot`)."""
    results["command"] = command
    out = Path(out)
    js, png = out.with_suffix(".json"), out.with_suffix(".png")
    write_json(compact_runs(results) if not series else results, js)
    plot(results, png)
    return js, png


def write_json(data: dict[str, Any], js: Path) -> None:
    """Atomically, floats to 4 significant digits (far below the seed spread)."""
    js.parent.mkdir(parents=True, exist_ok=True)
    tmp = js.with_name(f".{js.name}.tmp")
    tmp.write_text(json.dumps(_rounded(data), separators=(",", ":"), default=_jsonable) + "\n")
    tmp.replace(js)


def plot(results: dict[str, Any], png: Path) -> None:
    """Per pool: accuracy vs steps and vs tokens (median, band over seeds), the no-signal share, the pool's pass-rate
    histogram and the compute-to-target factors. Reads `runs.main` (curves and the `no_signal_share` series)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    png.parent.mkdir(parents=True, exist_ok=True)
    pools = list(results["by_pool"])
    fig, ax = plt.subplots(len(pools), 5, figsize=(27, 4.6 * len(pools)), squeeze=False)
    for row, pool in enumerate(pools):
        runs = [r for r in results["runs"]["main"] if r["pool"] == pool]
        arms = list(dict.fromkeys(r["arm"] for r in runs))
        for i, arm in enumerate(arms):
            rs = [r for r in runs if r["arm"] == arm]
            col, ls = f"C{i % 10}", ("-", "--", ":")[i // 10 % 3]  # 30 arms: 30 distinct lines in the legend
            for axis, x in ((0, "eval_step"), (1, "eval_tokens")):
                grid = np.linspace(0, min(r[x][-1] for r in rs), 60)
                ys = np.array([np.interp(grid, r[x], r["accuracy"]) for r in rs])
                ax[row, axis].plot(grid, np.median(ys, 0), color=col, ls=ls, label=f"{arm} ({len(rs)} seeds)")
                ax[row, axis].fill_between(grid, ys.min(0), ys.max(0), color=col, alpha=0.1)
            ns = np.median([r["no_signal_share"][: results["config"]["steps"]] for r in rs], 0)
            k = min(10, len(ns))
            ax[row, 2].plot(np.arange(k, len(ns) + 1), np.convolve(ns, np.ones(k) / k, "valid"), color=col, ls=ls)
        s = results["by_pool"][pool]
        for lv in s["target_levels"]:
            ax[row, 0].axhline(lv, color="k", ls=":", lw=0.8)
        ax[row, 0].set(
            xlabel="RL step", ylabel="held-out accuracy (exact)", title=f"{pool}: accuracy vs step (band: seeds)"
        )
        ax[row, 1].set(
            xlabel="generated tokens", ylabel="held-out accuracy (exact)", title="accuracy vs generated tokens"
        )
        ax[row, 2].set(xlabel="RL step", ylabel="share", ylim=(0, 1), title="prompts without gradient (10-step mean)")
        st = results["pools"][pool]
        ax[row, 3].bar(np.linspace(0.02, 0.98, 25), st["histogram"], width=0.035, color="gray")
        ax[row, 3].set(
            xlabel="warm-start exact pass rate",
            ylabel="prompts",
            title=f"{pool} pool ({st['share_below_0.2']:.0%} below 0.2, mean {st['mean']:.3f})",
        )
        _factor_panel(ax[row, 4], s.get("compute"), pool)
    _legend(fig, ax[:, 0])
    title = evidence.figure_title(results)
    if title:
        fig.suptitle(title, color="C3", fontsize=12, fontweight="bold")
    fig.tight_layout()
    tmp_png = png.with_name(f".{png.stem}.tmp.png")
    fig.savefig(tmp_png, dpi=90, bbox_inches="tight")
    plt.close(fig)
    tmp_png.replace(png)


def _legend(fig: Any, first_column: Any) -> None:
    """One legend for the whole figure, right of the last column: it covers no plot (every row has the same arms;
    a label seen in several rows is listed once)."""
    entries: dict[str, Any] = {}
    for axis in first_column:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    if entries:
        cols = 1 + len(entries) // 40
        fig.legend(entries.values(), entries.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, ncol=cols)


def _factor_panel(axis: Any, comp: dict[str, Any] | None, pool: str) -> None:
    """Tokens-to-target factor of every arm against the best uniform arm, 90% t-interval, log scale."""
    if not comp:
        axis.set_axis_off()
        return
    rows = [(a, r["tokens"]) for a, r in comp["table"].items() if r.get("tokens", {}).get("value")]
    rows.sort(key=lambda ar: ar[1]["value"])
    for i, (arm, f) in enumerate(rows):
        lo, hi = f.get("t_lo") or f["value"], f.get("t_hi") or f["value"]
        color = "C3" if arm == comp.get("oracle") else "C0"
        axis.errorbar(f["value"], i, xerr=[[f["value"] - lo], [hi - f["value"]]], fmt="o", color=color, capsize=2)
    axis.axvline(1.0, color="k", lw=0.8)
    axis.set_yticks(range(len(rows)), [a for a, _ in rows], fontsize=7)
    axis.set_xscale("log")
    ref = comp["axes"].get("tokens", {}).get("best_uniform")
    axis.set(xlabel=f"tokens to target: {ref} / arm (>1: fewer tokens)", title=f"{pool}: compute to target (90% t)")


def _rounded(x: Any) -> Any:
    if isinstance(x, float):
        return float(f"{x:.4g}")
    if isinstance(x, list | tuple):
        return [_rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return x


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    raise TypeError(f"not JSON serialisable: {type(x).__name__}")
