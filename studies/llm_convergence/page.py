"""The SmolLM2 study's page for the documentation (`docgen` finds it): L1 and L2, the later registration `llm_spo`
(L1[llm_spo]) from its own folder, and what SPO did on SmolLM2 (the `spo-smollm2` block of docs/fewer_samples.md)."""

from __future__ import annotations

from docgen.cells import f2, verdict, with_interval
from docgen.page import Page
from docgen.schema import ESTIMATE, NUMBER, check
from docgen.sources import STUDIES, read_json
from docgen.summary import summary_page

SPO = STUDIES / "llm_convergence" / "results" / "llm_spo" / "llm_spo.json"
HEADLINE = {**ESTIMATE, "value": (NUMBER, type(None)), "arm": str, "reference": str, "goal": str}
SPO_RESULT = {
    "headline": {"L1": HEADLINE, "L2": {**ESTIMATE, "value": (NUMBER, type(None))}},
    "analysis": {"table": {"*": {"final_accuracy": NUMBER, "no_signal_share?": NUMBER, "steps?": ESTIMATE}}},
    "instrument": {"seeds": [NUMBER], "steps": NUMBER, "batch_size": NUMBER, "arm_specs?": {"*": dict}},
}
"""What the `spo-smollm2` block publishes of `llm_spo.json` (`docgen.schema`)."""


def page() -> Page:
    out = summary_page("llm_convergence", "A real small LLM: SmolLM2-135M-Instruct", 5, ("L1", "L1[llm_spo]"))
    out.blocks = {"spo-smollm2": spo_on_smollm2()}
    return out


def spo_on_smollm2() -> list[str]:
    """The registered SPO arm against GRPO-n4 on SmolLM2: L1 and L2 with their verdict, the final accuracies, the
    no-signal share and the per-step factor (`results/llm_spo/llm_spo.json`)."""
    res = read_json(SPO)
    check(res, SPO_RESULT)
    l1, l2 = res["headline"]["L1"], res["headline"]["L2"]
    arm, ref = l1["arm"], l1["reference"]
    table, inst = res["analysis"]["table"], res["instrument"]
    prompts = {a: inst.get("arm_specs", {}).get(a, {}).get("batch_size", inst["batch_size"]) for a in (arm, ref)}
    return [
        f"On SmolLM2, L1 is {verdict(l1, l1['goal'])}: {with_interval(l1)} on generated tokens (90% t-interval, "
        f"{len(inst['seeds'])} paired seeds), {with_interval(l2)} on CPU time; after {inst['steps']} steps `{ref}` "
        f"ends at {f2(table[ref]['final_accuracy'])} held-out accuracy and `{arm}` at "
        f"{f2(table[arm]['final_accuracy'])}. A `{ref}` step has no signal in {f2(table[ref]['no_signal_share'])} of "
        f"its groups and every SPO sample carries one, yet `{arm}` learns per RL step only "
        f"{with_interval(table[arm]['steps'])}x as fast as `{ref}`, and each of its steps costs more CPU "
        f"({prompts[arm]} distinct prompts to prefill instead of {prompts[ref]}). The numbers are on "
        "[its results page](results/llm_convergence.md)."
    ]
