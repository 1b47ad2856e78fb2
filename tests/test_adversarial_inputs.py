"""Adversarial inputs for the two input paths that read untrusted files (issue 14 items 8 and 9).

Every file of `tests/adversarial/data/cases.toml` is written into a scratch folder and loaded with
`tasks.files.load_prompts`, and every template of `tests/adversarial/templates/cases.toml` is generated from with
`gsm_symbolic.generate`; each file's table states the exact outcome (the ConfigError's message, or what loads), so a
new corpus file is a new case and comes with its expectation. The template cases also check that no case took more
than a few MB or a few seconds.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import os
import re
import threading
import time
import tracemalloc
import warnings

import numpy as np
import pytest

from reinforce_ada.engines.hf import check_sampling
from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import score
from reinforce_ada.sampling.memory import PassRateTracker
from reinforce_ada.tasks import gsm_symbolic, template_lang
from reinforce_ada.tasks.files import MAX_PROMPT_CHARS, load_prompts
from reinforce_ada.types import Prompt, Sample
from tests.helpers import corpus, corpus_bytes, corpus_file, corpus_header

DATA = "data"
TEMPLATES = "templates"


def _corpus(family: str) -> list[str]:
    return sorted(corpus(family))


def _cases(family: str) -> dict:
    return corpus(family)


@pytest.mark.parametrize("family", [DATA, TEMPLATES])
def test_every_corpus_file_has_an_expectation_and_a_readme_entry(family):
    cases, readme = _cases(family), corpus_header(family)
    assert cases and all(("text" in case) != ("base64" in case) for case in cases.values())  # each holds its file
    for name, case in cases.items():
        assert f"`{name}`" in readme, f"{family}/cases.toml's header does not explain {name}"
        assert case["why"]
        assert ("error" in case) != ("answers" in case or "instances" in case), name


# --- data files (item 9) --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _corpus(DATA))
def test_data_case(name, tmp_path):
    case = _cases(DATA)[name]
    path = corpus_file(DATA, name, tmp_path)
    if name.endswith(".parquet"):
        pytest.importorskip("pyarrow")
    keys = {"features_key": case["features_key"]} if "features_key" in case else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if "error" in case:
            with pytest.raises(ConfigError, match=case["error"]) as err:
                load_prompts(path, **keys)
            assert str(path) in str(err.value)  # the message names the file
            return
        prompts = load_prompts(path, **keys)
    assert [p.answer for p in prompts] == case["answers"]
    if "levels" in case:
        assert [p.level for p in prompts] == [None if lv == "none" else lv for lv in case["levels"]]
    ours = [w for w in caught if str(path) in str(w.message)]
    if "warning" in case:
        assert len(ours) == 1 and issubclass(ours[0].category, UserWarning)
        assert re.search(case["warning"], str(ours[0].message))
    else:
        assert ours == []


def test_max_prompt_chars_is_a_parameter(tmp_path):
    path = corpus_file(DATA, "answer_numbers.jsonl", tmp_path)  # prompts "q0".."q5": two characters each
    assert len(load_prompts(path, max_prompt_chars=2)) == 6
    with pytest.raises(ConfigError, match=r"row 1, column 'prompt': the prompt has 2 characters; the limit is 1"):
        load_prompts(path, max_prompt_chars=1)
    assert MAX_PROMPT_CHARS == 32_000


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_a_fifo_is_refused_without_opening_it(tmp_path):
    """Issue 21: a FIFO named as a data file was opened and read, which blocks until a writer comes (forever)."""
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)
    outcome: list[BaseException | object] = []

    def load() -> None:
        try:
            outcome.append(load_prompts(fifo))
        except BaseException as e:  # handed to the main thread
            outcome.append(e)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(timeout=5)
    if worker.is_alive():  # let the blocked reader finish, so the daemon thread does not outlive the test
        with open(fifo, "w"):
            pass
        pytest.fail("load_prompts blocked on a FIFO")
    assert isinstance(outcome[0], ConfigError)
    assert f"dataset file {fifo} is not a regular file" in str(outcome[0])


def test_csv_field_size_limit_is_restored(tmp_path):
    before = csv.field_size_limit()
    load_prompts(corpus_file(DATA, "csv_huge_field.csv", tmp_path))
    assert csv.field_size_limit() == before


# --- GSM-Symbolic templates (item 8) --------------------------------------------------------------------------------

REPLACEMENTS = {"names": ["Ann", "Bo"], "numbers": ["one", "two", "three"]}
MAX_SECONDS = 5.0
MAX_PEAK_BYTES = 20 * 2**20


@pytest.mark.parametrize("name", _corpus(TEMPLATES))
def test_template_case(name, tmp_path):
    case = _cases(TEMPLATES)[name]
    sym = tmp_path / "symbolic"
    sym.mkdir()
    corpus_file(TEMPLATES, name, sym, as_name="0000.toml")
    (tmp_path / "replacements.json").write_text(json.dumps(REPLACEMENTS))
    start = time.perf_counter()
    tracemalloc.start()
    try:
        if "error" in case:
            with pytest.raises(ConfigError, match=case["error"]) as err:
                gsm_symbolic.generate(tmp_path, 2, max_tries=50)
            named = "0000.toml" if case["names"] == "file" else "GSM-Symbolic template "
            assert named in str(err.value)
        else:
            assert len(gsm_symbolic.generate(tmp_path, 2, max_tries=50)) == case["instances"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < MAX_SECONDS
    assert peak < MAX_PEAK_BYTES, f"{name} peaked at {peak / 2**20:.1f} MB"


def test_evaluate_refuses_a_deep_tree_that_bypassed_parse():
    node: ast.expr = ast.Constant(1)
    for _ in range(5000):  # deeper than Python's recursion limit: only the evaluator's own guard stops it
        node = ast.UnaryOp(op=ast.USub(), operand=node)
    with pytest.raises(template_lang.TemplateLimitError, match="nests deeper than 100 levels"):
        template_lang.evaluate(node, {}, template_lang.PURE)


def test_limits_are_documented_in_the_module_docstring():
    for limit in ("MAX_EXPR_CHARS", "MAX_DEPTH", "MAX_INT_BITS", "MAX_EXPONENT", "MAX_ITEMS", "MAX_CHARS"):
        assert f"`{limit}`" in template_lang.__doc__
    assert "MAX_ROUND_DIGITS" in template_lang.__doc__


def test_a_repeated_id_in_a_large_file_is_found_in_one_pass(tmp_path):
    """Issue 40: the repeated-id search was `ids.count` per id (quadratic: minutes at 100k rows, hours at 1M);
    100,000 rows with the repeat at the end now take a second, and the message names both rows."""
    path = tmp_path / "big.jsonl"
    rows = [{"id": f"r{i}", "prompt": f"q{i}", "answer": "1"} for i in range(100_000)]
    rows[-1]["id"] = "r99998"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError, match=r"id 'r99998' appears more than once \(rows 99999 and 100000\)"):
        load_prompts(path)


def test_a_template_that_never_yields_is_named_and_the_others_kept(tmp_path):
    """Issue 40: a template whose every draw fails yielded no prompts without a word; one such template among good
    ones is named in a warning (a real template can be so), none yielding anything is an error (the corpus case)."""
    sym = tmp_path / "symbolic"
    sym.mkdir()
    corpus_file(TEMPLATES, "repetition.toml", sym, as_name="0000.toml")
    good = corpus_bytes(_cases(TEMPLATES)["repetition.toml"]).decode().replace("- s = 'a' * 10**9\n", "")
    (sym / "0001.toml").write_text(good.replace("id_shuffled = 14", "id_shuffled = 15"))
    (tmp_path / "replacements.json").write_text(json.dumps(REPLACEMENTS))
    with pytest.warns(UserWarning, match=r"GSM-Symbolic templates \[\d+\] produced no instance"):
        prompts = gsm_symbolic.generate(tmp_path, 2, max_tries=50)
    assert len(prompts) == 2
    with pytest.raises(ConfigError, match="n_per_template=-1 must be a whole number >= 1"):
        gsm_symbolic.generate(tmp_path, -1)


def test_a_file_too_big_for_memory_or_sparse_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """Issue 40: a 2 GB sparse file ended in a MemoryError after minutes; the size is checked against physical
    memory first, and a text file of NUL bytes (sparse, or binary) is refused from its first block."""
    from reinforce_ada import userfiles

    sparse = tmp_path / "pool.jsonl"
    with sparse.open("wb") as fh:
        fh.truncate(8 << 20)  # 8 MiB of holes: no disk used
    with pytest.raises(ConfigError, match=r"pool.jsonl: byte 0 is a NUL byte; a binary or sparse file"):
        load_prompts(sparse)
    monkeypatch.setattr(userfiles, "usable_memory", lambda: 64 << 20)
    with pytest.raises(ConfigError, match=r"pool.jsonl is 0.0 GiB; reading it takes about 12x that, more than"):
        load_prompts(sparse)


# -- library guards ---------------------------------------------------------------------------------------------------
# Guards for library callers that bypass the config and CLI checks (issue 21's remaining cases).
@pytest.mark.parametrize("t", [math.nan, math.inf, -1.0])
def test_engines_refuse_a_temperature_that_is_not_finite_and_non_negative(t):
    with pytest.raises(ConfigError, match="temperature"):
        check_sampling(max_new_tokens=4, temperature=t, top_p=1.0, top_k=0, stop=())


@pytest.mark.parametrize(("value", "reward", "errors"), [("1.0", 0.0, 1), (None, 0.0, 1), (np.bool_(True), 1.0, 0)])
def test_a_plain_callable_reward_is_a_real_number_or_a_counted_error(value, reward, errors):
    samples = [Sample(prompt_id="p", text="x")]
    assert score(samples, {"p": Prompt(id="p", text="", answer="1")}, lambda c, a: value) == errors
    assert samples[0].reward == reward


def test_a_tracker_state_with_impossible_counts_is_refused():
    t = PassRateTracker(alpha=1.0, beta=1.0, decay=0.9)
    t.load_state_dict({"counts": {"a": [1.0, 2.0]}})
    for bad in ([-1.0, 2.0], [3.0, 2.0], [math.nan, 2.0]):
        with pytest.raises(ValueError, match="0 <= correct <= total"):
            t.load_state_dict({"counts": {"a": bad}})
    assert t.counts == {"a": (1.0, 2.0)}  # unchanged by a refused state
