"""The paper's difficulty filter: keep prompts the base model solves sometimes, but rarely.

1) Sample k answers per prompt from the base model and score them (the CLI does this with `evaluate.sample_correct`).
2) Keep a prompt iff its pass rate p = c/k lies in (lo, hi]. The defaults (0, 0.375] are the paper's v3 pipeline:
   drop prompts with no correct answer and those with "average reward > 0.375". The official code keeps
   p <= 0.313 ("easy") or p <= 0.125 ("hard") with at least one correct: that is `hi=0.313` / `hi=0.125` with
   `lo=0`, since p > 0 means c >= 1. Its 16 samples per prompt are `--samples 16`.
3) Report how many prompts fell into each pass-rate bucket and whether the bucket was kept, as a table and a PNG.

Everything here but `plot_histogram` is pure: pass rates in, kept indices and bucket counts out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError

PAPER_LO, PAPER_HI = 0.0, 0.375


def check_bounds(lo: float, hi: float) -> None:
    """0 <= lo < hi <= 1, else a ConfigError naming the flags."""
    if not (0.0 <= lo < hi <= 1.0):
        raise ConfigError(f"need 0 <= --lo < --hi <= 1, got lo={lo} and hi={hi}")


def pass_rates(correct: dict[str, list[float]], ids: Sequence[str]) -> list[float]:
    """Share of correct samples per prompt, in the order of `ids`.

    >>> pass_rates({"a": [1.0, 0.0], "b": [0.0, 0.0]}, ["b", "a"])
    [0.0, 0.5]
    """
    return [sum(correct[i]) / len(correct[i]) for i in ids]


def keep_indices(rates: Sequence[float], lo: float = PAPER_LO, hi: float = PAPER_HI) -> list[int]:
    """Indices of the prompts whose pass rate lies in (lo, hi].

    >>> keep_indices([0.0, 1 / 16, 0.375, 7 / 16, 1.0])
    [1, 2]
    """
    check_bounds(lo, hi)
    return [i for i, r in enumerate(rates) if lo < r <= hi]


@dataclass(frozen=True)
class Bucket:
    """Prompts that share one pass rate (with k samples each: c/k for c = 0..k)."""

    rate: float
    count: int
    kept: bool


def buckets(rates: Sequence[float], lo: float = PAPER_LO, hi: float = PAPER_HI) -> list[Bucket]:
    """One bucket per distinct pass rate, in increasing order.

    >>> [(b.rate, b.count, b.kept) for b in buckets([0.0, 0.25, 0.0, 1.0])]
    [(0.0, 2, False), (0.25, 1, True), (1.0, 1, False)]
    """
    check_bounds(lo, hi)
    counts = Counter(round(r, 9) for r in rates)
    return [Bucket(r, n, lo < r <= hi) for r, n in sorted(counts.items())]


def summary(rates: Sequence[float], lo: float = PAPER_LO, hi: float = PAPER_HI) -> dict[str, Any]:
    """Totals: prompts, kept, dropped as too hard (p <= lo) and as too easy (p > hi).

    >>> summary([0.0, 0.25, 0.0, 1.0])
    {'prompts': 4, 'kept': 1, 'too_hard': 2, 'too_easy': 1, 'lo': 0.0, 'hi': 0.375}
    """
    check_bounds(lo, hi)
    kept = len(keep_indices(rates, lo, hi))
    hard = sum(r <= lo for r in rates)
    return {
        "prompts": len(rates),
        "kept": kept,
        "too_hard": hard,
        "too_easy": len(rates) - kept - hard,
        "lo": lo,
        "hi": hi,
    }


def format_buckets(bs: Sequence[Bucket], samples: int) -> str:
    """A table: pass rate (as c/k when it is one), prompts, kept or why dropped."""
    lines = [f"{'pass rate':>16} {'prompts':>8}  bucket"]
    for b in bs:
        c = b.rate * samples
        label = f"{b.rate:.3f} ({round(c)}/{samples})" if abs(c - round(c)) < 1e-6 else f"{b.rate:.3f}"
        lines.append(f"{label:>16} {b.count:>8}  {'kept' if b.kept else 'dropped'}")
    return "\n".join(lines)


def plot_histogram(bs: Sequence[Bucket], path: Path, *, lo: float, hi: float, title: str = "") -> Path:
    """Bars of prompts per pass rate, kept buckets coloured, the (lo, hi] window shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = min((b2.rate - b1.rate for b1, b2 in zip(bs, bs[1:], strict=False)), default=0.05) * 0.8
    ax.axvspan(lo, hi, color="tab:green", alpha=0.08, label=f"kept: ({lo:g}, {hi:g}]")
    for kept, colour, label in ((True, "tab:green", "kept"), (False, "tab:gray", "dropped")):
        sel = [b for b in bs if b.kept == kept]
        ax.bar([b.rate for b in sel], [b.count for b in sel], width=width, color=colour, label=label)
    ax.set_xlabel("pass rate of the base model")
    ax.set_ylabel("prompts")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
