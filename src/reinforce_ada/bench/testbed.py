"""What every arm of `reinforce-ada compare` trains on: checked warm-start weights and prompt pools.

1) `check_weights(path)`: the sha256 of the weights and their exact per-level pass rates on the arithmetic held-out
   set, against the shipped warm start's recorded ones. A result made from other weights says so (`matches`).
2) A pool is a spec string (`parse_pool`): a built-in name, `arithmetic:` with level weights, or `file:` with any
   prompt file (JSONL, CSV, Parquet with prompt/answer[/level] columns), optionally passed through the paper's
   difficulty filter (`filter=LO-HI`: keep prompts whose count of correct answers c in `filter_samples` draws has
   LO < c/k <= HI, `evaluation.filter.keep_indices`). The draws are binomial from each prompt's exact pass rate:
   the same distribution as sampling k answers, seeded, and cheap enough for 10^4 candidates. `drop=LO-HI` removes
   the prompts whose c/k lies in (LO, HI] instead (both may be given: kept in one band, dropped from the other), and
   `filter_samples=0` applies both to each prompt's exact pass rate rather than to draws (no paper pipeline does
   that; the `mixed` pool needs it to cut a sharp solved tail, which 16 draws cannot tell from p = 0.8).
3) `build_pool` writes the pool's training and held-out prompts as JSONL (the trainer reads them as a file task)
   and records the warm start's exact pass rate of every pool prompt, the pool's digest and its histogram.
4) Long answers: `running_sums:` draws from `tasks.running_sums` (8 levels, answers of 8 to about 100 tokens) and
   is measured on the running-sums warm start (`training.warm_tasks`) with its own `max_new_tokens`
   (`pool_max_new_tokens`); its exact rate is the canonical answer's (a lower bound under the final-result
   verifier, exact under the strict one: `training.oracle`). `check_weights(..., task="running_sums")` checks
   those weights. The `long-*` built-ins are its pools. `compare` with long pools (`pools_task`; never mixed with
   arithmetic ones) loads the running-sums warm start and runs each job with that `max_new_tokens`; its runs score
   by exact match (`bench.run`'s verifier), which on these answers is the strict verifier: what the exact rates
   measure.
Held-out accuracy is the mean exact pass rate per level, weighted by each level's share of the training pool.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.types import Prompt

BUILTIN_POOLS = {
    "default": "arithmetic:weights=0/0/0.05/0.15/0.3/0.35/0.15,size=4096",
    "hard": "arithmetic:weights=0/0/1/1/1/1/1,size=4096,candidates=16384,filter=0-0.375",
    "small": "arithmetic:weights=0/0/0.05/0.15/0.3/0.35/0.15,size=256",
    "mixed": "arithmetic:weights=0/0.6/0.1/0.05/0.05/0/0.2,size=4096,candidates=8192,drop=0.5-0.9,filter_samples=0",
    "long-default": "running_sums:weights=0/0.1/0.15/0.2/0.2/0.15/0.1/0.1,size=4096",
    "long-hard": "running_sums:weights=0/0/1/1/1/1/1/1,size=4096,candidates=24576,filter=0-0.375",
    "long-mixed": "running_sums:weights=0/0.09/0.15/0.15/0.15/0.1/0.16/0.2,size=4096,candidates=8192,drop=0.5-0.9,"
    "filter_samples=0",
}
"""Fixed in advance. Stats measured with `build_pool` on the shipped warm start (exact per-level pass
rates L1..L7 = 0.97 0.74 0.47 0.29 0.17 0.066 0.007); p is a prompt's exact pass rate:
- `default`: the pool of the first convergence runs (mostly levels 4-6). Mean p 0.145; 30% below 0.02, 0.3% above 0.9.
- `hard`: shaped like the paper's hard set, levels 3-7 (3+3 ... 5+5 digits) kept where 0 < c/16 <= 0.375 under the
  warm start. Mean p 0.173; 5% below 0.02, none above 0.9.
- `small`: the default mix in 256 prompts, so a 16-prompt batch revisits each prompt every 16 steps (12 visits in 200
  steps): history-based rules have history. Mean p 0.148; 32% below 0.02, 0.8% above 0.9.
- `mixed`: heavy tails of solved and of hopeless prompts around a middle band: levels 2-5 and 7 with the band
  0.5 < p <= 0.9 removed by exact rate. Mean p 0.414; 29% below 0.02 (34% below 0.05), 35% above 0.9, 32% in between
  (0.05 <= p <= 0.9, nearly all of it 0.05-0.5).
The long-answer pools, on the running-sums warm start (exact per-level rates L1..L8 = 0.995 0.966 0.82 0.70 0.53 0.095
0.066 0.019; docs/long_answers.md):
- `long-default`: levels 2-8, mostly 3-6. Mean p 0.496; 27% below 0.05, 13% above 0.95.
- `long-hard`: levels 3-8 kept where 0 < c/16 <= 0.375 (24,576 candidates fill its 4,096). Mean p 0.160; 30% below
  0.05, none above 0.95.
- `long-mixed`: levels 2-8 with the band 0.5 < p <= 0.9 removed by exact rate. Mean p 0.319; 49% below 0.05, 16% above
  0.95.
"""
LONG_POOLS = ("long-default", "long-hard", "long-mixed")
"""The long-answer built-ins: named explicitly (`compare --pool long-hard`), never among a comparison's defaults,
which are the arithmetic pools (one comparison loads one model: `pools_task`)."""
PAPER_BUCKETS = ((0.002, 0.02, 0.197), (0.03, 0.15, 0.617), (0.2, 0.45, 0.174), (0.5, 0.9, 0.012))
"""The paper's hard set (v3 Table 5): share of prompts whose pass rate lies in each range."""
EVAL_SIZE = 256
"""Held-out prompts per arithmetic level: the set the warm start excluded from its training (seed 0)."""


SOURCES = ("arithmetic", "running_sums", "reasoning_gym", "file")
"""Where a pool's prompts come from (`PoolSpec.source`)."""


@dataclass(frozen=True)
class PoolSpec:
    name: str
    source: str
    """`arithmetic` (the built-in task), `running_sums` (its long-answer sibling, `tasks.running_sums`),
    `reasoning_gym` (reasoning-gym's chain sums and products in the tiny model's alphabet, `tasks.reasoning_pool`;
    the `reasoning` extra) or `file`."""
    weights: tuple[float, ...] | None = None
    size: int = 4096
    seed: int = 0
    candidates: int | None = None
    """arithmetic with a filter: problems drawn before filtering (default 4 x size)."""
    path: str | None = None
    eval_path: str | None = None
    prompt_key: str = "prompt"
    answer_key: str = "answer"
    filter: tuple[float, float] | None = None
    drop: tuple[float, float] | None = None
    """Remove the prompts whose c/k (or exact rate, with filter_samples=0) lies in (lo, hi]."""
    filter_samples: int = 16
    """k draws per prompt for `filter` and `drop`; 0: use the exact pass rate itself."""
    spec: str = ""


_KEYS = {
    "weights": "level weights, '/'-separated (arithmetic, running_sums; reasoning_gym, default equal)",
    "size": "prompts in the pool",
    "seed": "seed of the pool's draw",
    "candidates": "problems drawn before filtering (arithmetic, running_sums, reasoning_gym)",
    "path": "prompt file (file)",
    "eval": "held-out prompt file (file; default: 512 rows of path)",
    "prompt_key": "prompt column (file)",
    "answer_key": "answer column (file)",
    "filter": "difficulty filter LO-HI on c/k: keep LO < c/k <= HI",
    "drop": "difficulty band LO-HI on c/k to remove: drop LO < c/k <= HI",
    "filter_samples": "k draws per prompt for filter/drop (0: the exact pass rate, no draws)",
}


def parse_pool(spec: str) -> PoolSpec:
    """`default`, `hard`, or `NAME=arithmetic:weights=0/0/1/1/1/1/1,filter=0-0.375` / `NAME=file:path=p.jsonl` /
    `NAME=running_sums:weights=0/1/1/1/1/1/1/1` / `NAME=reasoning_gym:filter=0-0.375`."""
    spec = spec.strip()
    name, eq, body = spec.partition("=")
    if not eq:
        if name not in BUILTIN_POOLS:
            raise ConfigError(f"unknown pool {name!r}; use one of {sorted(BUILTIN_POOLS)} or NAME=SOURCE:OPTIONS")
        name, body = name, BUILTIN_POOLS[name]
    source, _, opts = body.partition(":")
    if source not in SOURCES or not name.strip():
        raise ConfigError(
            f"pool {spec!r}: write NAME=arithmetic:..., NAME=running_sums:..., NAME=reasoning_gym:... or "
            "NAME=file:path=..."
        )
    kw: dict[str, Any] = {"name": name.strip(), "source": source, "spec": f"{name.strip()}={body}"}
    for kv in filter(None, opts.split(",")):
        key, eq, raw = (x.strip() for x in kv.partition("="))
        if not eq or key not in _KEYS:
            raise ConfigError(f"pool {spec!r}: bad option {kv!r}; use key=value with key one of {sorted(_KEYS)}")
        try:
            if key == "weights":
                kw["weights"] = tuple(float(x) for x in raw.split("/"))
            elif key in ("filter", "drop"):
                lo, _, hi = raw.partition("-")
                kw[key] = (float(lo), float(hi))
            elif key in ("size", "seed", "candidates", "filter_samples"):
                kw[key] = int(raw)
            else:
                kw["eval_path" if key == "eval" else key] = raw
        except ValueError:
            raise ConfigError(f"pool {spec!r}: {key}={raw!r} is not valid ({_KEYS[key]})") from None
    p = PoolSpec(**kw)
    if p.source == "file" and not p.path:
        raise ConfigError(f"pool {spec!r}: a file pool needs path=FILE")
    if p.source in ("arithmetic", "running_sums") and p.weights is None:
        raise ConfigError(f"pool {spec!r}: an {p.source} pool needs weights=w1/w2/... (one per level)")
    for band in (p.filter, p.drop):
        if band is not None:
            from reinforce_ada.evaluation.filter import check_bounds

            check_bounds(*band)
    if p.size < 1 or p.filter_samples < 0:
        raise ConfigError(f"pool {spec!r}: size must be >= 1 and filter_samples >= 0 (0: exact rates)")
    if p.source == "reasoning_gym":  # generated one by one when the pool is built: bounded before any run
        from reinforce_ada.tasks.reasoning import MAX_GENERATED

        if (p.candidates or p.size) > MAX_GENERATED:
            raise ConfigError(f"pool {spec!r}: at most {MAX_GENERATED:,} reasoning-gym prompts (generated one by one)")
    return p


@dataclass
class Pool:
    spec: PoolSpec
    train: list[Prompt]
    held_out: list[Prompt]
    train_rates: np.ndarray
    """The warm start's exact pass rate of each training prompt."""
    held_out_rates: np.ndarray
    train_path: str = ""
    eval_path: str = ""
    digest: str = ""
    level_weights: tuple[tuple[int, float], ...] | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def build_pool(spec: PoolSpec, model: Any, tokenizer: Any, folder: Path, *, max_new_tokens: int | None = None) -> Pool:
    """Draw (and filter) the pool, measure its exact pass rates, write it as JSONL under `folder`.
    `max_new_tokens` None: `pool_max_new_tokens(spec)`."""
    from reinforce_ada.evaluation.exact import exact_pass_rates

    train, held_out = _draw(spec)

    max_new = pool_max_new_tokens(spec) if max_new_tokens is None else max_new_tokens

    def rates(ps: list[Prompt]) -> np.ndarray:
        return exact_pass_rates(model, tokenizer, ps, max_new_tokens=max_new)

    tr_rates, ho_rates = rates(train), rates(held_out)
    if selects(spec):
        rng = np.random.default_rng([spec.seed, spec.filter_samples])  # its own stream: the draw stays put
        tr_keep, ho_keep = (_filter(r, spec, rng) for r in (tr_rates, ho_rates))
        tr_keep = tr_keep[: spec.size]
        train, tr_rates = [train[i] for i in tr_keep], tr_rates[tr_keep]
        held_out, ho_rates = [held_out[i] for i in ho_keep], ho_rates[ho_keep]
    if not train or not held_out:
        raise ConfigError(f"pool {spec.spec!r} is empty after filtering ({len(train)} train, {len(held_out)} held out)")
    pool = Pool(spec, train, held_out, tr_rates, ho_rates)
    pool.level_weights = level_shares(train, held_out)
    out = Path(folder) / f"pool-{spec.name}"
    out.mkdir(parents=True, exist_ok=True)
    pool.train_path, pool.eval_path = str(out / "train.jsonl"), str(out / "eval.jsonl")
    h = hashlib.sha256()
    for path, ps in ((pool.train_path, train), (pool.eval_path, held_out)):
        text = "".join(
            json.dumps({"id": p.id, "prompt": p.text, "answer": p.answer, "level": p.level}) + "\n" for p in ps
        )
        Path(path).write_text(text)
        h.update(text.encode())
    pool.digest = h.hexdigest()
    pool.stats = pool_stats(tr_rates, ho_rates, len(train), len(held_out))
    return pool


def _draw(spec: PoolSpec) -> tuple[list[Prompt], list[Prompt]]:
    if spec.source in ("arithmetic", "running_sums"):  # the embedded model's two graded tasks: one drawing
        from reinforce_ada.tasks import arithmetic, running_sums

        task = arithmetic if spec.source == "arithmetic" else running_sums
        config = arithmetic.ArithmeticConfig if task is arithmetic else running_sums.RunningSumsConfig
        size = (spec.candidates or 4 * spec.size) if selects(spec) else spec.size
        try:
            cfg = config(level_weights=spec.weights, train_size=size, eval_size=EVAL_SIZE, seed=spec.seed)
        except ValueError as e:
            raise ConfigError(f"pool {spec.spec!r}: {e}") from None
        train, held_out = task.make_split(cfg)
        used = {i + 1 for i, w in enumerate(cfg.level_weights) if w > 0}
        return train, [p for p in held_out if p.level in used]
    if spec.source == "reasoning_gym":
        from reinforce_ada.tasks import reasoning_pool

        size = (spec.candidates or 4 * spec.size) if selects(spec) else spec.size
        return reasoning_pool.make_split(spec.weights or reasoning_pool.WEIGHTS, size, EVAL_SIZE, spec.seed)
    from reinforce_ada.tasks.files import load_prompts

    prompts = load_prompts(spec.path, prompt_key=spec.prompt_key, answer_key=spec.answer_key)
    if spec.eval_path:
        return prompts, load_prompts(spec.eval_path, prompt_key=spec.prompt_key, answer_key=spec.answer_key)
    order = np.random.default_rng(spec.seed).permutation(len(prompts))
    n_eval = min(512, len(prompts) // 4)
    return [prompts[i] for i in sorted(order[n_eval:])][: spec.size], [prompts[i] for i in sorted(order[:n_eval])]


def pool_max_new_tokens(spec: PoolSpec) -> int:
    """New tokens a pool's exact rates and runs allow: the running-sums task's own (`tasks.running_sums`), else 8
    (the arithmetic testbed's)."""
    if spec.source == "running_sums":
        from reinforce_ada.tasks.running_sums import RunningSumsConfig, max_new_tokens

        return max_new_tokens(RunningSumsConfig())
    return 8


def pools_task(pools: Any) -> str:
    """The warm start a comparison's pools are measured and trained on: `running_sums` when every pool is a
    `running_sums:` one, else `arithmetic`; a mix is a ConfigError (one comparison loads one model)."""
    sources = {parse_pool(p).source == "running_sums" for p in pools}
    if sources == {True, False}:
        raise ConfigError(
            f"pools {list(pools)} mix long-answer (running_sums) pools with others: they need different models "
            "(tiny-running-sums, tiny-arithmetic); compare them in separate runs"
        )
    return "running_sums" if sources == {True} else "arithmetic"


def selects(spec: PoolSpec) -> bool:
    """Whether the pool is cut from a larger draw of candidates (a `filter` or a `drop` band)."""
    return spec.filter is not None or spec.drop is not None


def _filter(rates: np.ndarray, spec: PoolSpec, rng: np.random.Generator) -> np.ndarray:
    """Indices kept, in draw order: c/k (or the exact rate) in the `filter` band and outside the `drop` band."""
    from reinforce_ada.evaluation.filter import keep_indices

    k = spec.filter_samples
    r = np.clip(rates, 0.0, 1.0)
    seen = (rng.binomial(k, r) / k if k else r).tolist()
    keep = set(keep_indices(seen, *spec.filter)) if spec.filter is not None else set(range(len(seen)))
    if spec.drop is not None:
        keep -= set(keep_indices(seen, *spec.drop))
    return np.array(sorted(keep), dtype=int)


def level_shares(train: list[Prompt], held_out: list[Prompt]) -> tuple[tuple[int, float], ...] | None:
    """Each level's share of the training pool (the weights of the held-out accuracy); None without levels."""
    if any(p.level is None for p in train) or any(p.level is None for p in held_out):
        return None
    have = {p.level for p in held_out}
    counts: dict[int, int] = {}
    for p in train:
        counts[p.level] = counts.get(p.level, 0) + 1  # type: ignore[index]
    missing = sorted(set(counts) - have)
    if missing:
        raise ConfigError(f"the held-out prompts have no level {missing}, which the training pool has")
    return tuple((lv, n / len(train)) for lv, n in sorted(counts.items()))


def pool_stats(train_rates: np.ndarray, held_out_rates: np.ndarray, n_train: int, n_eval: int) -> dict[str, Any]:
    r = np.asarray(train_rates)
    return {
        "prompts": n_train,
        "held_out_prompts": n_eval,
        "mean": float(r.mean()),
        "held_out_mean": float(np.mean(held_out_rates)),
        "share_below_0.2": float((r < 0.2).mean()),
        "share_0.02_to_0.2": float(((r >= 0.02) & (r < 0.2)).mean()),
        "share_below_0.02": float((r < 0.02).mean()),
        "quantiles": {str(q): float(np.quantile(r, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9)},
        "histogram": np.histogram(r, bins=np.linspace(0, 1, 26))[0].tolist(),
        "paper_buckets": [
            {"range": [lo, hi], "paper": share, "pool": float(((r >= lo) & (r <= hi)).mean())}
            for lo, hi, share in PAPER_BUCKETS
        ],
    }


def check_weights(
    model_path: str | Path, model: Any, tokenizer: Any, *, tol: float = 1e-4, task: str = "arithmetic"
) -> dict[str, Any]:
    """The weights' sha256 and exact per-level pass rates on the task's held-out set, vs the shipped record.

    `task`: `arithmetic` (the shipped testbed) or `running_sums` (the long-answer warm start, its held-out set of
    `RunningSumsConfig()`). `matches`: same sha256 as the shipped warm start; `rates_match`: the measured rates equal
    the recorded ones within `tol` (same weights on another CPU or torch agree to about 1e-6).
    """
    from reinforce_ada.training.warm_start import exact_level_rates, warm_start_info, weights_sha256
    from reinforce_ada.training.warm_tasks import WARM_TASKS, default_configs

    if task not in WARM_TASKS:
        raise ConfigError(f"check_weights: task={task!r} is not valid; choose one of {sorted(WARM_TASKS)}")
    kind = WARM_TASKS[task]
    shipped = warm_start_info(kind.shipped_dir)
    cfg = default_configs(task)[0] if task != "arithmetic" else kind.config_type(eval_size=EVAL_SIZE, seed=0)
    rates = exact_level_rates(model, tokenizer, kind.make_split(cfg)[1], kind.max_new_tokens(cfg))
    measured = {str(k): v for k, v in rates.items()}
    recorded = shipped.get("exact_pass_rates", {})
    diff = max((abs(measured[k] - recorded[k]) for k in measured if k in recorded), default=None)
    sha = weights_sha256(Path(model_path))
    return {
        "path": str(model_path),
        "sha256": sha,
        "shipped_sha256": shipped.get("sha256"),
        "matches": sha is not None and sha == shipped.get("sha256"),
        "exact_pass_rates": measured,
        "recorded_pass_rates": recorded,
        "max_rate_diff": diff,
        "rates_match": diff is not None and diff <= tol,
    }


def with_size(spec: PoolSpec, size: int) -> PoolSpec:
    """The same pool with fewer prompts (quick runs)."""
    cand = None if spec.candidates is None else max(size, spec.candidates * size // spec.size)
    return replace(spec, size=min(size, spec.size), candidates=cand)
