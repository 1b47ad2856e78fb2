"""Evaluation as the paper reports it, on one benchmark or several.

1) Ave@k, the paper's headline metric: mean accuracy over k samples per prompt at temperature 1 (Ave@32 there).
2) pass@k with the unbiased estimator 1 - C(n-c, k)/C(n, k) (Chen et al. 2021), for k = 1, 2, 4, ... up to the
   sample count; pass@1 equals Ave@k in expectation and exactly here.
3) Greedy accuracy (one sample at temperature 0) and a per-level breakdown where prompts carry levels.
4) Several benchmarks: the average row is weighted by benchmark size (the paper's W.Avg: MATH500, Minerva,
   OlympiadBench and AIME-like weighted by their number of problems), i.e. the mean over all prompts pooled.

Benchmarks by name are `evaluation.datasets`; loading a model folder for evaluation is `evaluation.loading`.
`sample_correct` is the only part that calls an engine; `summarize`, `weighted_average` and `markdown` are pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from math import comb
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import score
from reinforce_ada.types import Prompt, Request


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021).

    >>> pass_at_k(4, 1, 1), pass_at_k(4, 1, 2), pass_at_k(4, 0, 4), pass_at_k(4, 1, 4)
    (0.25, 0.5, 0.0, 1.0)
    """
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_ks(samples: int) -> list[int]:
    """The k reported for `samples` samples: powers of two up to it, and the sample count itself.

    >>> pass_ks(8), pass_ks(6), pass_ks(1)
    ([1, 2, 4, 8], [1, 2, 4, 6], [1])
    """
    ks = [2**i for i in range(samples.bit_length()) if 2**i <= samples]
    return ks if ks[-1] == samples else [*ks, samples]


SAMPLE_BYTES = 1024
"""Memory of one `Sample` without its tokens (the object, its fields, the engine's bookkeeping)."""
TOKEN_BYTES = 80
"""Memory per completion token in a `Sample`: its id and log-prob as Python objects in lists, and its text."""


def sample_bytes(max_new_tokens: int) -> int:
    """Upper bound on one sample's memory: `sample_correct` holds every sample of a benchmark at once, so the command
    line refuses a --samples whose prompts x samples x this would not fit in memory (--samples 10**9 was once a
    MemoryError after the model had loaded).

    >>> sample_bytes(512)
    41984
    """
    return SAMPLE_BYTES + TOKEN_BYTES * max_new_tokens


def sample_correct(
    engine: Any,
    prompts: Sequence[Prompt],
    verifier: Callable[[str, str], float],
    *,
    samples: int,
    threshold: float = 0.5,
    progress: Any | None = None,
    chunk: int = 16,
    examples: list[dict[str, Any]] | None = None,
    keep: int = 3,
) -> tuple[dict[str, list[float]], int]:
    """`samples` completions per prompt, scored: ({prompt id: [1.0 if correct else 0.0, ...]}, verifier errors).

    With `progress` (a bar with `update(n)`, e.g. tqdm) the prompts are sampled `chunk` at a time and the bar moves
    after each chunk, so a long evaluation shows an ETA from its first chunk on (the same law; other draws)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    if progress is None:
        out = engine.generate([Request(p, samples) for p in prompts])
    else:
        out = []
        for lo in range(0, len(prompts), chunk):
            part = prompts[lo : lo + chunk]
            out.extend(engine.generate([Request(p, samples) for p in part]))
            progress.update(len(part))
    by_id = {p.id: p for p in prompts}
    errors = score(out, by_id, verifier)
    if examples is not None:  # the first `keep` scored completions, as a person would read them
        examples.extend(
            {
                "prompt": by_id[x.prompt_id].text,
                "completion": x.text,
                "answer": by_id[x.prompt_id].answer,
                "reward": x.reward,
                "finish_reason": x.finish_reason,
                "num_tokens": x.num_tokens,
            }
            for x in out[:keep]
        )
    correct: dict[str, list[float]] = defaultdict(list)
    for s in out:
        correct[s.prompt_id].append(float(s.reward > threshold))  # type: ignore[operator]
    return dict(correct), errors


METRICS: dict[str, str] = {
    "eval_accuracy": "Ave@k: mean over held-out prompts of the share of their k samples that are correct.",
    "eval_pass@{k}": "Unbiased pass@k, 1 - C(n - c, k) / C(n, k), averaged over prompts (the trainer: k = "
    "run.eval_samples).",
    "eval_accuracy_L{level}": "Only where prompts carry levels: eval_accuracy over the prompts of that level.",
    "eval_prompts": "Held-out prompts evaluated.",
    "eval_samples": "Samples per held-out prompt (k, run.eval_samples in the trainer).",
    "eval_verifier_errors": "Verifier calls of the evaluation that failed or timed out (each scored 0).",
    "eval_greedy_accuracy": "Only with a greedy engine (reinforce-ada evaluate --greedy, never the trainer): share "
    "of prompts whose one greedy completion is correct.",
}
"""What `summarize` and `evaluate` return: the keys of the trainer's evaluation lines (docs/metrics.md)."""


def summarize(prompts: Sequence[Prompt], correct: dict[str, list[float]], ks: Sequence[int]) -> dict[str, Any]:
    """Flat metrics from per-prompt correctness: `eval_accuracy` (Ave@k), `eval_pass@k` per k, per level."""
    if not prompts:
        raise ConfigError("no prompts to evaluate")
    n = len(correct[prompts[0].id])
    m: dict[str, Any] = {"eval_accuracy": float(np.mean([np.mean(correct[p.id]) for p in prompts]))}
    for k in ks:
        m[f"eval_pass@{k}"] = float(np.mean([pass_at_k(n, int(sum(correct[p.id])), k) for p in prompts]))
    m["eval_prompts"], m["eval_samples"] = len(prompts), n
    levels: dict[Any, list[str]] = defaultdict(list)
    for p in prompts:
        levels[p.level].append(p.id)
    if len(levels) > 1 or None not in levels:
        for level, ids in sorted(levels.items(), key=lambda kv: str(kv[0])):
            m[f"eval_accuracy_L{level}"] = float(np.mean([np.mean(correct[i]) for i in ids]))
    return m


def evaluate(
    engine: Any,
    prompts: Sequence[Prompt],
    verifier: Callable[[str, str], float],
    *,
    samples: int = 4,
    threshold: float = 0.5,
    greedy_engine: Any | None = None,
    ks: Sequence[int] | None = None,
    progress: Any | None = None,
    examples: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Sample, score and summarise one benchmark; `ks` defaults to (samples,), the trainer's eval lines; `progress`
    and `examples` (filled with the first few scored completions): see `sample_correct`."""
    correct, errors = sample_correct(
        engine, prompts, verifier, samples=samples, threshold=threshold, progress=progress, examples=examples
    )
    m = summarize(prompts, correct, ks or (samples,))
    m["eval_verifier_errors"] = errors
    if greedy_engine is not None:
        g = greedy_engine.generate([Request(p, 1) for p in prompts])
        m["eval_verifier_errors"] += score(g, {p.id: p for p in prompts}, verifier)
        m["eval_greedy_accuracy"] = float(np.mean([s.reward > threshold for s in g]))  # type: ignore[operator]
    return m


SUMMED = ("eval_prompts", "eval_verifier_errors")


def weighted_average(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Size-weighted mean of every metric all benchmarks report (the paper's W.Avg); counts are summed.

    >>> a, b = {"eval_prompts": 1, "eval_accuracy": 1.0}, {"eval_prompts": 3, "eval_accuracy": 0.0}
    >>> weighted_average({"a": a, "b": b})
    {'eval_prompts': 4, 'eval_accuracy': 0.25}
    """
    rows = list(results.values())
    common = [k for k in rows[0] if all(k in r for r in rows)]
    sizes = np.array([r["eval_prompts"] for r in rows], dtype=float)
    avg: dict[str, Any] = {}
    for k in common:
        if k in SUMMED:
            avg[k] = int(sum(r[k] for r in rows))
        elif k == "eval_samples":
            avg[k] = rows[0][k]
        elif isinstance(rows[0][k], float):
            avg[k] = float(np.dot(sizes, [r[k] for r in rows]) / sizes.sum())
    return avg


def markdown(results: dict[str, dict[str, Any]], average: dict[str, Any], header: str = "") -> str:
    """One table (a row per benchmark and a W.Avg row, in percent) and a per-level table per benchmark with levels."""
    k = average["eval_samples"]
    ks = sorted(int(key.split("@")[1]) for key in average if key.startswith("eval_pass@"))
    greedy = "eval_greedy_accuracy" in average
    cols = ["benchmark", "prompts", f"Ave@{k}", *(f"pass@{j}" for j in ks), *(["greedy"] if greedy else [])]
    keys = ["eval_accuracy", *(f"eval_pass@{j}" for j in ks), *(["eval_greedy_accuracy"] if greedy else [])]
    lines = [header, ""] if header else []
    lines += ["| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]
    for name, m in [*results.items(), ("**W.Avg**", average)]:
        lines.append(f"| {name} | {m['eval_prompts']} | " + " | ".join(f"{100 * m[x]:.1f}" for x in keys) + " |")
    for name, m in results.items():
        levels = [key for key in m if key.startswith("eval_accuracy_L")]
        if levels:
            lines += ["", f"{name} by level (%):", "", f"| level | Ave@{k} |", "|---|---:|"]
            lines += [f"| {key[len('eval_accuracy_L') :]} | {100 * m[key]:.1f} |" for key in levels]
    return "\n".join(lines) + "\n"
