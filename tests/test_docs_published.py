"""Generated pages validate what they publish (issue 52): `python -m docgen` refuses a study file holding a number it
cannot publish (NaN, Infinity, 1e308), a missing field or a value of another type than the study writes -- naming the
file and the field, in one line -- and writes text taken from JSON so that it renders as that text (no raw HTML, no
`javascript:` link, no attribute list). The committed tree stays byte for byte what it was
(`test_docs.py::test_committed_results_are_what_docgen_writes`)."""

from __future__ import annotations

import gzip
import json
import sys
import types

import pytest

from docgen import page as page_mod
from docgen import published, results, sources, summary
from docgen.__main__ import main
from docgen.page import Page
from docgen.published import PageDataError

ENTRY = {
    "what": "tokens to target",
    "value": 1.1,
    "t_lo": 0.9,
    "t_hi": 1.3,
    "per_seed": [1.0, 1.2],
    "goal": ">= 1.3 with the 90% interval above 1",
    "preregistered": True,
    "arm": "mopps",
}


@pytest.fixture
def demo(tmp_path, monkeypatch):
    """A study `demo` under tmp_path whose summary.json a test writes (raw text: NaN and Infinity included)."""
    folder = tmp_path / "demo" / "results"
    folder.mkdir(parents=True)
    for mod in (summary, sources, page_mod):
        monkeypatch.setattr(mod, "STUDIES", tmp_path)

    def write(text: str) -> None:
        (folder / "summary.json").write_text(text)

    return write


def _page() -> Page:
    return summary.summary_page("demo", "A demo study", 1, ("L1",))


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("NaN", "holds NaN"),
        ("Infinity", "holds Infinity"),
        ("-Infinity", "holds -Infinity"),
        ("1e999", "field L1.value: inf is not a publishable number"),
        ("1e308", "field L1.value: 1e+308 is not a publishable number"),
        ('"1.25"', "field L1.value: text ('1.25') where the study writes a number"),
        ("true", "field L1.value: true/false (True) where the study writes a number"),
        ("[1.2]", "field L1.value: a list where the study writes a number"),
    ],
)
def test_a_number_the_page_cannot_publish_is_an_error_naming_the_file_and_field(demo, value, says):
    demo('{"L1": ' + json.dumps(ENTRY)[:-1] + ', "value": ' + value + "}}")
    with pytest.raises(PageDataError, match="demo/results/summary.json") as e:
        _page()
    assert says in str(e.value)


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({k: v for k, v in ENTRY.items() if k != "value"}, "L1: a figure with neither its value nor its pools"),
        ({"what": "C1", "goal": ">= 1.1", "pools": {}}, "L1: a figure with neither its value nor its pools"),
        ({**ENTRY, "pools": {"hard": {"arm": "mopps"}}}, "field L1.pools.hard.value is missing"),
        ({**ENTRY, "what": 3}, "field L1.what: the number 3 where the study writes text"),
        ({**ENTRY, "pools": []}, "field L1.pools: a list where the study writes an object"),
    ],
)
def test_a_claim_without_its_pools_or_a_field_of_another_type_is_an_error(demo, entry, says):
    demo(json.dumps({"L1": entry}))
    with pytest.raises(PageDataError, match="demo/results/summary.json") as e:
        _page()
    assert says in str(e.value)


HOSTILE = {
    "what": "<script>alert(1)</script> tokens, JaVaScRiPt:alert(1) {: onclick=alert(1) }",
    "goal": "[click](javascript:alert(1)) >= 1.3",
    "arm": '<img src=x onerror="alert(1)">',
    "date": "2026-01-01<!-- x -->",
}


def test_text_from_json_renders_as_text_not_html_links_or_attributes(demo):
    demo(json.dumps({"L1": {**ENTRY, **HOSTILE}}))
    text = _page().render()
    body = text.split("\n", 1)[1]  # the first line is docgen's own comment
    for raw in ("<script", "<img", "<!--", "](javascript", "javascript:", "JaVaScRiPt:", "{:"):
        assert raw not in body, raw
    assert "&lt;script>alert(1)&lt;/script> tokens, JaVaScRiPt&#58;alert(1) &#123;: onclick=alert(1) }" in body
    assert "&lt;img src=x" in body and "[click]\\(javascript&#58;alert(1))" in body and "&lt;!-- x" in body
    assert ">= 1.3" in body  # a goal's comparison is text, left as it is
    assert published.safe("1.10 [0.98, 1.23] (90%) a <= b, x > y, <code>") == (
        "1.10 [0.98, 1.23] (90%) a <= b, x > y, &lt;code>"
    )


def test_a_missing_field_a_page_reads_is_named(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"settings": {"steps": 3}, "runs": [1]}))
    doc = published.load_json(f)
    with pytest.raises(PageDataError, match=r"r.json: field settings.seeds is missing"):
        doc["settings"]["seeds"]
    with pytest.raises(PageDataError, match=r"r.json: field runs\[4\] is missing"):
        doc["runs"][4]
    doc = published.checked({"x": "high"}, "f.json")
    with pytest.raises(PageDataError, match=r"f.json: field x: 'high' is text where a number belongs"):
        f"{doc['x']:.2f}"


def _only(monkeypatch, build) -> None:
    """docgen with one study page, built by `build`."""
    module = types.ModuleType("studies.zz_demo.page")
    module.page = build
    monkeypatch.setitem(sys.modules, "studies.zz_demo.page", module)
    monkeypatch.setattr(results, "study_pages", lambda: [results.study_page("zz_demo")])


def test_docgen_names_a_damaged_file_in_one_line_and_writes_nothing(demo, tmp_path, monkeypatch, capsys):
    demo('{"L1": {"what": "x", "value": 1.')  # cut mid-file
    _only(monkeypatch, _page)
    assert main(["--check"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "demo/results/summary.json: not whole JSON" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    demo(json.dumps({"L1": ENTRY}))
    (tmp_path / "demo" / "results" / "records.jsonl.gz").write_bytes(gzip.compress(b'{"kind":"run","id":"a"}\n'))
    assert main(["--check"]) == 1  # records that lost their result line: refused, not read as "nothing recorded"
    err = capsys.readouterr().err
    assert "records.jsonl.gz: 1 runs and no result line" in err and err.count("\n") == 1


def test_a_page_that_cannot_be_built_names_the_files_it_read(demo, monkeypatch):
    demo(json.dumps({"L1": ENTRY}))

    def build() -> Page:
        e = sources.read_json(sources.STUDIES / "demo" / "results" / "summary.json")["L1"]
        return Page("zz_demo", "x", 1, verdict=e["what"].upper() + e["value"])  # a type the page did not expect

    module = types.ModuleType("studies.zz_demo.page")
    module.page = build
    monkeypatch.setitem(sys.modules, "studies.zz_demo.page", module)
    with pytest.raises(PageDataError, match=r"studies/zz_demo/page.py cannot build its page from .*summary.json"):
        results.study_page("zz_demo")


def test_a_number_a_page_derives_as_nan_is_not_published(monkeypatch, capsys):
    _only(monkeypatch, lambda: Page("zz_demo", "x", 1, verdict=f"ratio {0.0 * float('inf'):.2f} of the oracle's gain"))
    assert main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/results/zz_demo.md, line" in err and "'nan' is not a number to publish" in err


def test_every_figure_cell_checks_its_numbers_wherever_it_comes_from():
    """`docgen.cells` (every results page, the speed goals, the benchmarks' tables): a value that is true/false or
    text, or an interval with one end, is an error naming the file and field, not "1.00" or "[0.90, n/a]"."""
    from docgen.cells import verdict, with_interval

    with pytest.raises(PageDataError, match=r"s.json: field P5.value: True is not a number"):
        verdict(published.checked({"P5": {"value": True}}, "s.json")["P5"], ">= 1.0")
    with pytest.raises(PageDataError, match=r"s.json: field P1.t_hi is missing beside t_lo"):
        with_interval(published.checked({"P1": {"value": 1.0, "t_lo": 0.9}}, "s.json")["P1"])
    assert with_interval(published.checked({"value": 1.0, "t_lo": 0.9, "t_hi": 1.2}, "s.json")) == "1.00 [0.90, 1.20]"
