"""One prompt memory on every process (`integrations/trl_memory.py`): visits of the same prompt by two processes in
one step are applied in one order everywhere, by a unit test of the merge and by two `accelerate launch` processes that
share every prompt."""

from __future__ import annotations

import json

import pytest

from reinforce_ada.integrations.trl_memory import VisitLog, merge, share_visits
from reinforce_ada.sampling.memory import PromptMemory
from reinforce_ada.sampling.options import Options, make_options
from reinforce_ada.types import Prompt

A, B, C = (Prompt(id=x, text=f"<bos>{x}") for x in "abc")
T, F = True, False


def fresh() -> PromptMemory:
    return PromptMemory(
        make_options(Options, decay=0.9, history=4, estimator="both", predictor_dim=64, predictor_lr=0.2, evict=0.75)
    )


def test_merged_memories_are_identical_and_equal_rank_order_replay():
    prior = fresh()
    prior.new_step()
    prior.record(A, [T, F])
    before = prior.state_dict()
    local = {0: [(A, [T, T, F, F]), (B, [T])], 1: [(C, [F, F]), (A, [T, T, T, T])]}  # both visit A
    memories, logs = [], []
    for rank in (0, 1):
        m = fresh()
        m.load_state_dict(before)
        logs.append(VisitLog(m))
        m.new_step()  # the strategy's begin
        for p, o in local[rank]:
            m.record(p, o)
        memories.append(m)
    assert memories[0].tracker.counts["a"] != memories[1].tracker.counts["a"]  # each applied its own visit first
    everyone = [log.close() for log in logs]
    assert everyone[0] == [
        ({"id": "a", "text": "<bos>a", "answer": "", "level": None, "meta": {}}, [T, T, F, F], None),
        ({"id": "b", "text": "<bos>b", "answer": "", "level": None, "meta": {}}, [T], None),
    ]
    assert all("record" not in vars(m) for m in memories)  # the recorder is gone
    for m, log in zip(memories, logs, strict=True):
        merge(m, log.before, json.loads(json.dumps(everyone)))  # as gathered: plain data
    ref = fresh()
    ref.load_state_dict(before)
    ref.new_step()
    for rank in (0, 1):
        for p, o in local[rank]:
            ref.record(p, o)
    assert memories[0].state_dict() == memories[1].state_dict() == ref.state_dict()
    assert ref.recent["a"] == "1111" and ref.streak["a"] == 1 and "a" in ref.evicted  # rank 1's visit came last
    assert ref.stats["visits"] == 4
    for m in (*memories, ref):
        m.new_step()  # the predictor learns the pending visits in the same order
    assert memories[0].state_dict() == memories[1].state_dict() == ref.state_dict()


def test_replaying_one_process_own_visits_reproduces_its_memory():
    """With one process (gather returns only its own visits), the rebuilt memory is the one the strategy built."""
    m = fresh()
    m.new_step()
    m.record(A, [T, F])
    log = VisitLog(m)
    m.new_step()
    for p, o in [(A, [T, T]), (B, [F]), (A, [F, F, T])]:
        m.record(p, o)
    m.record(B, [T, T], tokens=[12, 30])  # completion lengths (select=value) are replayed too
    m.record(C, [T], [7], ([1, 2], [-0.5, -0.25]))  # the strategy passes its response (forgetting=drift's input)
    m.record(C, [])  # an empty visit records nothing
    built = m.state_dict()
    share_visits(log, lambda mine: mine)
    assert m.state_dict() == built


def test_partial_credit_rewards_travel_with_the_visits():
    """Each process's rewards reach every memory, so the tracker baseline's value (the mean reward) agrees too."""
    one, two = fresh(), fresh()
    logs = [VisitLog(one), VisitLog(two)]
    one.new_step()
    two.new_step()
    one.record(A, [F, F], rewards=[0.4, 0.3])
    two.record(A, [T, F], rewards=[1.0, 0.2])
    everyone = [log.close() for log in logs]
    assert everyone[0][0][3] == [0.4, 0.3]
    for m, log in zip((one, two), logs, strict=True):
        merge(m, log.before, everyone)
    assert one.state_dict() == two.state_dict() and one.value(A) != one.estimate(A)


def test_no_new_step_when_no_process_started_one():
    m = fresh()
    m.new_step()
    log = VisitLog(m)
    share_visits(log, lambda mine: mine)  # begin([]) on every process: no step started, no visits
    assert m.step == 1 and m.stats["visits"] == 0


@pytest.mark.slow
def test_two_processes_visiting_the_same_prompts_keep_one_memory(tmp_path):
    """Every row of the dataset is the same prompt, so both processes visit it (and its duplicate) every step."""
    pytest.importorskip("trl")
    pytest.importorskip("accelerate")
    from tests.trl_two_process import launch

    runs = launch(tmp_path, ["est-shared", "knapsack-shared"])
    for name, (r0, r1) in runs.items():
        assert r0["memory"] == r1["memory"], name
        assert len(r0["memory"]["visits"]) == 2  # the prompt and its duplicate within a process
        assert r0["memory"]["stats"]["visits"] == r0["history"][-1]["total"]["prompts"] == 4
        assert sum(r0["memory"]["visits"].values()) == 8  # 2 steps x 2 processes x 2 prompts
