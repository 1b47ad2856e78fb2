"""The trainer's pass-rate oracle (`estimator=oracle`): exact teacher-forced pass rates of its own policy.

1) `exact_oracle` wraps `evaluation.exact.exact_pass_rates` at the generation config's temperature and
   `max_new_tokens` in a `sampling.memory.PassRateOracle`: one batched forward pass per uncached prompt set, cached
   until the trainer's next weight update (the trainer invalidates it wherever it syncs the engine's weights).
2) It is exact only where `evaluation.exact` is: an exact-answer task whose verifier accepts the answer's string
   (`arithmetic`, `exact`), every prompt with a non-empty answer, and plain sampling (top_p 1, top_k 0). Anything
   else (math-verify's equivalent forms, code tests, numeric tolerance, a verifier of yours) is refused with the
   option to change, rather than giving a ceiling that is silently not one.
3) One exception, said here: `running_sums` (the long-answer task's default verifier) scores only the final result,
   so many strings pass (any working before `#{total}`); the teacher-forced rate counts the canonical one only. It
   is exact for `running_sums_strict` and a lower bound for `running_sums` -- by the share of final-correct samples
   whose working is not the canonical one, which the running-sums warm start records (`warm_start.json`,
   `working_gap`; docs/long_answers.md). The oracle accepts it, as a lower bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.memory import PassRateOracle
from reinforce_ada.types import Prompt

EXACT_VERIFIERS = ("arithmetic", "exact", "running_sums_strict")
"""Verifiers whose accepted completions are the answer's string (up to whitespace): `evaluation.exact`'s domain."""
LOWER_BOUND_VERIFIERS = ("running_sums",)
"""Verifiers that accept the answer's string and others too: the oracle's rate is a lower bound (module doc, 3)."""


def exact_oracle(model: Any, tokenizer: Any, max_new_tokens: int, temperature: float) -> PassRateOracle:
    """A cached oracle of `model`'s exact pass rates at `temperature` (teacher-forced, `evaluation.exact`)."""
    from reinforce_ada.evaluation.exact import exact_pass_rates

    def rates(prompts: Sequence[Prompt]):
        return exact_pass_rates(model, tokenizer, prompts, temperature=temperature, max_new_tokens=max_new_tokens)

    return PassRateOracle(rates)


def check_oracle_task(cfg: Any, prompts: Sequence[Prompt]) -> None:
    """Refuse `strategy.estimator=oracle` where exact pass rates are not the verifier's (module docstring, 2)."""
    from reinforce_ada.tasks.registry import task_spec

    verifier = cfg.task.verifier or task_spec(cfg.task.name).verifier
    why = None
    if verifier not in EXACT_VERIFIERS + LOWER_BOUND_VERIFIERS:
        why = (
            f"task.verifier={verifier!r} (task {cfg.task.name!r}) is not exact-match; the oracle's teacher-forced "
            f"rate is exact only for verifiers {list(EXACT_VERIFIERS)} (a lower bound for "
            f"{list(LOWER_BOUND_VERIFIERS)})"
        )
    elif missing := [p.id for p in prompts if not p.answer.strip()]:
        why = f"{len(missing)} training prompts have no answer to score (first: {missing[0]!r})"
    elif cfg.generation.top_p != 1.0 or cfg.generation.top_k != 0:
        why = (
            f"generation.top_p={cfg.generation.top_p}, top_k={cfg.generation.top_k}: exact rates assume plain "
            "sampling (top_p=1.0, top_k=0)"
        )
    if why is not None:
        raise ConfigError(
            f"strategy.estimator='oracle' is not available here: {why}. Use an exact-answer task (arithmetic, "
            "running_sums, or a file task with verifier exact) or choose estimator=tracker, predictor or both"
        )


def oracle_for(cfg: Any, model: Any, tokenizer: Any, prompts: Sequence[Prompt]) -> PassRateOracle | None:
    """The oracle a `TrainConfig` asks for (None unless `strategy.estimator=oracle`), after `check_oracle_task`."""
    if cfg.strategy.options.estimator != "oracle":
        return None
    check_oracle_task(cfg, prompts)
    g = cfg.generation
    return exact_oracle(model, tokenizer, g.max_new_tokens, g.temperature)
