"""The speed and engine benchmarks' tables for hand-written pages (`docgen.blocks`), from their committed results
under `benchmarks/results/` (each JSON keeps its command, machine and date): the goals P4-P8, the engine race (P6,
P8), Ray's throughput on this machine, the TRL integration's overhead (P7), the README's main command
(`default_run`) and how long each documented command took (`newcomer`): a time the docs state is one of these.
Not a study: a benchmark times one thing on one machine, and its write-up with the conditions of each measurement
stays in docs/benchmarks.md.
"""

from __future__ import annotations

from docgen.cells import cell, code, verdict
from docgen.sources import ROOT, read_json

RESULTS = ROOT / "benchmarks" / "results"


def _iv(value: float | None, interval: list[float] | None = None, digits: int = 2, bold: bool = False) -> str:
    """A number with its 95% interval, as the benchmarks record them (`interval_95`: [lo, hi])."""
    if value is None:
        return "n/a"
    v = f"**{value:.{digits}f}**" if bold else f"{value:.{digits}f}"
    return f"{v} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]" if interval else v


def speed_goals() -> list[str]:
    """P4-P8 (`benchmarks/results/summary.json`): each goal's headline and its per-model entries."""
    summary = read_json(RESULTS / "summary.json")
    lines = ["| goal | measured | target | verdict |", "|---|---|---|---|"]
    for key, e in summary.items():
        if not isinstance(e, dict) or e.get("value") is None:
            continue
        parts = [_iv(e["value"], e.get("interval_95"))]
        parts += [
            f"{name} {_iv(sub['value'], sub.get('interval_95'))}"
            for name, sub in e.items()
            if isinstance(sub, dict) and isinstance(sub.get("value"), int | float)
        ]
        what = cell(str(e.get("what", "")).split(";")[0])
        checked = {**e, "lo": (e.get("interval_95") or [None])[0], "hi": (e.get("interval_95") or [None, None])[1]}
        lines.append(f"| {key} {what} | {'; '.join(parts)} | {e.get('goal', '')} | {verdict(checked, e.get('goal'))} |")
    return lines


def engine_race() -> list[str]:
    """Tokens/s of our engine, HFEngine, `generate` and vLLM, and the P8 and P6 ratios: the quiet fp32 run first,
    then the loaded run (`engine_race_fp32.json`, `engine_race.json`)."""
    lines = [
        "| run | dtype | workload | our engine tok/s | HFEngine | `generate` | vLLM | ours ÷ vLLM (P8) "
        "| ours ÷ `generate` |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run, name in (("quiet", "engine_race_fp32.json"), ("loaded", "engine_race.json")):
        res = read_json(RESULTS / name)
        for r in sorted(res["table"], key=lambda r: (r["dtype"] == "float32", r["workload"] != "seq-like")):
            shape = res["dtypes"][r["dtype"]][r["workload"]]
            work = {"seq-like": "Seq-like", "grpo-like": "GRPO-like"}.get(r["workload"], r["workload"])
            lines.append(
                f"| {run} | {'fp32' if r['dtype'] == 'float32' else 'bf16'} | {work}, {shape['prompts']} prompts × "
                f"{shape['samples']} | {r['engine']:.1f} | {r['hf_engine']:.1f} | {r['generate']:.1f} | "
                f"{r['vllm']:.1f} | {_iv(r['P8_engine_over_vllm'], r['P8_interval_95'])} | "
                f"{_iv(r['P6_engine_over_generate'], r['P6_interval_95'])} |"
            )
    return lines


def ray_throughput() -> list[str]:
    """Samples/s per side and model, median of the interleaved repeats with its 95% interval."""
    res = read_json(RESULTS / "ray_throughput.json")
    names = {
        "inproc-2t": "workers = 0, 2 torch threads (`inproc-2t`)",
        "inproc-1t": "workers = 0, 1 torch thread (`inproc-1t`)",
        "ray-1": "workers = 1 (1 thread)",
        "ray-2": "workers = 2 (1 thread each)",
    }
    models = res["models"]
    head = [
        f"{m['model']}: {m['prompts']} x {m['samples_per_prompt']}, <= {m['max_new_tokens']} tokens" for m in models
    ]
    lines = ["| side | " + " | ".join(head) + " |", "|---|" + "---|" * len(models)]
    for side, label in names.items():
        cells = []
        for m in models:
            s = m["sides"][side]
            digits = 0 if s["samples_per_s"] >= 100 else 1
            cells.append(_iv(s["samples_per_s"], s.get("interval_95"), digits))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + ["", f"`{res['command']}`, {res['date']}, {res['machine']}, {res['repeats']} repeats."]


def trl_step_time() -> list[str]:
    """Stock `GRPOTrainer`, `AdaGRPOTrainer(strategy="uniform")` and Ada-Seq step in turn (P7)."""
    lines = [
        "| model (timed steps) | stock s/step | uniform ÷ stock (P7) | Ada-Seq ÷ stock | samples/step stock, seq "
        "| date |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("trl_step_time_smollm2.json", "trl_step_time.json"):
        r = read_json(RESULTS / name)
        stock = r["median_step_s"]["stock"]
        ratio, iv = r["ratio_vs_stock"], r["ratio_interval_95"]
        lines.append(
            f"| {r['model']} ({r['steps']}) | {stock:.3g} | {_iv(ratio['ada-uniform'], iv['ada-uniform'])} | "
            f"{_iv(ratio['ada-seq'], iv['ada-seq'])} | {r['samples_per_step']['stock']:.0f}, "
            f"{r['samples_per_step']['ada-seq']:.1f} | {r['date']} |"
        )
    return lines


def default_run() -> list[str]:
    """The README's main command as `benchmarks.default_run` timed it (`default_run.json`)."""
    r = read_json(RESULTS / "default_run.json")
    per_step = r["rl_time_s"] / r["rl_steps"]
    return [
        f"Measured by `python -m benchmarks.default_run` ({r['date']}, {r['machine']}): {r['rl_steps']} RL steps in "
        f"{r['rl_time_s']:.0f} s ({per_step:.2f} s a step), {r['wall_s']:.0f} s in all with a cold cache (the warm "
        f"start trained then, {r['warm_start_train_s']:.0f} s; the package now ships it), peak memory "
        f"{r['peak_rss_gib']:.2f} GiB, held-out Ave@4 {r['eval_accuracy_start']:.3f} -> {r['eval_accuracy_end']:.3f}."
    ]


def command_times() -> list[str]:
    """How long each documented command took in the last newcomer walk (`newcomer.json`), skipped ones said so."""
    r = read_json(RESULTS / "newcomer.json")
    lines = [
        f"`{r['command']}` ({r['date'][:10]}, {r['machine']}; {r['venv']} virtual environment): {r['ran']} commands "
        f"ran, {r['skipped']} skipped, {r['total_s'] / 60:.0f} minutes in all.",
        "",
        "| command | seconds | note |",
        "|---|---|---|",
    ]
    for step in r["steps"]:
        note = step.get("why") or ""
        if step.get("ran") and step["ran"] != step["readme"]:
            note = "ran a stand-in: " + code(step["ran"])
        secs = f"{step['seconds']:.0f}" if step.get("seconds") is not None else step["status"]
        lines.append(f"| {code(step['readme'])} | {secs} | {cell(note)} |")
    return lines


def blocks() -> dict[str, list[str]]:
    """The benchmark blocks by marker name."""
    return {
        "default-run": default_run(),
        "command-times": command_times(),
        "speed-goals": speed_goals(),
        "engine-race": engine_race(),
        "ray-throughput": ray_throughput(),
        "trl-step-time": trl_step_time(),
    }
