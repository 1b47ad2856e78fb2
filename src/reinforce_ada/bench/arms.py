"""The arms of `reinforce-ada compare`: one line per sampling strategy, as `sampling.config.parse_arm` specs.

A new strategy is a new line here (or `--arms NAME=SPEC` on the command line). A spec may end with `| optim.KEY=VALUE,
...` (or `replay.KEY=VALUE`, `run.batch_size=N`, `prior.samples=N`): the arm's own settings (`TrainConfig.optim` all
but the lr, which the sweep sets; `TrainConfig.replay`; its prompts per step; a prior measured by N samples per
training prompt at the start, charged to its tokens, `bench.run.prior_pass`) -- controls
such as more PPO epochs per generated token, which no sampling strategy can express. An arm whose strategy does not
parse yet (a strategy still being written) is skipped with the parser's reason, and the rest of the run goes on; a bad
learner setting is an error.
`grpo-matched` is GRPO with n set per pool to Seq-balanced's expected samples per prompt under the warm start's
exact pass rates (`simulation.plan`), fixed before any run, so it costs what Seq-balanced costs per step.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.config import StrategyConfig
from reinforce_ada.sampling.configure import parse_arm

ORACLE_ALLOC = (
    "est:estimator=oracle,allocation=signal,min_samples=1,max_samples=32,residual=none,advantage=group,scale_std=true"
)
ARMS: dict[str, str] = {
    "grpo-n4": "uniform:n=4",
    "grpo-n16": "uniform:n=16",
    "grpo-n2": "uniform:n=2",
    "grpo-n8": "uniform:n=8",
    "grpo-matched": "uniform",
    "dapo-n4": "dynamic:n=4",
    "seq-bal": "seq:exit=balanced",
    "seq-pos": "seq:exit=positive",
    "est": "est",
    "est-pred": "est:estimator=predictor",
    # the authors' released Ada-Est (branch hanze, ray_trainer_ema.py): 1/p_hat weights, 1 each + largest remainders,
    # Beta(1, 16) prior, EMA 0.9, every sample trained, no residual weight; max_samples = the whole budget (no cap)
    "est-released": "est:allocation=remainder,objective=log,prior_beta=16,min_samples=1,max_samples=512,residual=none",
    # strategies from other papers, under their tentative specs: skipped (with the parser's reason) until they parse
    "pilot-commit": "pilot_commit",
    "knapsack": "knapsack",
    "greso": "dynamic:select=greso",
    "mopps": "uniform:select=mopps",
    "seq-give-up": "seq:exit=balanced,give_up=0.05",
    # trl-cgrpo 0.2.0's conformal stopping (docs/allocators.md): calibration rollouts on 200 pool prompts every 50
    # steps, charged to the budget; score first_success (the package's aps needs answer strings)
    "conformal": "conformal",
    # AR3PO's response reuse (training.replay, docs/replay.md): GRPO-n4 + a stored earlier correct answer in place of
    # one wrong sample of an all-wrong group, truncated-IS corrected; a baseline, in no registered list
    "replay": "uniform:n=4 | replay.enabled=true",
    # the ceilings (docs/allocators.md "Oracle arms"): the exact pass rate under the current policy, read every
    # step and not charged to the budget. Selection: GRPO-n4 on the MoPPS top-k nearest 0.5 (max P(signal) at fixed n)
    # of 16 x batch candidates; allocation: the expected number of prompts with signal, maximised exactly under
    # GRPO-n4's budget (PER_PROMPT_BUDGET), GRPO's group baseline with std; both: select, then allocate.
    "oracle-select": "uniform:n=4,select=mopps,estimator=oracle",
    "oracle-alloc": ORACLE_ALLOC,
    "oracle-both": ORACLE_ALLOC + ",select=mopps",
    # importance-weighted admission (sampling.admission.iw, ours): 4 x batch candidates, k drawn
    # with inclusion probability from sqrt(E[P(signal)]), Horvitz-Thompson weights; the oracle ceiling, the deployable
    # belief (tracker + predictor), and the oracle draw with the weights off (w = 1: does unbiasedness matter?)
    "iw-oracle": "uniform:n=4,select=iw,estimator=oracle,candidates=4",
    "iw": "uniform:n=4,select=iw,estimator=both,candidates=4",
    "iw-noweight": "uniform:n=4,select=iw,estimator=oracle,candidates=4,iw_weights=false",
    # signal allocation from beliefs: oracle-alloc's rule (GRPO-n4's budget spread to maximise the expected
    # number of prompts with signal, exact greedy) on the tracker's posterior with the predictor as its prior, instead
    # of the exact rate: the deployable counterpart of the oracle allocation
    "alloc": ORACLE_ALLOC.replace("estimator=oracle", "estimator=both"),
}
# the deployable form of iw-noweight: the same draw, from the tracker + predictor's belief, with the
# Horvitz-Thompson weights off -- a biased selection toward prompts likely to carry signal
ARMS["signal-draw"] = "uniform:n=4,select=iw,estimator=both,candidates=4,iw_weights=false"
# learner controls: more optimiser updates per generated token instead of another
# allocation -- two passes over each step's batch, or two optimiser steps on half-batches
ARMS["grpo-n4-2ep"] = "uniform:n=4 | optim.epochs=2"
ARMS["grpo-n4-2mb"] = "uniform:n=4 | optim.minibatches=2"
# fewer samples per prompt (studies/fewer_samples, docs/fewer_samples.md): SPO at 64 prompts x 1 sample a step, with
# its prioritised draws and with uniform ones (the study's names)
ARMS["spo-64"] = "spo | run.batch_size=64"
ARMS["spo-64-uniform"] = "spo:select=none | run.batch_size=64"
# the baseline's ceiling: SPO's A = r - p with p the exact pass rate of the policy about to sample (estimator=oracle:
# read when the prompt joins the step, before its sample), uniform draws; what no tracker can beat
ARMS["spo-64-oracle"] = "spo:select=none,estimator=oracle | run.batch_size=64"
# levers stacked on the tracker baseline: each step's samples trained again in the next step (experience replay,
# training.experience), or twice per step (two PPO epochs)
ARMS["spo-64-replay"] = "spo | run.batch_size=64,replay.enabled=true,replay.mode=samples,replay.max_age=1"
ARMS["spo-64-2ep"] = "spo | run.batch_size=64,optim.epochs=2"
# an outside one-sample baseline, A*-PO-style (TRL's experimental A2PO): a static value V* = beta log mean exp(r /
# beta) from an offline pass of 8 samples per prompt (charged), the prompts it never solved dropped, one sample per
# prompt, A = r - V*; our PPO loss, not A*-PO's regression onto beta_2 log(pi / pi_ref) (stated in docs)
ARMS["a-star-po-64"] = (
    "spo:select=none,estimator=prior,batch_normalize=none | run.batch_size=64,prior.samples=8,prior.value=softmax,"
    "prior.drop=unsolved"
)
PER_PROMPT_BUDGET = {"oracle-alloc": 4, "oracle-both": 4, "alloc": 4}
"""Arms whose step budget is `budget = this x batch_size` (Est's own default is 8 per prompt): the oracle
allocations spend GRPO-n4's samples, so they are compared with it at equal cost."""
REFERENCE = "grpo-n4"
"""The reference: the curve every arm's speed factor is read against (it runs `ref_steps_factor` times longer)."""
MATCHED, MATCHED_TO = "grpo-matched", "seq-bal"
UNIFORM = ("grpo-n2", "grpo-n4", "grpo-n8", "grpo-n16")
"""The uniform family: the compute-to-target reference is the best of those run, per pool and cost axis."""
ORACLES = ("oracle-select", "oracle-alloc", "oracle-both", "spo-64-oracle")
"""Arms that read the exact pass rate (`estimator=oracle`): the ceiling, never a headline arm."""
HEADLINE = ("grpo-n4", "seq-bal", "grpo-matched")
"""The reference, Seq-balanced and budget-matched GRPO: they get the most seeds (`CompareConfig.seeds`)."""


@dataclass(frozen=True)
class Arm:
    name: str
    spec: str
    cfg: StrategyConfig
    train: tuple[tuple[str, Any], ...] = ()
    """The learner's settings for this arm: (`optim.KEY` or `replay.KEY`, value) pairs from the spec's `| ...` part."""


LEARNER_SECTIONS = ("optim", "replay", "run", "prior")
"""The settings an arm may have of its own after `|` (the rest is the benchmark's, the same for every arm)."""
ARM_FIELDS = {"run": ("batch_size",), "prior": ("samples", "value", "drop")}
"""Of the `run` section only the prompts per step; `prior.samples`: the prior pass (`bench.run.prior_pass`), its
`prior.value` (mean or softmax) and `prior.drop=unsolved`."""


def parse_train(text: str, name: str) -> tuple[tuple[str, Any], ...]:
    """`optim.epochs=2,replay.enabled=true` -> validated (key, value) pairs (checked on a default TrainConfig)."""
    from reinforce_ada.training.config import TrainConfig, apply_overrides

    pairs: dict[str, dict[str, Any]] = {}
    for item in (t.strip() for t in text.split(",") if t.strip()):
        key, eq, raw = item.partition("=")
        key = key.strip()
        sec, dot, field = key.partition(".")
        if not eq or not dot or sec not in LEARNER_SECTIONS or not field:
            raise ConfigError(
                f"arm {name!r}: learner setting {item!r} must read optim.KEY=VALUE, replay.KEY=VALUE, "
                "run.batch_size=N or prior.samples=N (e.g. optim.epochs=2); only these can differ between arms"
            )
        if key == "optim.lr":
            raise ConfigError(f"arm {name!r}: optim.lr is set by the lr sweep (or --lr {name}=LR), not in the spec")
        if sec in ARM_FIELDS and field not in ARM_FIELDS[sec]:
            real = {f.name for f in fields(getattr(TrainConfig(), sec))} if sec == "run" else set()
            close = [] if field in real else difflib.get_close_matches(field, ARM_FIELDS[sec], n=1)
            raise ConfigError(
                f"arm {name!r}: {key} "
                + (f"is not a setting (did you mean {sec}.{close[0]}?)" if close else "cannot differ between arms")
                + "; an arm may set optim.KEY=VALUE, replay.KEY=VALUE, run.batch_size=N or prior.samples=N"
            )
        pairs.setdefault(sec, {})[field] = _literal(raw.strip())
    if not pairs:
        raise ConfigError(f"arm {name!r}: nothing after '|'; write optim.KEY=VALUE or drop the '|'")
    prior = pairs.pop("prior", {})
    k = prior.get("samples")
    if prior and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ConfigError(f"arm {name!r}: prior.samples={k!r} must be a whole number >= 1 (the prior pass)")
    if prior.get("value", "mean") not in ("mean", "softmax"):
        raise ConfigError(f"arm {name!r}: prior.value={prior['value']!r} must be mean or softmax")
    if prior.get("drop", "none") not in ("none", "unsolved"):
        raise ConfigError(f"arm {name!r}: prior.drop={prior['drop']!r} must be none or unsolved")
    apply_overrides(TrainConfig(), pairs, f"arm {name!r}")  # unknown keys and bad values fail here
    if prior:
        pairs["prior"] = prior
    return tuple(sorted((f"{sec}.{k}", v) for sec, kv in pairs.items() for k, v in kv.items()))


def _literal(raw: str) -> Any:
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def split_arms(text: str) -> list[str]:
    """`a,b,c` or, when a spec has commas in it, `a; NAME=seq:exit=positive,k_pos=2`."""
    sep = ";" if ";" in text else ","
    return [a.strip() for a in text.split(sep) if a.strip()]


def resolve_arms(names: list[str]) -> tuple[list[Arm], dict[str, str]]:
    """Arms by table name or `NAME=SPEC`; returns (arms that parse, {skipped name: reason}). Only a table arm whose
    spec this version cannot parse is skipped; a `NAME=SPEC` the user wrote that does not parse is an error."""
    arms, skipped = [], {}
    for item in names:
        name, eq, spec = item.partition("=")
        name = name.strip()
        if not eq:
            if name not in ARMS:
                raise ConfigError(f"unknown arm {name!r}; choose from {list(ARMS)} or write NAME=SPEC")
            spec = ARMS[name]
        strategy, bar, train = spec.partition("|")
        learner = parse_train(train, name) if bar else ()
        try:
            arms.append(Arm(name, spec.strip(), parse_arm(strategy.strip()), learner))
        except ConfigError as e:
            if eq:
                raise ConfigError(f"arm {item.strip()!r}: {e}") from None
            skipped[name] = str(e)
    if len({a.name for a in arms}) != len(arms):
        raise ConfigError(f"arm names must be unique, got {[a.name for a in arms]}")
    if REFERENCE not in {a.name for a in arms}:
        raise ConfigError(f"the reference arm {REFERENCE!r} must be among the arms (every speed is read against it)")
    return arms, skipped


def matched_n(seq_cfg: StrategyConfig, rates: np.ndarray) -> tuple[int, float]:
    """(n, expected samples per prompt) for budget-matched GRPO: Seq's expected samples over the pool's rates."""
    from reinforce_ada.simulation.plan import plan

    rows = plan(seq_cfg, np.clip(np.round(np.asarray(rates, dtype=float), 3), 0.0, 1.0))
    expected = float(np.mean([r.expected_samples for r in rows]))
    return max(1, round(expected)), expected


def check_costs(arms: list[Arm], c: Any, max_new_tokens: int) -> None:
    """What the arms cost under a `CompareConfig` `c`, checked before any pool is built or run trained: each arm's
    step draws fit this process's memory (`training.bounds.check_step_draws`: `uniform:n=10**12` used to fail in a
    worker after the sweep), and with `c.token_budget` every arm can reach the budget's tail within `c.steps`
    (at most steps x prompts x its most samples per prompt x `max_new_tokens` tokens; `bench.equal_tokens`, 1): a
    budget of 1e30 trained every run and then raised, writing no result. An arm with a prior pass (its tokens depend
    on the pool) or whose n is matched to a pool is left to the runs."""
    from reinforce_ada.bench.equal_tokens import WINDOW
    from reinforce_ada.sampling.strategies import strategy_class
    from reinforce_ada.training.bounds import check_step_draws, step_draws

    short = {}
    for arm in arms:
        cls, batch = strategy_class(arm.cfg.name), int(dict(arm.train).get("run.batch_size", c.batch_size))
        try:
            check_step_draws(cls, arm.cfg.options, batch, max_new_tokens)
        except ConfigError as e:
            raise ConfigError(f"arm {arm.name!r}: {e}") from None
        most = c.steps * step_draws(cls, arm.cfg.options, batch) * max_new_tokens
        if c.token_budget and arm.name != MATCHED and not dict(arm.train).get("prior.samples"):
            if most < (1 - WINDOW) * c.token_budget:
                short[arm.name] = most
    if short:
        arm, most = min(short.items(), key=lambda kv: kv[1])
        raise ConfigError(
            f"--token-budget {c.token_budget}: {len(short)} arm(s) ({', '.join(list(short)[:4])}"
            f"{', ...' if len(short) > 4 else ''}) cannot reach its last "
            f"{WINDOW:.0%} within --steps {c.steps}: {arm} generates at most {most:,.0f} tokens a run ({c.steps} steps "
            f"of up to {max_new_tokens} tokens a sample); lower --token-budget to {int(most / (1 - WINDOW)):,} or "
            "less, or raise --steps"
        )
