"""The documentation: a short README that starts right, results that cannot drift from their data, a reference that
lists every command, flag, config field and strategy option, and a site that builds with `mkdocs build --strict`."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docgen import reference
from docgen.__main__ import stale
from docgen.cells import verdict
from docgen.links import repo_link, rewrite_links, study_figures

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_is_short_and_its_first_screen_says_what_and_how():
    lines = README.splitlines()
    assert len(lines) <= 200
    assert lines[3:5] == [
        "pip install torch==2.13.0 -e . && reinforce-ada train",
        'pip install torch==2.13.0 -e ".[dev]" && python -m pytest',
    ]  # the two set-up commands, first and unchanged
    first_screen = "\n".join(lines[:40])
    assert "language models" in first_screen and "verifiable rewards" in first_screen  # what it is
    assert "--strategy auto" in first_screen and "--strategy seq" in first_screen  # which sampler, in one line


def test_the_default_and_the_recommendation_agree_in_train_help(capsys, monkeypatch):
    from reinforce_ada.cli.main import build_parser

    monkeypatch.setenv("COLUMNS", "300")
    with pytest.raises(SystemExit):
        build_parser(["train"]).parse_args(["train", "--help"])
    entry = next(ln for ln in capsys.readouterr().out.splitlines() if ln.strip().startswith("--strategy NAME"))
    assert "default seq" in entry and "auto" in entry and "per token" in entry


def test_committed_results_are_what_docgen_writes():
    """A number on a results page, in BENCHMARKS.md or in the README's table is regenerated from the studies' JSON:
    `python -m docgen` rewrites them; a committed file that differs fails here."""
    assert stale() == [], "run `python -m docgen` and commit what it writes"


def test_a_later_registration_in_its_own_folder_joins_its_study_page(tmp_path, monkeypatch):
    import json

    from docgen import page as page_mod
    from docgen import sources, summary

    results_dir = tmp_path / "demo" / "results"
    (results_dir / "later").mkdir(parents=True)
    entry = {
        "what": "tokens to target",
        "value": 1.1,
        "t_lo": 0.9,
        "t_hi": 1.3,
        "per_seed": [1.0, 1.2],
        "goal": ">= 1.3 with the 90% interval above 1",
        "preregistered": True,
    }
    (results_dir / "summary.json").write_text(json.dumps({"L1": {**entry, "arm": "mopps"}}))
    (results_dir / "later" / "summary.json").write_text(json.dumps({"L1": {**entry, "arm": "spo-32", "value": 1.4}}))
    for mod in (summary, sources, page_mod):
        monkeypatch.setattr(mod, "STUDIES", tmp_path)
    assert sources.later_registrations("demo") == ["later"]

    def page():
        return summary.summary_page("demo", "A demo study", 1, ("L1", "L1[later]"))

    text = page().render()
    assert "# A demo study" in text and "### Later registrations" in text and "| L1[later] |" in text
    assert (
        "spo-32" in text and "L1[later] (tokens to target, spo-32): missed" in text
    )  # its own verdict in the page's headline
    assert "missed (the interval reaches 1)" in text  # 1.4 but [0.9, 1.3]: the goal asks the interval above 1
    for later, says in (
        ({"value": None, "status": "unmeasured"}, "L1[later] (tokens to target, spo-32): no result yet (unmeasured)"),
        (
            {"status": "partial", "missing": "2 of 5 registered seeds", "t_lo": 1.35},
            "interim 1.40 [1.35, 1.30] (2 of 5",
        ),
        (
            {"status": "unmeasured", "t_lo": 1.35},
            "interim 1.40 [1.35, 1.30]",
        ),  # fewer than 2 seeds, a value all the same
    ):  # a registration whose runs are under way: no verdict, and its page still builds
        spo = {**entry, "arm": "spo-32", "value": 1.4, **later}
        (results_dir / "later" / "summary.json").write_text(json.dumps({"L1": spo}))
        text = " ".join(page().render().split())
        assert says in text and "L1[later] (tokens to target, spo-32): met" not in text
        later_rows = text.split("### Later registrations")[1]
        assert "**met**" not in later_rows and ("interim:" in later_rows or later.get("value", 1) is None)


@pytest.mark.parametrize(
    ("entry", "goal", "pool", "expected"),
    [
        ({"value": 2.1, "t_lo": 2.05, "t_hi": 2.2}, ">= 2.0", None, "**met**"),
        ({"value": 2.1, "lo": 1.9, "hi": 2.3}, ">= 2.0", None, "**met** on the point estimate"),
        (
            {"value": 1.03, "t_lo": 0.89, "t_hi": 1.19},
            ">= 2.0 on default and hard, >= 1.5 on small",
            "hard",
            "missed (interval excludes the goal)",
        ),
        (
            {"value": 1.2, "t_lo": 0.9, "t_hi": 1.6},
            ">= 2.0 on default, >= 1.5 on small",
            "small",
            "missed (interval reaches it)",
        ),
        ({"value": 0.79}, "<= 0.7", None, "missed"),
        ({"value": 0.98, "lo": 0.93, "hi": 1.02}, "<= 1.05", None, "**met**"),
        ({"value": 1.06}, "none: the ceiling", None, "reported (no goal)"),
        (
            {"value": 1.4, "t_lo": 0.9, "t_hi": 1.9},
            ">= 1.3 with the 90% interval above 1",
            None,
            "missed (the interval reaches 1)",
        ),
        ({"value": 1.4, "t_lo": 1.1, "t_hi": 1.9}, ">= 1.3 with the 90% interval above 1", None, "**met**"),
        (
            {"value": 1.6, "t_lo": 1.2, "t_hi": 1.9},
            ">= 1.5 with the 90% interval above 1.5",
            None,
            "missed (the interval reaches 1.5)",
        ),  # the number is read whole, not as "1"
        ({"value": 1.6, "t_lo": 1.1, "t_hi": 2.0}, ">= 1.5 with the 90% interval excluding 1", None, "**met**"),
        (
            {"value": 1.6, "t_lo": 1.1, "t_hi": 2.0},
            ">= 1.5 on every pool with the interval's lower end above 1",
            None,
            "**met**",
        ),
        (
            {"value": 1.4, "lo": 1.4, "hi": 1.4, "per_seed": [1.4]},
            ">= 1.3 with the 90% interval above 1",
            None,
            "**met** on the point estimate (no interval)",
        ),  # one seed: a bootstrap of one value is no interval
    ],
)
def test_verdicts_say_where_the_interval_lies(entry, goal, pool, expected):
    assert verdict(entry, goal, pool) == expected


def test_one_seed_shows_its_value_without_an_interval():
    from docgen.cells import with_interval

    assert with_interval({"value": 1.12, "lo": 1.12, "hi": 1.12, "per_seed": [1.12]}) == "1.12"
    assert with_interval({"value": 1.1, "t_lo": 0.9, "t_hi": 1.3, "per_seed": [1.0, 1.2]}) == "1.10 [0.90, 1.30]"


def test_cli_reference_lists_every_command_and_flag():
    from reinforce_ada.cli.main import build_parser

    page = reference.cli_page()
    for name, (_, sp) in reference.subcommands(build_parser([])).items():
        assert f"\n## {name}\n" in page, name
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for action in sp._actions:
            if action.help is argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings or [action.dest]:
                assert flag in section, f"{name}: {flag}"


def test_config_reference_lists_every_field_of_every_section():
    from reinforce_ada.training.config import SECTIONS, TrainConfig

    page = reference.config_page()
    assert set(reference.config_sections()) == set(SECTIONS) - {"strategy"}
    assert {f.name for f in dataclasses.fields(TrainConfig)} == set(SECTIONS)
    for sec, cls in reference.config_sections().items():
        section = page.split(f"\n## [{sec}]", 1)[1].split("\n## ", 1)[0]
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in section, f"[{sec}] {f.name}"


def test_strategy_reference_lists_every_strategy_and_option():
    from reinforce_ada.sampling.options import Options, option_specs
    from reinforce_ada.sampling.strategies import STRATEGIES, strategy_class

    page = reference.strategies_page()
    shared = page.split("\n## Shared options", 1)[1]
    for f in dataclasses.fields(Options):
        assert f"| `{f.name}` |" in shared, f.name
    for name in set(STRATEGIES) - {"auto"}:
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for spec in option_specs(strategy_class(name).Options):
            if spec.group == "own":
                assert f"| `{spec.name}` |" in section, f"{name}: {spec.name}"


def test_links_to_repository_files_become_site_pages_or_code():
    assert repo_link("docs/trl.md") == "trl.md"
    assert repo_link("studies/compute_to_target/README.md") == "results/compute_to_target.md"
    assert repo_link("docs/verl.md#install", "reference") == "../verl.md#install"
    text = "see [studies/README.md](studies/README.md), [pyproject](pyproject.toml) and [TRL](https://x.org)"
    assert rewrite_links(text) == "see [studies/README.md](results/index.md), `pyproject` and [TRL](https://x.org)"


def test_every_figure_a_docs_page_shows_is_one_the_site_serves():
    """A page's `../studies/...png` must be a committed figure the site's hook serves (a later registration's figure
    sits one folder deeper, in `results/<name>/`); the strict build is slow, so this is checked here as well."""
    served = set(study_figures(ROOT))
    assert any(p.count("/") == 4 for p in served)  # studies/NAME/results/LATER/x.png: a later registration's own
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for target in re.findall(r"!\[[^\]]*\]\(((?:\.\./)+studies/[^)]+\.png)\)", page.read_text()):
            assert target.lstrip("./") in served, (
                f"{page.relative_to(ROOT)} shows {target}, which the site does not serve"
            )


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="the docs extra: pip install -e '.[docs]'")
def test_site_builds_strict(tmp_path):
    """`mkdocs build --strict`: a broken link, a missing page or a page left out of the nav fails (about 20 s)."""
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    for page in ("reference/cli", "reference/config", "reference/strategies", "reference/api", "results"):
        assert (tmp_path / "site" / page / "index.html").exists(), page
    assert (tmp_path / "site" / "search" / "search_index.json").exists()  # the site has search
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert len(re.findall(r'id="reinforce_ada\.', api)) >= 30  # the public API rendered from its docstrings


def test_the_speed_goals_table_quotes_the_committed_summary():
    """docs/benchmarks.md's goals table is typed by hand: each speed goal's row must quote the committed figure of
    benchmarks/results/summary.json (it once kept an older run's P4 after the result was re-measured)."""
    import json

    summary = json.loads((ROOT / "benchmarks" / "results" / "summary.json").read_text())
    rows = {
        line.split("|")[1].split()[0]: line.split("|")[2]
        for line in (ROOT / "docs" / "benchmarks.md").read_text().splitlines()
        if re.match(r"\| P[4-8] ", line)
    }
    assert set(rows) == {"P4", "P5", "P6", "P7", "P8"}
    for goal, entry in summary.items():
        quoted = [entry["value"], *(v["value"] for v in entry.values() if isinstance(v, dict) and "value" in v)]
        for value in quoted:  # the headline and its per-model entries (P4's SmolLM2)
            assert f"{value:.2f}" in rows[goal], f"{goal}: {value:.2f} is not in the table's row: {rows[goal]}"


def test_the_samples_per_step_table_quotes_the_committed_result():
    """docs/fewer_samples.md's Spearman table is typed by hand: each pool's row must name the best uniform arm and
    quote the rank correlations of studies/compute_to_target/results/samples_per_step.json."""
    import json

    result = json.loads((ROOT / "studies" / "compute_to_target" / "results" / "samples_per_step.json").read_text())[
        "pools"
    ]
    rows = {
        cells[0]: cells[1:]
        for line in (ROOT / "docs" / "fewer_samples.md").read_text().splitlines()
        if line.startswith("| ") and (cells := [c.strip() for c in line.strip("|").split("|")])[0] in result
    }
    assert set(rows) == set(result)
    for pool, r in result.items():
        arm, all_, adaptive = rows[pool]
        assert arm.lower() == r["best_uniform"], f"{pool}: the table names {arm}, the result {r['best_uniform']}"
        assert (all_, adaptive) == (f"{r['spearman_all']:.2f}", f"{r['spearman_adaptive']:.2f}"), pool


def test_the_spo_write_ups_quote_the_committed_result():
    """docs/fewer_samples.md's "What it says" paragraph and the study's write-up are typed by hand: every factor with
    its interval they quote ("1.38 [1.24, 1.53]") must be one of the committed result's (an arm's factor on any axis
    and pool, a claim's, the old reference's), and every other factor (x.xx) one of its summary figures."""
    import json

    def figures(x):  # (value, t_lo, t_hi) of every factor; per-seed values and per-target lists left out
        if isinstance(x, dict):
            own = [(x["value"], x.get("t_lo"), x.get("t_hi"))] if isinstance(x.get("value"), float) else []
            skip = ("per_seed", "runs")
            return own + [
                f for k, v in x.items() if k not in skip and not k.endswith("_per_target") for f in figures(v)
            ]
        return [f for v in x for f in figures(v)] if isinstance(x, list) else []

    def fmt(v):
        return f"{v:.2f}" if isinstance(v, float) else "-"

    res = json.loads((ROOT / "studies" / "fewer_samples" / "results" / "fewer_samples.json").read_text())
    triples = {tuple(map(fmt, f)) for f in figures(res)}
    singles = {fmt(v) for f in figures(res) for v in f} | {
        f"{e:.2f}"
        for b in res["by_pool"].values()
        for a in b["value_errors"].values()
        for e in a.values()
        if isinstance(e, float)
    }
    goals = {"1.50", "2.00", "1.30"}  # the registration's goals, quoted as goals
    text = (ROOT / "docs" / "fewer_samples.md").read_text()
    said = text[text.index("**What it says.**") : text.index("**What to use.**")]
    write_up = (ROOT / "studies" / "fewer_samples" / "README.md").read_text()
    write_up = write_up[write_up.index("## What the study says") : write_up.index("## The instrument")]
    for where, para in (("docs/fewer_samples.md", said), ("studies/fewer_samples/README.md", write_up)):
        para = " ".join(para.split())
        quoted = re.findall(r"(\d\.\d\d) \[(\d\.\d\d), (\d\.\d\d)\]", para)
        assert quoted, where  # the check reads the paragraph's factors, so it must find some
        wrong = [q for q in quoted if q not in triples]
        assert not wrong, f"{where} quotes {wrong}: no factor of fewer_samples.json has that value and interval"
        alone = set(re.findall(r"(?<![\d.+\[-])\d\.\d\d(?![\d,\]])", para)) - goals - {q[0] for q in quoted}
        assert not sorted(alone - singles), f"{where} quotes {sorted(alone - singles)}, not in fewer_samples.json"


def test_the_spo_smollm2_verdict_quoted_by_hand_is_the_committed_one():
    """The SmolLM2 registration's L1 is typed by hand in six places: each quotes the committed factor and interval."""
    import json

    res = json.loads((ROOT / "studies" / "llm_convergence" / "results" / "llm_spo" / "llm_spo.json").read_text())
    l1 = res["headline"]["L1"]
    assert l1["status"] == "complete" and res["partial"] is None
    quoted = f"{l1['value']:.2f} [{l1['t_lo']:.2f}, {l1['t_hi']:.2f}]"
    places = ("README.md", "docs/fewer_samples.md", "docs/which-sampler.md", "docs/experimental.md")
    places += ("studies/fewer_samples/README.md", "studies/llm_convergence/README.md")
    stale = [p for p in places if quoted not in " ".join((ROOT / p).read_text().split())]
    assert not stale, f"{stale} do not quote L1[llm_spo] = {quoted} from llm_spo.json"


def test_provenance_falls_back_to_the_registered_code_and_the_runs_cpus(tmp_path):
    from docgen.page import provenance

    reg = tmp_path / "preregistration_later.toml"
    reg.write_text('code = "ee2257ef9636d618387f052a1e78b0014acfd1e5"  # the commit whose src/ runs the study\n')
    result = {"meta": {"date": "2026-12-06", "preregistration_file": {"path": str(reg)}}, "runs": {"all": ["a", "b"]}}
    runs = {i: {"wall_s": 60.0, "sessions": [{"cpu": f"CPU {i}"}]} for i in ("a", "b")}
    (row,) = provenance("demo", runs, {"later": result})
    assert row["commit"] == "ee2257ef9636d618387f052a1e78b0014acfd1e5"  # the registration's `code`
    assert row["machine"] == "CPU a; CPU b" and row["runs"] == 2
    (row,) = provenance("demo", runs, {"x": {"meta": {"git_commit": "abc", "machine": "M"}, "runs": {}}})
    assert (row["commit"], row["machine"]) == ("abc", "M")  # a result's own record wins
