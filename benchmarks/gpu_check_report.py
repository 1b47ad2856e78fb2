"""`benchmarks.gpu_check`'s printed table and figure, from its result JSON."""

from __future__ import annotations

from pathlib import Path


def table(res: dict) -> str:
    lines = []
    for key in ("generation", "generation_big", "training"):
        if "error" in res.get(key, {}) or "skipped" in res.get(key, {}):
            lines.append(f"{key}: {res[key].get('error') or res[key]['skipped']}")
    for key in ("generation", "generation_big"):
        g = res.get(key, {})
        for dtype in ("float32", "bfloat16"):
            for wl, r in g.get(dtype, {}).items():
                if "skipped" in r:
                    lines.append(f"{key:15} {dtype:9} {wl:10} skipped: {r['skipped']}")
                    continue
                cells = "  ".join(
                    f"{side} {r[side]['tokens_per_s']:8.0f}" for side in ("engine", "hf_engine", "generate")
                )
                lines.append(
                    f"{key:15} {dtype:9} {wl:10} {r['prompts']}x{r['samples']}  tok/s: {cells}  "
                    f"engine/generate {r['ratio_engine_vs_generate']:.2f}"
                )
    t = res.get("training", {})
    for arm, m in t.get("median", {}).items():
        lines.append(
            f"train {arm:24} step {m['time_step_s']:.3f} s (gen {m['time_generate_s']:.3f}, train "
            f"{m['time_train_s']:.3f})  samples/step {m['samples_generated']:.0f}  "
            f"x{t['ratio_step_vs_grpo_n4'].get(arm, float('nan')):.2f} of GRPO-n4  "
            f"|logp sampler - learner| max {m['mismatch_logp_abs_max']:.1e}"
        )
    for name, p in t.get("paths", {}).items():
        lines.append(f"path {name}: {'ok' if p['ok'] else p['error']}")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ag, at) = plt.subplots(1, 2, figsize=(12, 4.5))
    g = res.get("generation", {})
    labels, sides = [], ("engine", "hf_engine", "generate")
    cells = [(d, w, r) for d in ("float32", "bfloat16") for w, r in g.get(d, {}).items() if "engine" in r]
    for j, side in enumerate(sides):
        ag.bar([i + (j - 1) * 0.27 for i in range(len(cells))], [r[side]["tokens_per_s"] for _, _, r in cells], 0.27)
    labels = [f"{d}\n{w} {r['prompts']}x{r['samples']}" for d, w, r in cells]
    ag.set_xticks(range(len(cells)), labels, fontsize=7)
    ag.legend(["ours (SlotEngine)", "HFEngine", "model.generate"], fontsize=8)
    ag.set_ylabel("tokens / s (median)")
    ag.set_title(f"generation, {res['settings']['shape']} (random init)")
    med = res.get("training", {}).get("median", {})
    names = list(med)
    at.barh(names, [med[a]["time_generate_s"] for a in names], label="generate")
    at.barh(
        names,
        [med[a]["time_step_s"] - med[a]["time_generate_s"] for a in names],
        left=[med[a]["time_generate_s"] for a in names],
        label="rest of step",
    )
    for i, a in enumerate(names):
        at.text(med[a]["time_step_s"], i, f" {med[a]['samples_generated']:.0f} samples", va="center", fontsize=8)
    at.invert_yaxis()
    at.set_xlabel("median seconds per step")
    at.set_title("trainer step")
    at.legend(fontsize=8)
    gpu = res.get("env", {}).get("gpu", {}).get("name", res.get("env", {}).get("device", "?"))
    fig.suptitle(f"{gpu}, torch {res['env']['torch']}, {res['date'][:10]}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
