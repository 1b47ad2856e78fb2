"""`reinforce-ada eval` on several benchmarks (size-weighted average, pass@k) and `reinforce-ada filter` (the paper's
difficulty filter), on a tiny random Llama folder and small files; no network."""

from __future__ import annotations

import doctest
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.evaluation import datasets as datasets_module
from reinforce_ada.evaluation import filter as filter_module
from reinforce_ada.evaluation import metrics as metrics_module
from reinforce_ada.evaluation.filter import buckets, keep_indices, pass_rates, summary
from reinforce_ada.evaluation.metrics import pass_at_k, sample_correct, summarize, weighted_average
from reinforce_ada.types import Prompt, Sample

EVEN = "tests.helpers:even_length"  # a reward a random policy earns about half the time


@pytest.fixture
def files(tmp_path) -> tuple[Path, Path]:
    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps({"q": f"{i}+1=", "gold": str(i + 1), "level": 1 + i % 2}) + "\n" for i in range(3)))
    b = tmp_path / "b.csv"
    b.write_text("q,gold\n" + "".join(f"{i}+{i}=,{2 * i}\n" for i in range(5)))
    return a, b


def test_doctests():
    assert doctest.testmod(metrics_module).failed == 0
    assert doctest.testmod(datasets_module).failed == 0
    assert doctest.testmod(filter_module).failed == 0


def test_eval_two_files_writes_json_and_markdown_with_the_size_weighted_average(model_dir, files, tmp_path, capsys):
    a, b = files
    out, md = tmp_path / "r.json", tmp_path / "r.md"
    argv = ["eval", "--model", str(model_dir), "--dataset", f"small={a}", "--dataset", f"big={b}"]
    argv += ["--prompt-key", "q", "--answer-key", "gold", "--verifier", EVEN, "--samples", "4"]
    argv += ["--max-new-tokens", "3", "--threads", "1", "--out", str(out), "--markdown", str(md)]
    assert main(argv) == 0
    r = json.loads(out.read_text())
    small, big = r["datasets"]["small"], r["datasets"]["big"]
    assert (small["eval_prompts"], big["eval_prompts"]) == (3, 5)
    for key in ("eval_accuracy", "eval_pass@1", "eval_pass@2", "eval_pass@4", "eval_greedy_accuracy"):
        want = (3 * small[key] + 5 * big[key]) / 8
        assert r["weighted_average"][key] == pytest.approx(want) and r[key] == pytest.approx(want)
    for m in (small, big, r["weighted_average"]):
        assert m["eval_pass@1"] == pytest.approx(m["eval_accuracy"])
        assert m["eval_pass@1"] <= m["eval_pass@2"] <= m["eval_pass@4"] <= 1.0
    assert "eval_accuracy_L1" in small and "eval_accuracy_L1" not in r["weighted_average"]
    table = md.read_text()
    assert "| small | 3 |" in table and "| big | 5 |" in table and "| **W.Avg** | 8 |" in table
    assert f"{100 * r['weighted_average']['eval_accuracy']:.1f}" in table and "small by level" in table
    assert capsys.readouterr().out == table


def test_eval_limit_takes_a_seeded_subset(model_dir, files, capsys):
    a, _ = files
    argv = ["eval", "--model", str(model_dir), "--dataset", str(a), "--prompt-key", "q", "--answer-key", "gold"]
    argv += ["--verifier", EVEN, "--samples", "1", "--max-new-tokens", "2", "--limit", "2", "--no-greedy", "--json"]
    assert main([*argv, "--threads", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert list(r["datasets"]) == ["a"] and r["eval_prompts"] == 2 and "eval_greedy_accuracy" not in r


def test_pass_at_k_is_monotone_in_k():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        c = int(rng.integers(0, n + 1))
        vals = [pass_at_k(n, c, k) for k in range(1, n + 1)]
        assert all(x <= y + 1e-12 for x, y in zip(vals, vals[1:], strict=False))
        assert vals[0] == pytest.approx(c / n) and vals[-1] == float(c > 0)


def test_weighted_average_is_the_mean_over_pooled_prompts():
    prompts = {name: [Prompt(f"{name}{i}", "q") for i in range(n)] for name, n in (("x", 2), ("y", 6))}
    rng = np.random.default_rng(1)
    correct = {p.id: list(rng.integers(0, 2, 4).astype(float)) for ps in prompts.values() for p in ps}
    results = {name: summarize(ps, correct, [1, 2, 4]) for name, ps in prompts.items()}
    pooled = summarize([p for ps in prompts.values() for p in ps], correct, [1, 2, 4])
    avg = weighted_average(results)
    for key in ("eval_accuracy", "eval_pass@2", "eval_pass@4"):
        assert avg[key] == pytest.approx(pooled[key])
    assert avg["eval_prompts"] == 8


class ScriptedEngine:
    """Returns `correct[prompt id]` of k samples with reward 1, the rest 0 (already scored: no verifier call)."""

    def __init__(self, correct: dict[str, int]) -> None:
        self.correct = correct

    def generate(self, requests):
        return [
            Sample(r.prompt.id, text="x", reward=float(i < self.correct[r.prompt.id]))
            for r in requests
            for i in range(r.k)
        ]


def test_filter_keeps_exactly_the_prompts_in_lo_hi():
    counts = [0, 1, 2, 6, 7, 16, 5, 0]  # of 16
    prompts = [Prompt(f"p{i}", "q", "a") for i in range(len(counts))]
    engine = ScriptedEngine({p.id: c for p, c in zip(prompts, counts, strict=True)})
    correct, errors = sample_correct(engine, prompts, lambda c, a: 0.0, samples=16)
    rates = pass_rates(correct, [p.id for p in prompts])
    assert errors == 0 and rates == [c / 16 for c in counts]
    assert keep_indices(rates) == [1, 2, 3, 6]  # (0, 0.375]: 6/16 = 0.375 is kept, 7/16 is not
    assert keep_indices(rates, 0.0, 0.313) == [1, 2, 6]  # the official code's "easy" set
    assert keep_indices(rates, 1 / 16, 1.0) == [2, 3, 4, 5, 6]
    s = summary(rates)
    assert (s["kept"], s["too_hard"], s["too_easy"]) == (4, 2, 2)
    assert [(b.count, b.kept) for b in buckets(rates)] == [(2, False), (1, True), (1, True), (1, True), (1, True)] + [
        (1, False),
        (1, False),
    ]


def test_filter_cli_writes_kept_rows_with_pass_rate_and_a_histogram(model_dir, files, tmp_path, capsys):
    _, b = files
    out = tmp_path / "kept.jsonl"
    argv = ["filter", "--model", str(model_dir), "--dataset", str(b), "--prompt-key", "q", "--answer-key", "gold"]
    argv += ["--verifier", EVEN, "--samples", "4", "--max-new-tokens", "3", "--lo", "0", "--hi", "0.75"]
    assert main([*argv, "--out", str(out), "--threads", "1", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == s["kept"] and s["kept"] + s["too_hard"] + s["too_easy"] == s["prompts"] == 5
    assert all(0 < r["pass_rate"] <= 0.75 and {"q", "gold"} <= set(r) for r in rows)
    assert sum(x["count"] for x in s["buckets"] if x["kept"]) == s["kept"]
    assert out.with_suffix(".png").stat().st_size > 0
    # the kept rows read as a prior file (SPO's): matched by the prompt text whatever the dataset's prompt column, the
    # sample count smoothing the rate
    from reinforce_ada.sampling.memory import coverage_note, read_prior_file
    from reinforce_ada.tasks.files import load_prompts

    assert all(r["prompt"] == r["q"] and r["samples"] == 4 for r in rows)
    prior = read_prior_file(out)
    kept = [p for p in load_prompts(b, prompt_key="q", answer_key="gold") if p.text in {r["q"] for r in rows}]
    assert prior[kept[0].text] == pytest.approx((rows[0]["pass_rate"] * 4 + 0.5) / 5)
    assert coverage_note(prior, kept, str(out)) is None
    # --rates: every prompt's rate, kept or not, a prior file that knows them all
    every = tmp_path / "every.jsonl"
    assert main([*argv, "--out", str(tmp_path / "k1.jsonl"), "--rates", str(every), "--threads", "1"]) == 0
    assert f"wrote {tmp_path / 'k1.jsonl'}, {every} and" in capsys.readouterr().out
    all_rows = [json.loads(x) for x in every.read_text().splitlines()]
    assert len(all_rows) == 5 and {r["prompt"] for r in rows} <= {r["prompt"] for r in all_rows}
    assert all(set(r) == {"prompt", "pass_rate", "samples"} for r in all_rows)  # the file has no id column
    everyone = load_prompts(b, prompt_key="q", answer_key="gold")
    assert coverage_note(read_prior_file(every), everyone, str(every)) is None
    with pytest.raises(SystemExit):  # the same path twice would overwrite the kept rows
        main([*argv, "--out", str(every), "--rates", str(every), "--threads", "1"])
    assert "--rates" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a prior file is read by its suffix: a .csv name would not read back
        main([*argv, "--out", str(tmp_path / "k3.jsonl"), "--rates", str(tmp_path / "r.csv")])
    assert "it writes JSON Lines; name it .jsonl" in capsys.readouterr().err
    # a dataset's own `prompt` / `samples` columns that say something else are replaced, with a note
    own = tmp_path / "own.csv"
    own.write_text("q,gold,prompt,samples\n" + "".join(f"{i}+{i}=,{2 * i},other,99\n" for i in range(5)))
    argv[argv.index(str(b))] = str(own)
    assert main([*argv, "--out", str(tmp_path / "k2.jsonl"), "--threads", "1", "--json"]) == 0
    assert "replaces the dataset's own ['prompt', 'samples'] column(s)" in capsys.readouterr().err
    assert all(r["prompt"] == r["q"] for r in map(json.loads, (tmp_path / "k2.jsonl").read_text().splitlines()))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["eval", "--model", "{model}", "--dataset", "math500"], "choose one of ['arithmetic', 'champ'"),
        (["eval", "--model", "{model}", "--dataset", "x=/nonexistent/data.jsonl"], "does not exist"),
        (["eval", "--model", "/nonexistent"], "not a Hugging Face model folder"),
        (["eval", "--model", "{model}", "--dataset", "a=champ", "--dataset", "a=arithmetic"], "unique"),
        (
            [
                "filter",
                "--model",
                "{model}",
                "--dataset",
                "arithmetic",
                "--out",
                "o.jsonl",
                "--lo",
                "0.5",
                "--hi",
                "0.5",
            ],
            "--lo < --hi",
        ),
        (["filter", "--model", "{model}", "--dataset", "nope", "--out", "o.jsonl"], "unknown dataset 'nope'"),
        pytest.param(
            ["eval", "--model", "{model}", "--dataset", "arithmetic", "--engine", "vllm"],
            "needs vLLM",
            marks=pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed"),
        ),
    ],
)
def test_bad_input_exits_2_with_a_helpful_message(argv, needle, model_dir, capsys):
    with pytest.raises(SystemExit) as e:
        main([a.replace("{model}", str(model_dir)) for a in argv])
    assert e.value.code == 2 and needle in capsys.readouterr().err


def test_file_rows_missing_the_prompt_key_name_the_row(files):
    a, _ = files
    with pytest.raises(ConfigError, match="row 1 has no 'prompt'"):
        datasets_module.load_dataset(f"a={a}", None)
