"""Evaluation as the paper reports it, on one benchmark or several.

1) Ave@k, the paper's headline metric: mean accuracy over k samples per prompt at temperature 1 (Ave@32 there).
2) pass@k with the unbiased estimator 1 - C(n-c, k)/C(n, k) (Chen et al. 2021), for k = 1, 2, 4, ... up to the
   sample count; pass@1 equals Ave@k in expectation and exactly here.
3) Greedy accuracy (one sample at temperature 0) and a per-level breakdown where prompts carry levels.
4) Several benchmarks: the average row is weighted by benchmark size (the paper's W.Avg: MATH500, Minerva,
   OlympiadBench and AIME-like weighted by their number of problems), i.e. the mean over all prompts pooled.

Benchmarks are named by a spec: a built-in (`DATASETS`: arithmetic, gsm_symbolic, gsm8k_original, champ) or a
JSONL / CSV / Parquet file. `sample_correct` is the only part that calls an engine; `summarize`,
`weighted_average` and `markdown` are pure.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Sequence
from math import comb
from pathlib import Path
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.rollout import score
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


def sample_correct(
    engine: Any,
    prompts: Sequence[Prompt],
    verifier: Callable[[str, str], float],
    *,
    samples: int,
    threshold: float = 0.5,
) -> tuple[dict[str, list[float]], int]:
    """`samples` completions per prompt, scored: ({prompt id: [1.0 if correct else 0.0, ...]}, verifier errors)."""
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    out = engine.generate([Request(p, samples) for p in prompts])
    errors = score(out, {p.id: p for p in prompts}, verifier)
    correct: dict[str, list[float]] = defaultdict(list)
    for s in out:
        correct[s.prompt_id].append(float(s.reward > threshold))  # type: ignore[operator]
    return dict(correct), errors


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
) -> dict[str, Any]:
    """Sample, score and summarise one benchmark; `ks` defaults to (samples,), the trainer's eval lines."""
    correct, errors = sample_correct(engine, prompts, verifier, samples=samples, threshold=threshold)
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


# --- benchmarks by name --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A benchmark's raw (untemplated) questions, its default verifier and one JSON-ready row per prompt."""

    name: str
    prompts: list[Prompt]
    verifier: str
    rows: list[dict[str, Any]]
    """The file's own rows for file datasets (`filter` writes them back with `pass_rate`), else id/prompt/answer."""


def _arithmetic(task: Any) -> tuple[list[Prompt], str]:
    from reinforce_ada.models import arithmetic_config
    from reinforce_ada.tasks import arithmetic

    return arithmetic.make_split(arithmetic_config(task))[1], "arithmetic"


def _gsm_symbolic(task: Any) -> tuple[list[Prompt], str]:
    from reinforce_ada.tasks import gsm_symbolic

    prompts = gsm_symbolic.generate(gsm_symbolic.fetch_templates(), task.n_per_template, seed=task.seed)
    return gsm_symbolic.split_by_template(prompts, 0.2, seed=task.seed)[1], "math"


def _gsm8k_original(task: Any) -> tuple[list[Prompt], str]:
    from reinforce_ada.tasks import gsm_symbolic

    return gsm_symbolic.original(gsm_symbolic.fetch_templates()), "math"


def _champ(task: Any) -> tuple[list[Prompt], str]:
    from reinforce_ada.tasks import champ

    return champ.load(), "math"


DATASETS: dict[str, Callable[[Any], tuple[list[Prompt], str]]] = {
    "arithmetic": _arithmetic,
    "gsm_symbolic": _gsm_symbolic,
    "gsm8k_original": _gsm8k_original,
    "champ": _champ,
}
"""Built-in benchmarks: `(task config) -> (held-out prompts, default verifier)`. `arithmetic` and `gsm_symbolic`
are the held-out splits a run with the same `[task]` settings trains beside (never on)."""

FILE_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


def parse_spec(arg: str) -> tuple[str, str]:
    """`NAME=SPEC` or a bare SPEC (named after itself, or a file's stem) -> (name, spec).

    >>> parse_spec("math=data/math500.jsonl"), parse_spec("champ"), parse_spec("data/aime.csv")
    (('math', 'data/math500.jsonl'), ('champ', 'champ'), ('aime', 'data/aime.csv'))
    """
    name, sep, spec = arg.partition("=")
    if not sep:
        spec = arg
        name = spec if spec in DATASETS else Path(spec).stem
    if not name or not spec:
        raise ConfigError(f"--dataset {arg!r}: expected NAME=SPEC, e.g. math500=data/math500.jsonl or champ=champ")
    return name, spec


def check_spec(spec: str) -> None:
    """A spec must be a built-in name or a file path; an unknown bare name lists the valid ones."""
    if spec in DATASETS:
        return
    p = Path(spec)
    if p.exists():
        return
    if p.suffix in FILE_SUFFIXES or "/" in spec or "\\" in spec:
        raise ConfigError(f"dataset file {spec} does not exist")
    raise ConfigError(
        f"unknown dataset {spec!r}; choose one of {sorted(DATASETS)} or give a .jsonl, .csv or .parquet file"
    )


def load_dataset(
    arg: str,
    task: Any,
    *,
    prompt_key: str = "prompt",
    answer_key: str = "answer",
    limit: int | None = None,
    seed: int = 0,
) -> Dataset:
    """The benchmark named by `arg` (see `parse_spec`); `limit` keeps a seeded subset in the original order."""
    from reinforce_ada.tasks.files import load_prompts, read_rows

    name, spec = parse_spec(arg)
    check_spec(spec)
    if spec in DATASETS:
        prompts, verifier = DATASETS[spec](task)
        rows = [{"id": p.id, prompt_key: p.text, answer_key: p.answer, "level": p.level} for p in prompts]
    else:
        prompts, verifier = load_prompts(spec, prompt_key=prompt_key, answer_key=answer_key), "exact"
        rows = read_rows(Path(spec))
    pairs = subset(list(zip(prompts, rows, strict=True)), limit, seed)
    return Dataset(name, [p for p, _ in pairs], verifier, [r for _, r in pairs])


def subset(items: list, limit: int | None, seed: int = 0) -> list:
    """At most `limit` items: a seeded random subset kept in the original order (all of them for None).

    >>> subset(list("abcdef"), 3, seed=0) == subset(list("abcdef"), 3, seed=0), subset(list("ab"), 5)
    (True, ['a', 'b'])
    """
    if limit is None or limit >= len(items):
        return items
    if limit < 1:
        raise ConfigError(f"limit must be >= 1, got {limit}")
    return [items[i] for i in sorted(np.random.default_rng(seed).permutation(len(items))[:limit])]


def apply_template(prompts: Sequence[Prompt], template: str, tokenizer: Any = None) -> list[Prompt]:
    """Prompts with their text rendered through a template (`plain` leaves them as they are)."""
    if template == "plain":
        return list(prompts)
    from reinforce_ada.templates import render

    return [dataclasses.replace(p, text=render(template, p.text, tokenizer)) for p in prompts]


# --- models ---------------------------------------------------------------------------------------------------------


def model_folder_for(checkpoint: str | None, model: str | None) -> Path:
    """The folder to load: a checkpoint (its folder, model/ or a run folder's latest) or any HF / adapter folder."""
    from reinforce_ada.checkpoint import model_folder

    if checkpoint:
        try:
            return model_folder(Path(checkpoint))
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
    folder = Path(str(model))
    if not ((folder / "config.json").exists() or (folder / "adapter_config.json").exists()):
        raise ConfigError(f"--model {folder}: not a Hugging Face model folder (no config.json)")
    return folder


def run_config(folder: Path) -> Any:
    """The TrainConfig of the run a checkpoint folder belongs to (the config.toml above it), else None."""
    from reinforce_ada.train_config import load_toml

    found = next((p / "config.toml" for p in folder.resolve().parents if (p / "config.toml").exists()), None)
    return load_toml(found) if found else None


def load_engines(
    folder: Path,
    *,
    engine: str = "hf",
    device: str = "cpu",
    threads: int = 2,
    greedy: bool = True,
    **gen: Any,
) -> tuple[Any, Any, Any]:
    """(tokenizer, sampling engine, greedy engine or None) for a model folder.

    `engine="hf"` loads the model (or LoRA adapter) on `device`; `engine="vllm"` hands the folder to vLLM (GPU) and
    shares one vLLM instance between the sampling and the greedy engine. `gen`: max_new_tokens, temperature, seed,
    batch_size (the local engine's decode batch or slots; vLLM schedules its own).
    """
    import copy

    import torch

    torch.set_num_threads(threads)
    if engine == "vllm":
        from transformers import AutoTokenizer

        from reinforce_ada.engines.vllm import VLLMEngine

        if (folder / "adapter_config.json").exists():
            raise ConfigError(f"{folder} is a LoRA adapter; the vllm engine needs a full model folder (merge it)")
        tok = AutoTokenizer.from_pretrained(folder)
        gen.pop("batch_size", None)
        eng = VLLMEngine(str(folder), tok, **gen)
        g = copy.copy(eng)
        g.params = {**eng.params, "temperature": 0.0}
        return tok, eng, g if greedy else None
    if engine != "hf":
        raise ConfigError(f"unknown engine {engine!r}; choose one of ['hf', 'vllm']")
    from reinforce_ada.engines import local_engine

    model, tok = load_model(folder, device=device)
    size = gen.pop("batch_size", 256)

    def make(**over: Any) -> Any:  # SlotEngine for Llama-family models, else HFEngine (the trainer's choice)
        return local_engine(model, tok, decode="auto", streaming=False, slots=size, batch_size=size, **{**gen, **over})

    return tok, make(), make(temperature=0.0, seed=0) if greedy else None


def load_model(folder: Path, *, device: str = "cpu") -> tuple[Any, Any]:
    """(model in eval mode on `device`, tokenizer) from a model folder or a LoRA adapter folder."""
    from reinforce_ada.models import load_policy
    from reinforce_ada.train_config import ModelConfig

    if (folder / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        model, tok = AutoPeftModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    else:
        model, tok = load_policy(folder, ModelConfig(path=str(folder)))
    return model.to(device).eval(), tok
