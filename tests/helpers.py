"""Importable helpers: functions tests name as `module:function`, and the one tiny random Llama every test builds
(`tests/conftest.py`'s fixtures, the TRL fixtures and the vLLM test take their model from here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def tiny_llama_config(tok: Any, **overrides: Any) -> Any:
    """The test Llama's config (hidden 32, 2 layers, 2 heads, tied embeddings) for the char tokenizer `tok`.

    At the default initializer_range 0.02 the tied embedding makes the model echo its last input token forever; 0.5
    gives varied completions, some of which end in EOS.
    """
    from transformers import LlamaConfig

    kw = dict(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        initializer_range=0.5,
    )
    return LlamaConfig(**{**kw, **overrides})


def tiny_llama(tok: Any, *, seed: int = 0, **overrides: Any) -> Any:
    """A seeded random `LlamaForCausalLM` of `tiny_llama_config` (the global RNG is left as it was)."""
    import torch
    from transformers import LlamaForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(tiny_llama_config(tok, **overrides))
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model


def even_length(completion: str, answer: str) -> float:
    """A reward any random policy can earn: completions of even length."""
    return float(len(completion) % 2 == 0)


def teacher_forced_logprobs(model, tokenizer, prompts: dict, samples, temperature: float):
    """The policy's log-probs of each sample's completion, recomputed in one forward (no grad)."""
    import torch

    from reinforce_ada.models.forward import sequence_logprobs

    with torch.no_grad():
        return sequence_logprobs(
            model,
            [prompts[s.prompt_id] for s in samples],
            [s.token_ids for s in samples],
            tokenizer.pad_token_id,
            temperature=temperature or 1.0,  # greedy samples are scored under the untempered distribution
        )


def train_config(model_path: Any, run_dir: Any, strategy: Any = None, **sections: Any) -> Any:
    """A small `TrainConfig` for trainer tests: 1 thread, 64 training prompts, 2 held out, 4 new tokens, 2 steps of 4
    prompts, no evaluation, no progress bar. `sections` merge into these per section (`run={"steps": 1}`);
    `strategy` is a StrategyConfig (it replaces the strategy section) or a dict of strategy overrides."""
    import dataclasses

    from reinforce_ada.training.config import TrainConfig, apply_overrides

    over: dict[str, dict[str, Any]] = {
        "model": {"path": str(model_path), "threads": 1},
        "task": {"train_size": 64, "eval_size": 2},
        "generation": {"max_new_tokens": 4},
        "run": {"run_dir": str(run_dir), "steps": 2, "batch_size": 4, "eval_every": 0, "progress": False},
    }
    if isinstance(strategy, dict):
        sections = {**sections, "strategy": {**strategy, **sections.get("strategy", {})}}
    for sec, values in sections.items():
        over[sec] = {**over.get(sec, {}), **values}
    cfg = apply_overrides(TrainConfig(), over, "test")
    if strategy is not None and not isinstance(strategy, dict):
        cfg = dataclasses.replace(cfg, strategy=strategy)
    return cfg


def table_of(cfg: Any) -> Any:
    """The select=value / iw value table of a StrategyConfig's sampler (`sampling.law.value_table`)."""
    from reinforce_ada.sampling.law import value_table
    from reinforce_ada.sampling.strategies import strategy_class

    return value_table(strategy_class(cfg.name), cfg.options)


def bench_job(pool: Any, model_dir: Any, run_dir: Any, arm: str, strategy: Any, **fields: Any) -> Any:
    """A testbed `bench.run.Job` on `pool` (a `bench.testbed.build_pool` result): lr 1e-3, seed 0, 3 steps of 4
    prompts, evaluated every 2 steps, no sampled check; `fields` replace any of these (`steps=50`, `train=...`)."""
    from reinforce_ada.bench.run import Job

    base: dict[str, Any] = dict(lr=1e-3, seed=0, steps=3, batch_size=4, eval_every=2, check_samples=0)
    return Job(
        pool=pool.spec.name,
        arm=arm,
        strategy=strategy,
        model_path=str(model_dir),
        train_path=pool.train_path,
        eval_path=pool.eval_path,
        level_weights=pool.level_weights,
        run_dir=str(run_dir),
        **{**base, **fields},
    )


ADVERSARIAL = Path(__file__).parent / "adversarial"
"""The hostile-input corpus: one `cases.toml` per family (code, configs, data, templates, cli, answers), its README
as the header and one table per case."""


def corpus(family: str) -> dict[str, dict[str, Any]]:
    """`tests/adversarial/<family>/cases.toml`: case name -> its table."""
    import tomllib

    return tomllib.loads((ADVERSARIAL / family / "cases.toml").read_text(encoding="utf-8"))


def corpus_header(family: str) -> str:
    """The family's README: the comment lines above its first table."""
    lines = (ADVERSARIAL / family / "cases.toml").read_text(encoding="utf-8").split("\n")
    first = next(i for i, ln in enumerate(lines) if ln.startswith("["))
    return "\n".join(ln.removeprefix("#").removeprefix(" ") for ln in lines[:first] if ln.startswith("#"))


def corpus_bytes(case: dict[str, Any]) -> bytes:
    """A corpus file's exact bytes (the family's header, "How the files are kept"): `base64`, else `text` with each
    `repeat` mark expanded, as UTF-8."""
    import base64

    if "base64" in case:
        return base64.b64decode(case["base64"])
    text = case["text"]
    for mark, unit, count in case.get("repeat", []):
        text = text.replace(mark, unit * count)
    return text.encode("utf-8")


def corpus_file(family: str, name: str, folder: Any, as_name: str | None = None) -> Any:
    """Write case `name` of `family` into `folder` (as `as_name`, default its own name) and return its path."""
    path = Path(folder) / (as_name or name)
    path.write_bytes(corpus_bytes(corpus(family)[name]))
    return path
