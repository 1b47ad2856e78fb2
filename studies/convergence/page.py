"""The convergence study's results page (`docgen` finds it): the goals P1-P4 per step and per token."""

from __future__ import annotations

from docgen.page import Page
from docgen.summary import summary_page


def page() -> Page:
    return summary_page("convergence", "Convergence: per step and per token on the testbed", 2, ("P1", "P2"))
