"""One results page (`Page`: the verdict, the results, the checks, the figures with their command, the provenance of
each result) and what every study's page reads to fill it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docgen.cells import cell, code
from docgen.results_meta import GENERATED, TITLES
from docgen.sources import ROOT, STUDIES, cpu_hours, machine_text, result_run_ids


@dataclass
class Page:
    study: str
    verdict: str = ""
    status: str = "info"
    """The admonition's kind: success (met), failure (missed), info (diagnostic, running)."""
    body: list[str] = field(default_factory=list)
    checks: list[tuple[str, str]] = field(default_factory=list)
    figures: list[tuple[str, str]] = field(default_factory=list)
    """(path under the site, the command that regenerates it)."""
    provenance: list[dict[str, Any]] = field(default_factory=list)
    cost: tuple[float, int, int] | None = None
    updated: str = ""

    def render(self) -> str:
        regen = f"python -m studies.{self.study}.regenerate"
        lines = [GENERATED, "", f"# {TITLES[self.study]}", ""]
        lines += [f'!!! {self.status} "Verdict"', f"    {self.verdict}", ""]
        meta = [f"Last updated {self.updated}" if self.updated else "No result yet"]
        if self.cost:
            h, n, timed = self.cost
            meta.append(f"{h:.1f} CPU-hours ({timed} of {n} recorded runs carry their seconds)")
        meta.append(f"write-up and registrations: `studies/{self.study}/`")
        lines += [" · ".join(meta), ""]
        lines += self.body
        if self.checks:
            lines += ["", "## Checks", "", "| check | result |", "|---|---|"]
            lines += [f"| {cell(c)} | {cell(r)} |" for c, r in self.checks]
        if self.figures:
            lines += ["", "## Figures", ""]
            for path, cmd in self.figures:
                name = Path(path).stem
                lines += [f"![{name}](../{path})", "", f"`{cmd}` regenerates `{name}.png`.", ""]
        if self.provenance:
            lines += [
                "",
                "## Provenance",
                "",
                f"Every result below regenerates from `studies/{self.study}/results/records.jsonl.gz` with `{regen}`.",
                "",
                "| result | date | code commit | machine | command | runs | CPU-hours |",
                "|---|---|---|---|---|---|---|",
            ]
            for p in self.provenance:
                commit = f"`{p['commit'][:10]}`" if p.get("commit") else "not recorded"
                lines.append(
                    f"| `{p['name']}` | {p.get('date') or 'not recorded'} | {commit} | {cell(p.get('machine'))} | "
                    f"{code(p.get('command') or 'not recorded')} | {p.get('runs', '')} | {p.get('hours', '')} |"
                )
        return "\n".join(lines).rstrip() + "\n"


def provenance(study: str, runs: dict[str, dict], results: dict[str, dict]) -> list[dict[str, Any]]:
    out = []
    for name, res in sorted(results.items()):
        meta = res.get("meta") or {}
        cfg = meta.get("config") or {}
        ids = result_run_ids(res) & set(runs)
        h, n, timed = cpu_hours(runs, ids)
        cpus = sorted({str(s["cpu"]) for i in ids for s in runs[i].get("sessions") or [] if s.get("cpu")})
        out.append(
            {
                "name": name,
                "date": meta.get("date"),
                "commit": meta.get("git_commit") or registered_code(meta),
                "machine": machine_text(meta.get("machine") or "; ".join(cpus)),  # else each run's sessions' CPUs
                "command": meta.get("command") or res.get("command") or cfg.get("command"),
                "runs": n or "",
                "hours": f"{h:.1f}" if timed else "",
            }
        )
    return out


def registered_code(meta: dict[str, Any]) -> str | None:
    """The commit a result's registration names as its code (`code = "..."`), when the result records no commit of
    its own: the registered studies run that commit's package from a worktree of it."""
    import tomllib

    path = (meta.get("preregistration_file") or {}).get("path")
    try:
        return tomllib.loads((ROOT / path).read_text()).get("code") if path else None
    except (OSError, tomllib.TOMLDecodeError):
        return None


def study_figures(study: str) -> list[tuple[str, str]]:
    cmd = f"python -m studies.{study}.regenerate"
    pngs = sorted((STUDIES / study / "results").glob("*.png")) + sorted((STUDIES / study / "results").glob("*/*.png"))
    return [(p.relative_to(ROOT).as_posix(), cmd) for p in pngs]
