"""One prompt memory on every process: a step's visits from all processes, applied in one order everywhere.

Under `accelerate launch` each process runs the strategy on its own prompts, and its memory records its own visits as
they happen. Two processes can visit the same prompt in one step (a refill or admission candidate that is in another
process's batch, or a prompt the dataset holds twice), and decayed counts, GRESO streaks and Knapsack's outcome
history depend on the order visits are applied. So after each step every process rebuilds the step's memory from the
same inputs:
1) `VisitLog` keeps the memory as it was before the step (the same on every process) and records this process's visits
   (prompt, outcomes, completion lengths, rewards) in the order the strategy made them;
2) the visits are gathered (`gather_object`), and `merge` restores the memory to its state before the step, starts
   the step (`new_step`, as the strategies' `begin` did; once, if any process started one) and records every
   process's visits in rank order, each process's in its own order. The predictor's pending visits follow the same
   order, so its next update agrees too.
Within the step a process's decisions read only its own visits (as before); from the next step on, every memory is
the same. In one process nothing is rebuilt. The cost is one copy of the memory's state per step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.types import Prompt

Visit = tuple[Any, ...]
"""(the prompt as a dict, its outcomes: correct or not, its samples' lengths in tokens or None[, their rewards]) --
picklable, for `gather_object`."""


class VisitLog:
    """Records the visits a memory makes during one step, and the memory's state before it."""

    def __init__(self, memory: PromptMemory):
        self.memory = memory
        self.before = memory.state_dict()
        self.visits: list[Visit] = []
        record = memory.record

        def logged(
            prompt: Prompt,
            outcomes: list[bool],
            tokens: list[int] | None = None,
            response: tuple[list[int], list[float]] | None = None,
            rewards: list[float] | None = None,
        ) -> None:
            if outcomes:  # an empty visit records nothing (PromptMemory.record)
                lengths = None if tokens is None else [int(t) for t in tokens]
                visit = (asdict(prompt), [bool(x) for x in outcomes], lengths)
                self.visits.append(visit if rewards is None else (*visit, [float(r) for r in rewards]))
            record(prompt, outcomes, tokens, response, rewards)  # `response`: forgetting=drift only (TRL refuses it)

        memory.record = logged  # type: ignore[method-assign]  # this instance only, until close()

    def close(self) -> list[Visit]:
        """Stop recording; this process's visits of the step, in the order they were made."""
        del self.memory.record  # back to the class's method
        return self.visits


def merge(
    memory: PromptMemory, before: dict[str, Any], everyone: Sequence[Sequence[Visit]], *, new_step: bool = True
) -> None:
    """Make `memory` the step's memory over all processes: `before` (the state before the step), a new step (when
    any process's strategy started one: `begin` with prompts), then every process's visits (`everyone[rank]`) in rank
    order."""
    memory.load_state_dict(before)
    if new_step:
        memory.new_step()
    for visits in everyone:
        for prompt, outcomes, *rest in visits:  # visits logged before lengths (or rewards) were kept have none
            lengths, rewards = (list(rest) + [None, None])[:2]
            memory.record(Prompt(**prompt), list(outcomes), lengths, rewards=rewards)


def share_visits(log: VisitLog, gather: Callable[[list], list]) -> None:
    """Close `log`, gather every process's (started a step?, visits) (`gather`: accelerate's `gather_object`) and
    merge them."""
    started = log.memory.step > log.before["step"]
    everyone = gather([(started, log.close())])
    merge(log.memory, log.before, [visits for _, visits in everyone], new_step=any(s for s, _ in everyone))
