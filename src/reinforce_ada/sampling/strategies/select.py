"""Prompt admission before any rollout, on top of any strategy: GRESO skipping, MoPPS and value selection, eviction.

`with_admission(Base)` returns `Base` with the `Admission` mixin in front of it, so a selection rule is written once
and composes with every sampler (`seq:select=greso`, `est:select=mopps`, `pilot_commit`'s eviction), through the one
protocol and no special case in the drivers:
1) The mixin stands between the driver and the strategy. When the strategy needs k prompts (the step's batch at
   `begin`, or k more when it asks through `wanted_prompts`, e.g. DAPO's refills), the mixin collects candidates --
   the offered prompts, then more from the driver's prompt source through its own `wanted_prompts` /
   `add_prompts` -- drops those its skip rules reject, and hands the strategy k of the rest (`begin` once per step,
   `add_prompts` after). Skip rules ask for just the deficit; MoPPS and value ask for `candidates` x k and keep the
   best k.
2) Nothing is sampled while candidates are collected, so both drivers see the same admitted prompts and the same
   law. A candidate offered twice in one step (a source that wrapped into its next epoch) is not counted again; a
   source that offers nothing new, or nothing at all, ends the collection and the strategy gets what there is.
3) Skipped and unselected prompts are counted in `metrics()` (`offered_prompts`, `skipped_prompts`, ...); they are
   not in `strategy.prompts`, so the ledger's prompts and no-signal share count sampled prompts only.
Rules:
- `evict` (Pilot-Commit): skip a prompt the memory evicted (a visit pass rate >= `evict`), in every later step.
- `greso` (GRESO, arXiv 2506.02177, its `filter_examples_all_probabilistic`): a prompt whose last c visits were all
  correct is kept with probability max(p_easy^c, 0.01), all wrong max(p_hard^c, 0.01); p_easy and p_hard start at
  0.5 and move by 0.01 per step within [0.05, 0.95], down when the last step's all-correct share of sampled prompts
  was >= zero_variance_target / 3 (all-wrong share >= 2/3 of it), up otherwise; they adapt only once a candidate
  with history has been offered (the paper: from the second epoch on).
  Departures: "all correct / all wrong" is the whole visit's pool (the paper thresholds the mean at 0.98 / 0.11,
  the same for groups of <= 8 samples); GRESO's adaptive generation batch size (drawing about 1.25x the expected
  need) is replaced by asking the source for exactly the deficit.
- `mopps` (MoPPS, arXiv 2507.04632, its `PosteriorSampler.sample_batch` "topk"): draw theta ~ Beta(a, b) from each
  candidate's memory posterior (`estimator`; the tracker's decayed counts are MoPPS's posterior, its default decay is
  1, ours 0.9 unless `decay=1`) and keep the k with theta nearest `target` (paper 0.5), from `candidates` x k
  candidates (paper 16). With `estimator=oracle` theta is the exact rate (to ~1e-3): with n fixed, the rate nearest
  0.5 maximises P(signal) = 1 - p^n - (1 - p)^n, so `uniform:select=mopps,estimator=oracle` is oracle selection.
  Unselected candidates wait for the source to offer them again (with our epoch-ordered
  `PromptOrder`, the next epoch; MoPPS's loader reshuffles each epoch too).
- `value` (ours, `sampling.value`): MoPPS's candidates and posterior, ranked by the expected signal per generated
  token of a visit under the planner's exact law for this sampler; `value_offered` / `value_selected` in `metrics()`
  are the step's mean value of the candidates considered and of those kept.
- `iw` (ours, `sampling.iw`): MoPPS's candidates and posterior; k of them drawn at random with inclusion probability
  from sqrt(E[P(signal)]) under the same law (a defensive mixture, `iw_mix`), each admitted prompt's `Group.weight`
  multiplied by its Horvitz-Thompson weight (clipped at `iw_clip`, self-normalised to mean 1 over the step's admitted
  prompts), so the weighted batch estimates the uniform batch's gradient; `iw_weight_max` and `iw_ess` in `metrics()`.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Any

import numpy as np

from reinforce_ada.sampling.iw import iw_choose, self_normalise, weight_metrics
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.sampling.protocol import PoolStrategy
from reinforce_ada.sampling.value import value_choose, value_table
from reinforce_ada.types import Group, Prompt


class Greso:
    """GRESO's probabilistic pre-rollout skip with exploration probabilities adapted to a zero-variance target."""

    LO, HI, STEP, FLOOR = 0.05, 0.95, 0.01, 0.01

    def __init__(self, target: float):
        self.target = target
        self.p_easy = self.p_hard = 0.5
        self.active = False

    def adapt(self, stats: dict[str, int]) -> None:
        if not self.active or stats["visits"] == 0:
            return
        easy, hard = stats["all_correct"] / stats["visits"], stats["all_wrong"] / stats["visits"]
        step_easy = -self.STEP if easy >= self.target / 3 else self.STEP
        step_hard = -self.STEP if hard >= self.target * 2 / 3 else self.STEP
        self.p_easy = float(np.clip(self.p_easy + step_easy, self.LO, self.HI))
        self.p_hard = float(np.clip(self.p_hard + step_hard, self.LO, self.HI))

    def keep(self, prompt: Prompt, memory: PromptMemory, rng: np.random.Generator) -> bool:
        if prompt.id in memory.visits:
            self.active = True
        streak = memory.streak.get(prompt.id, 0)
        if streak == 0:
            return True
        p = self.p_easy if streak > 0 else self.p_hard
        return bool(rng.random() < max(p ** abs(streak), self.FLOOR))

    def state_dict(self) -> dict[str, Any]:
        return {"p_easy": self.p_easy, "p_hard": self.p_hard, "active": self.active}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.p_easy, self.p_hard, self.active = state["p_easy"], state["p_hard"], state["active"]


def mopps_choose(
    candidates: list[Prompt], k: int, memory: PromptMemory, rng: np.random.Generator, target: float
) -> list[Prompt]:
    """MoPPS "topk": Thompson-sample each candidate's pass rate, keep the k nearest `target` (candidate order)."""
    if len(candidates) <= k:
        return list(candidates)
    memory.prefetch(candidates)  # an oracle's rates: one batched call
    ab = np.array([memory.posterior(p) for p in candidates])
    theta = rng.beta(ab[:, 0], ab[:, 1])
    best = np.lexsort((np.arange(len(candidates)), (theta - target) ** 2))[:k]
    return [candidates[i] for i in sorted(best)]


_COUNTS = ("offered", "skipped_evicted", "skipped_greso", "unselected")
_VALUE_SUMS = ("offered", "offered_n", "selected", "selected_n")


class Admission:
    """The mixin of the module docstring; use through `with_admission`."""

    def __init__(self, cfg: Any, **kwargs: Any):
        super().__init__(cfg, **kwargs)  # type: ignore[call-arg]
        self.greso = Greso(cfg.zero_variance_target) if cfg.resolved_select == "greso" else None
        self.mopps = cfg.resolved_select == "mopps"
        self.value = value_table(cfg) if cfg.resolved_select == "value" else None
        """select=value: the sampler's per-visit law on a grid of pass rates (`sampling.value`), else None."""
        self.iw = value_table(cfg) if cfg.resolved_select == "iw" else None
        """select=iw: the same law, read for sqrt(E[P(signal)]) (`sampling.iw`), else None."""
        self.evicting = cfg.resolved_evict is not None
        self.admit_rng = np.random.default_rng([cfg.seed, 17])
        self._reset_admission()

    def _reset_admission(self) -> None:
        self.filling, self.first, self.dry, self.need = False, True, False, 0
        self.candidates: list[Prompt] = []
        self.offered: dict[str, None] = {}
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.value_sums: dict[str, float] = dict.fromkeys(_VALUE_SUMS, 0.0)
        self.opts: dict[str, Any] = {}
        self.iw_raw: dict[str, float] = {}
        """select=iw: each prompt admitted this step -> its clipped Horvitz-Thompson weight (not yet normalised)."""

    # -- the protocol, in front of the strategy ---------------------------------------------------------------------
    def begin(self, prompts: list[Prompt], **opts: Any) -> None:
        self._reset_admission()
        if not prompts:
            self.first = False
            super().begin(prompts, **opts)  # type: ignore[misc]
            return
        if self.greso is not None:
            self.greso.adapt(self.memory.stats)  # type: ignore[attr-defined]  # the last step's visits
        self.opts = opts
        self._reset()  # type: ignore[attr-defined]  # last step's prompts are gone while candidates are collected
        self.filling, self.need = True, len(prompts)
        self._offer(prompts)

    def wanted_prompts(self) -> int:
        if self.filling:
            return 0 if self.dry else max(0, self._target(self.need) - len(self.candidates))
        return self._target(super().wanted_prompts())  # type: ignore[misc]

    def add_prompts(self, prompts: list[Prompt]) -> None:
        if not self.filling:
            self.filling, self.need = True, super().wanted_prompts()  # type: ignore[misc]
        self._offer(prompts)

    def _target(self, k: int) -> int:
        ranks = self.mopps or self.value is not None or self.iw is not None
        return k * self.cfg.candidates if ranks else k  # type: ignore[attr-defined]

    def _offer(self, prompts: list[Prompt]) -> None:
        taken = self.prompts  # type: ignore[attr-defined]
        new = [p for p in prompts if p.id not in self.offered and p.id not in taken]
        self.dry = not new
        memory = self.memory  # type: ignore[attr-defined]
        for p in new:
            self.offered[p.id] = None
            self.counts["offered"] += 1
            if self.evicting and p.id in memory.evicted:
                self.counts["skipped_evicted"] += 1
            elif self.greso is not None and not self.greso.keep(p, memory, self.admit_rng):
                self.counts["skipped_greso"] += 1
            else:
                self.candidates.append(p)
        if self.dry or len(self.candidates) >= self._target(self.need):
            self._finish_fill()

    def _finish_fill(self) -> None:
        cands, k = self.candidates, self.need
        if self.mopps:
            chosen = mopps_choose(cands, k, self.memory, self.admit_rng, self.cfg.target)  # type: ignore[attr-defined]
        elif self.value is not None and cands:
            memory, explore = self.memory, self.cfg.select_explore  # type: ignore[attr-defined]
            chosen, offered, kept = value_choose(cands, k, memory, self.admit_rng, self.value, explore)
            v = self.value_sums
            v["offered"] += float(offered.sum())
            v["offered_n"] += len(offered)
            v["selected"] += float(kept.sum())
            v["selected_n"] += len(kept)
        elif self.iw is not None:
            chosen, w = iw_choose(cands, k, self.memory, self.admit_rng, self.iw, self.cfg)  # type: ignore[attr-defined]
            self.iw_raw.update((p.id, x) for p, x in zip(chosen, w, strict=True))
        else:
            chosen = cands[:k]
        self.counts["unselected"] += len(cands) - len(chosen)
        self.filling, self.dry, self.candidates = False, False, []
        if self.first:
            self.first = False
            super().begin(chosen, **self.opts)  # type: ignore[misc]
        else:
            super().add_prompts(chosen)  # type: ignore[misc]  # [] tells the strategy the source is exhausted

    def build(self) -> list[Group]:
        groups = super().build()  # type: ignore[misc]
        if self.iw is not None:  # the weight rides Group.weight: advantages -> StepBatch.weights -> the loss
            w = self._iw_normalised()
            for g in groups:
                g.weight *= w.get(g.prompt.id, 1.0)
        return groups

    def _iw_normalised(self) -> dict[str, float]:
        """select=iw: the step's admitted prompts' weights divided by their mean (`sampling.iw`, 4)."""
        ids = list(self.iw_raw)
        return dict(zip(ids, self_normalise(np.array([self.iw_raw[i] for i in ids])).tolist(), strict=True))

    # -- metrics and checkpointing ----------------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        c = self.counts
        out = {
            **super().metrics(),  # type: ignore[misc]
            "offered_prompts": c["offered"],
            "skipped_prompts": c["skipped_evicted"] + c["skipped_greso"] + c["unselected"],
            "skipped_evicted": c["skipped_evicted"],
            "evicted_total": len(self.memory.evicted),  # type: ignore[attr-defined]
        }
        if self.greso is not None:
            out.update(skipped_greso=c["skipped_greso"], greso_p_easy=self.greso.p_easy, greso_p_hard=self.greso.p_hard)
        if self.mopps or self.value is not None or self.iw is not None:
            out["unselected_prompts"] = c["unselected"]
        if self.value is not None:  # mean expected signal per generated token; 0 in a step with no candidates
            v = self.value_sums
            out["value_offered"] = v["offered"] / v["offered_n"] if v["offered_n"] else 0.0
            out["value_selected"] = v["selected"] / v["selected_n"] if v["selected_n"] else 0.0
        if self.iw is not None:
            out.update(weight_metrics(np.array(list(self._iw_normalised().values()))))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),  # type: ignore[misc]
            "admission": {
                "filling": self.filling,
                "first": self.first,
                "dry": self.dry,
                "need": self.need,
                "candidates": [asdict(p) for p in self.candidates],
                "offered": list(self.offered),
                "counts": dict(self.counts),
                "value_sums": dict(self.value_sums),
                "opts": dict(self.opts),
                "rng": self.admit_rng.bit_generator.state,
                "greso": None if self.greso is None else self.greso.state_dict(),
                "iw_raw": dict(self.iw_raw),
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)  # type: ignore[misc]
        a = state["admission"]
        self.filling, self.first, self.dry, self.need = a["filling"], a["first"], a["dry"], a["need"]
        self.candidates = [Prompt(**p) for p in a["candidates"]]
        self.offered = dict.fromkeys(a["offered"])
        self.counts, self.opts = dict(a["counts"]), dict(a["opts"])
        self.value_sums = dict(a.get("value_sums", dict.fromkeys(_VALUE_SUMS, 0.0)))  # absent before select=value
        self.admit_rng.bit_generator.state = a["rng"]
        self.iw_raw = dict(a.get("iw_raw", {}))  # absent before select=iw
        if self.greso is not None:
            self.greso.load_state_dict(a["greso"])


@cache
def with_admission(base: type[PoolStrategy]) -> type[PoolStrategy]:
    """`base` with prompt admission in front (one class per base, built once)."""
    return type(f"Admitted{base.__name__}", (Admission, base), {"__doc__": f"{base.__name__} with prompt admission"})


def needs_admission(cfg: Any) -> bool:
    return cfg.resolved_select != "none" or cfg.resolved_evict is not None
