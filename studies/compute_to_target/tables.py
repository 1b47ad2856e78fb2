"""The compute-to-target study's Markdown tables, from its result JSONs (README.md quotes them)."""

from __future__ import annotations

from typing import Any

from reinforce_ada.bench.compute import no_ceiling_gain


def markdown_table(results: dict[str, Any]) -> str:
    """Rows = arms, columns = tokens / CPU / GPU-model factors and oracle share per pool (t-intervals)."""

    def cell(d: dict[str, Any] | None) -> str:
        if not d or d.get("value") is None:
            return "—"
        if d.get("t_lo") is None:
            return f"{d['value']:.2f}"
        return f"{d['value']:.2f} [{d['t_lo']:.2f}, {d['t_hi']:.2f}]"

    pools = list(results["by_pool"])
    head = "| arm | " + " | ".join(f"{p}: tokens | {p}: CPU s | {p}: GPU-model s | {p}: oracle share" for p in pools)
    lines = [head + " |", "|---" * (1 + 4 * len(pools)) + "|"]
    arms = list(dict.fromkeys(a for p in pools for a in results["by_pool"][p]["compute"]["table"]))
    for arm in arms:
        cells = []
        for p in pools:
            comp = results["by_pool"][p]["compute"]
            r = comp["table"].get(arm, {})
            share = r.get("oracle_share", {}).get("value")
            cells += [cell(r.get("tokens")), cell(r.get("cpu_s")), cell(r.get("gpu_s"))]
            ceiling = comp["table"].get(comp.get("oracle") or "", {}).get("tokens", {})
            if share is None:
                cells.append("—")
            elif (ceiling.get("t_lo") or 0) <= 1.0:  # the oracle gains nothing for sure: a share of it means little
                cells.append(f"({share:.2f}; C0 ≈ 1)")
            else:
                cells.append(f"{share:.2f}")
        tags = []
        for p in pools:
            comp = results["by_pool"][p]["compute"]
            if comp["axes"]["tokens"]["best_uniform"] == arm:
                tags.append(f"best uniform on {p}")
            if comp.get("oracle") == arm:
                tags.append(f"oracle on {p}")
        lines.append(f"| {arm}{' (' + ', '.join(tags) + ')' if tags else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def opening_table(by_pool: dict[str, dict[str, Any]]) -> str:
    """The study's opening table over several pools' results (pool -> that pool's results JSON): rows = arms,
    per pool the tokens factor with its 90% t-interval and the CPU / GPU-model factors, then the headline figures
    C0-C3 per pool with the arm each one reads."""

    def cell(d: dict[str, Any] | None, ci: bool = True) -> str:
        if not d or d.get("value") is None:
            return "—"
        if not ci or d.get("t_lo") is None:
            return f"{d['value']:.2f}"
        return f"{d['value']:.2f} [{d['t_lo']:.2f}, {d['t_hi']:.2f}]"

    comps = {p: r["by_pool"][p]["compute"] for p, r in by_pool.items()}
    pools = list(comps)
    head = "| arm | " + " | ".join(f"{p}: tokens | {p}: CPU / GPU-model" for p in pools) + " |"
    lines = [head, "|---" * (1 + 2 * len(pools)) + "|"]
    for arm in dict.fromkeys(a for c in comps.values() for a in c["table"]):
        cells, tags = [], []
        for p, c in comps.items():
            r = c["table"].get(arm)
            if r is None:
                cells += ["—", "—"]
                continue
            cells += [cell(r.get("tokens")), f"{cell(r.get('cpu_s'), False)} / {cell(r.get('gpu_s'), False)}"]
            if c["axes"]["tokens"]["best_uniform"] == arm:
                tags.append(f"best uniform: {p}")
            if c.get("oracle") == arm:
                tags.append(f"oracle: {p}")
        lines.append(f"| {arm}{' (' + '; '.join(tags) + ')' if tags else ''} | " + " | ".join(cells) + " |")
    lines += ["", "| figure | " + " | ".join(pools) + " |", "|---" * (1 + len(pools)) + "|"]
    for fig in ("C0", "C1", "C2", "C2g", "C3"):
        row = []
        for p, r in by_pool.items():
            h = r.get("compute", {}).get("by_pool", {}).get(p, {}).get(fig)
            if not h or h.get("value") is None:
                row.append("—")
                continue
            mark = "" if h.get("preregistration", {}).get("preregistered") else " (not pre-registered)"
            value = f"{h['value']:.2f}" if fig == "C3" else cell(h)
            if fig == "C3" and no_ceiling_gain(r["compute"]["by_pool"][p].get("C0")):
                mark += " (C0's interval holds 1: no ceiling gain to share)"
            row.append(f"{value} ({h.get('arm')}){mark}")
        lines.append(f"| {fig} | " + " | ".join(row) + " |")
    return "\n".join(lines)
