"""The SmolLM2 study's results page (`docgen` finds it): L1 and L2, and the later registration `llm_spo` (L1[llm_spo])
from its own folder."""

from __future__ import annotations

from docgen.page import Page
from docgen.summary import summary_page


def page() -> Page:
    return summary_page("llm_convergence", "A real small LLM: SmolLM2-135M-Instruct", 5, ("L1", "L1[llm_spo]"))
