"""The long-answer task (`tasks.running_sums`), its verifiers, warm start, pools and a short run of it."""

from __future__ import annotations

import dataclasses
import doctest
import json
import math
import random

import numpy as np
import pytest
import torch

from reinforce_ada.bench.testbed import BUILTIN_POOLS, build_pool, parse_pool, pool_max_new_tokens
from reinforce_ada.errors import ConfigError
from reinforce_ada.evaluation.exact import exact_pass_rates
from reinforce_ada.models.tiny import CHARS, LONG_CHARS, build_char_tokenizer
from reinforce_ada.tasks import running_sums as rs
from reinforce_ada.tasks import verifiers
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.tasks.running_sums import RunningSumsConfig, canonical, make_split, verify, verify_strict
from reinforce_ada.training import warm_start as ws
from reinforce_ada.training.warm_tasks import RUNNING_SUMS, default_configs, working_gap
from tests import helpers

SMALL = RunningSumsConfig(levels=((2, 1), (3, 2), (6, 3)), level_weights=(1, 2, 2), train_size=40, eval_size=8)


def test_doctests():
    assert doctest.testmod(rs).failed == 0


def test_split_is_deterministic_and_holds_no_held_out_problem_in_training():
    train, held_out = make_split(SMALL)
    again = make_split(SMALL)
    assert [p.text for p in train] == [p.text for p in again[0]] and held_out == again[1]
    assert not {p.text for p in train} & {p.text for p in held_out}
    assert len({p.text for p in train}) == len(train) == 40
    assert [sum(p.level == lv for p in held_out) for lv in (1, 2, 3)] == [8, 8, 8]
    # the held-out set is drawn first: a bigger or reweighted pool leaves it as it was
    bigger = dataclasses.replace(SMALL, train_size=60, level_weights=(1, 1, 5))
    assert make_split(bigger)[1] == held_out
    assert make_split(dataclasses.replace(SMALL, seed=1))[1] != held_out


def test_the_default_split_and_its_small_level_hold_out_a_quarter():
    train, held_out = make_split(RunningSumsConfig())
    assert sum(p.level == 1 for p in held_out) == 25  # 100 problems of 2 one-digit terms
    assert len(train) == 4096 and not {p.text for p in train} & {p.text for p in held_out}


def test_canonical_answer_format_and_lengths_grow_with_level():
    p = rs.make_prompt([17, 25, 8, 40], 1, "x")
    assert p.text == "<bos>17+25+8+40=" and p.answer == "17+25=42;42+8=50;50+40=90;#90"
    assert p.meta == {"terms": [17, 25, 8, 40], "total": 90}
    _, held_out = make_split(RunningSumsConfig())
    for q in held_out:
        terms = q.meta["terms"]
        assert q.text == "<bos>" + "+".join(map(str, terms)) + "="
        steps = q.answer.split(";")
        assert len(steps) == len(terms) and steps[-1] == f"#{sum(terms)}"
        assert len(q.answer) <= rs.longest_answer(RunningSumsConfig().levels[q.level - 1])
    means = [np.mean([len(q.answer) for q in held_out if q.level == lv]) for lv in range(1, 9)]
    assert all(a < b for a, b in zip(means, means[1:], strict=False)), means
    assert 6 <= means[0] <= 12 and 90 <= means[-1] <= 105
    cfg = RunningSumsConfig()
    assert rs.max_new_tokens(cfg) == math.ceil(1.5 * (102 + 1)) + 8
    assert max(map(rs.longest_prompt, cfg.levels)) + rs.max_new_tokens(cfg) <= RUNNING_SUMS.max_position


@pytest.mark.parametrize(
    "completion, final, strict",
    [
        ("17+25=42;42+8=50;50+40=90;#90", 1.0, 1.0),
        ("17+25=42;42+8=50;50+40=90;#90<eos><pad>", 1.0, 1.0),
        (" 17+25=42;42+8=50;50+40=90;#90 ", 1.0, 1.0),
        ("17+25=41;41+8=50;50+40=90;#90", 1.0, 0.0),  # wrong working, right result: final-only passes it
        ("#90", 1.0, 0.0),
        ("17+25=42;42+8=50;50+40=91;#91", 0.0, 0.0),
        ("17+25=42;42+8=50;50+40=90;90", 0.0, 0.0),  # no '#'
        ("17+25=42;#91;#90", 0.0, 0.0),  # two results: a hedge
        ("17+25=42;42+8=50;50+40=90;#090", 0.0, 0.0),
        ("17+25=42;42+8=50;50+40=90;#9 0", 0.0, 0.0),
        ("#", 0.0, 0.0),
        ("", 0.0, 0.0),
        ("90", 0.0, 0.0),
        ("<eos>17+25=42;42+8=50;50+40=90;#90", 0.0, 0.0),
        ("17+25=42;42+8=50;50+40=90;#90<eos>;#1", 1.0, 1.0),  # after <eos> is not the completion
    ],
)
def test_verifiers_final_result_and_strict(completion, final, strict):
    answer = canonical([17, 25, 8, 40])
    assert verify(completion, answer) == final
    assert verify_strict(completion, answer) == strict
    assert verifiers.get("running_sums")(completion, answer) == final
    assert verifiers.get("running_sums_strict")(completion, answer) == strict


def test_verifier_fit_refuses_answers_without_a_result():
    verifiers.fit("running_sums", "running_sums", [("a", "3+5=8;#8")])
    with pytest.raises(ConfigError, match="no '#' followed by the total"):
        verifiers.fit("running_sums", "file", [("a", "8")])


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(levels=()), "levels must name at least one level"),
        (dict(levels=((1, 2),), level_weights=(1,)), r"levels entries must be \(terms, digits\)"),
        (dict(levels=((2, 9),), level_weights=(1,)), r"1\.\.6 digits, got \(2, 9\)"),
        (dict(level_weights=(1, 1)), "level_weights needs one weight per level"),
        (dict(level_weights=(-1, 1, 1, 1, 1, 1, 1, 1)), "level_weights must be >= 0"),
        (dict(train_size=0), "train_size must be >= 1"),
        (dict(eval_size=-1), "eval_size must be >= 0"),
        (dict(level_weights=(1, 0, 0, 0, 0, 0, 0, 0)), r"level-1 prompts \(2, 1\).*level_weights\[0\]"),
    ],
)
def test_bad_config_names_the_key(kw, msg):
    with pytest.raises(ValueError, match=f"RunningSumsConfig.*{msg}" if "levels entries" not in msg else msg):
        RunningSumsConfig(**kw)


def test_task_table_config_and_max_new_tokens_check():
    from reinforce_ada.tasks import running_sums_config
    from reinforce_ada.training.config import TrainConfig, apply_overrides

    assert running_sums_config(TaskConfig(name="running_sums")).level_weights == RunningSumsConfig().level_weights
    with pytest.raises(ConfigError, match=r"task: RunningSumsConfig.level_weights needs one weight per level \(8\)"):
        running_sums_config(TaskConfig(name="running_sums", level_weights=(1.0, 1.0)))
    with pytest.raises(ConfigError, match="--generation.max_new_tokens 163"):
        apply_overrides(TrainConfig(), {"task": {"name": "running_sums"}}, "test")


def test_tokenizer_adds_the_long_characters_after_the_old_ids():
    old, new = build_char_tokenizer(), build_char_tokenizer(chars=LONG_CHARS)
    assert len(new) == len(old) + 2 and new.encode("<bos>12+3=") == old.encode("<bos>12+3=")
    assert [new.convert_tokens_to_ids(c) for c in ";#"] == [len(old), len(old) + 1]
    assert old.encode(";") == [old.unk_token_id]
    with pytest.raises(ValueError, match="chars must be CHARS"):
        build_char_tokenizer(chars="ab" + CHARS)


def test_pool_specs_and_a_small_long_pool(tmp_path):
    for name in ("long-default", "long-hard", "long-mixed"):
        spec = parse_pool(name)
        assert spec.source == "running_sums" and len(spec.weights) == 8 and BUILTIN_POOLS[name]
    assert parse_pool("long-hard").filter == (0.0, 0.375)
    assert pool_max_new_tokens(parse_pool("long-default")) == 163 and pool_max_new_tokens(parse_pool("default")) == 8
    for bad, msg in (
        ("x=running_sums:size=3", "needs weights"),
        ("x=running_sums:weights=1/x", "weights='1/x' is not valid"),
        ("x=running_sums:weights=1/1,terms=3", "bad option"),
        ("x=sums:weights=1", "NAME=running_sums"),
    ):
        with pytest.raises(ConfigError, match=msg):
            parse_pool(bad)
    tok = build_char_tokenizer(chars=LONG_CHARS)
    model = helpers.tiny_llama(tok, max_position_embeddings=256).eval()
    with pytest.raises(ConfigError, match="level_weights needs one weight per level"):
        build_pool(parse_pool("p=running_sums:weights=1/1,size=10"), model, tok, tmp_path)
    pool = build_pool(parse_pool("p=running_sums:weights=0/1/1/0/0/0/0/1,size=12"), model, tok, tmp_path)
    assert len(pool.train) == 12 and {p.level for p in pool.held_out} == {2, 3, 8}
    row = json.loads(open(pool.train_path).readline())
    assert "#" in row["answer"] and row["prompt"].startswith("<bos>")


def test_exact_pass_rate_is_the_probability_of_the_canonical_string():
    tok = build_char_tokenizer(chars=LONG_CHARS)
    model = helpers.tiny_llama(tok, max_position_embeddings=256).eval()
    prompts = make_split(SMALL)[1][::4]
    rates = exact_pass_rates(model, tok, prompts, max_new_tokens=163)
    for p, rate in zip(prompts, rates, strict=True):
        ids = tok.encode(p.text) + tok.encode(p.answer + "<eos>")
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)
        n = len(tok.encode(p.text))
        want = sum(logp[i - 1, ids[i]].item() for i in range(n, len(ids)))
        assert rate == pytest.approx(math.exp(want), rel=1e-4, abs=1e-300)


def test_the_oracle_takes_running_sums_as_a_lower_bound():
    from reinforce_ada.training import oracle
    from reinforce_ada.training.config import TrainConfig, apply_overrides

    assert "running_sums_strict" in oracle.EXACT_VERIFIERS and "running_sums" in oracle.LOWER_BOUND_VERIFIERS
    prompts = make_split(SMALL)[0]
    for verifier in (None, "running_sums_strict"):
        task = {"name": "running_sums", "verifier": verifier} if verifier else {"name": "running_sums"}
        cfg = apply_overrides(TrainConfig(), {"task": task, "generation": {"max_new_tokens": 163}}, "test")
        oracle.check_oracle_task(cfg, prompts)  # accepted: no error
    cfg = apply_overrides(
        TrainConfig(),
        {"task": {"name": "running_sums", "verifier": "numeric"}, "generation": {"max_new_tokens": 163}},
        "t",
    )
    with pytest.raises(ConfigError, match="not exact-match"):
        oracle.check_oracle_task(cfg, prompts)


def test_working_gap_counts_final_correct_samples_with_other_working():
    p = rs.make_prompt([17, 25, 8, 40], 4, "x")
    rows = [(p, p.answer), (p, "17+25=41;41+8=50;50+40=90;#90"), (p, "#91"), (p, None)]
    gap = working_gap(rows)
    assert (gap["final_correct"], gap["final_correct_wrong_working"], gap["share"]) == (2, 1, 0.5)
    assert gap["share_by_level"] == {"4": 0.5}


def test_sft_batch_of_running_sums_and_its_bucketed_loss_equal_the_plain_one():
    task, model_cfg, sft = default_configs("running_sums")
    sft = dataclasses.replace(sft, batch_size=16)
    tok = build_char_tokenizer(chars=LONG_CHARS, max_length=256)
    held = {p.text for p in make_split(task)[1]}
    ids, labels = ws._sft_batch(tok, task, sft, held, random.Random(0))
    for row, lab in zip(ids.tolist(), labels.tolist(), strict=True):
        text = tok.decode(row, skip_special_tokens=True)
        prompt, _, answer = text.partition("=")
        terms = [int(t) for t in prompt.split("+")]
        assert (answer == canonical(terms) or _repeats_of(terms, answer)) and f"<bos>{prompt}=" not in held
        n = len(prompt) + 2
        assert lab[:n] == [-100] * n and lab[n : n + len(answer) + 1] == tok.encode(answer + "<eos>")
    model = helpers.tiny_llama(tok, max_position_embeddings=256)
    assert ws.sft_loss(model, ids, labels, 4).item() == pytest.approx(ws.sft_loss(model, ids, labels).item(), 1e-5)


def _repeats_of(terms: list[int], answer: str) -> bool:
    """Whether `answer` is `terms`' working that goes on adding the last term after the last step."""
    return any(answer == canonical([*terms, *[terms[-1]] * extra]) for extra in range(1, 40))


def test_with_repeats_writes_consistent_longer_working_and_keeps_to_its_limit():
    rng = random.Random(3)
    terms = [512, 730, 99, 880, 123]
    seen = 0
    for _ in range(400):
        answer = rs.with_repeats(terms, rng, 0.3, 0.8, 90)
        assert len(answer) + 1 <= 90
        if answer != canonical(terms):
            seen += 1
            assert _repeats_of(terms, answer) and verify(answer, canonical(terms)) == 0.0
    assert 100 < seen < 400
    assert rs.with_repeats(terms, random.Random(0), 0.0, 0.9, 10) == canonical(terms)  # the limit never cuts terms
    assert rs.with_repeats([17, 25], random.Random(0), 0.9, 0.9, 99) == canonical([17, 25])  # two terms: never


def test_sft_repeats_are_for_running_sums_only_and_keep_older_records():
    from reinforce_ada.tasks.arithmetic import ArithmeticConfig
    from reinforce_ada.training.warm_tasks import ARITHMETIC, SFTConfig

    with pytest.raises(ValueError, match="repeat_rate must be in"):
        SFTConfig(repeat_rate=1.0)
    with pytest.raises(ValueError, match="repeat_again must be in"):
        SFTConfig(repeat_again=-0.1)
    with pytest.raises(ValueError, match="running sums only"):
        ARITHMETIC.draw(ArithmeticConfig(), SFTConfig(repeat_rate=0.1), 3, random.Random(0))
    described = ws._describe(ArithmeticConfig(), ws.TinyModelConfig(), SFTConfig())["sft"]
    assert "repeat_rate" not in described  # arithmetic's shipped record and hash stay as they were
    assert ws.shipped_matches(ArithmeticConfig(), ws.TinyModelConfig(), SFTConfig())
    task, _, sft = default_configs("running_sums")
    assert (
        sft.repeat_rate > 0 and ws._describe(task, ws.TinyModelConfig(), sft)["sft"]["repeat_rate"] == sft.repeat_rate
    )


def test_lengths_compare_right_and_wrong_answers_to_the_canonical_one():
    from reinforce_ada.training.warm_tasks import lengths

    p = rs.make_prompt([17, 25, 8, 40], 4, "x")  # canonical: 29 characters + <eos>
    long_wrong = rs.with_repeats([17, 25, 8, 40], random.Random(0), 0.99, 0.0, 99)
    rows = [(p, p.answer), (p, "17+25=42;42+8=51;51+40=91;#91"), (p, long_wrong), (p, None)]
    out = lengths(rows, 60)
    assert out["right"] == {"samples": 1, "mean_over_canonical": 1.0, "share_over_1.2x": 0.0, "share_cut": 0.0}
    wrong = out["wrong"]
    assert wrong["samples"] == 3 and wrong["share_cut"] == pytest.approx(1 / 3)
    assert wrong["share_over_1.2x"] == pytest.approx(2 / 3)
    assert wrong["mean_over_canonical"] == pytest.approx((1 + (len(long_wrong) + 1) / 30 + 60 / 30) / 3)
    assert lengths([], 60)["wrong"]["mean_over_canonical"] is None


def test_the_shipped_folder_loads_and_matches_its_record():
    folder = RUNNING_SUMS.shipped_dir
    info = ws.warm_start_info(folder)
    assert info["task_name"] == "running_sums" and ws.weights_sha256(folder) == info["sha256"]
    assert ws.shipped_matches(*default_configs("running_sums"))
    assert sum(f.stat().st_size for f in folder.iterdir()) < 2_000_000
    from reinforce_ada.models.config import ModelConfig

    path = ws.resolve_model_path(ModelConfig(), TaskConfig(name="running_sums"), progress=False)
    assert path == folder
    assert ws.resolve_model_path(ModelConfig(), TaskConfig(), progress=False) == ws.SHIPPED_DIR
    for key in ("exact_pass_rates", "exact_spread", "working_gap", "lengths"):
        assert info[key]


def test_a_task_the_embedded_model_cannot_do_names_the_folders_that_work():
    from reinforce_ada.models.config import ModelConfig

    with pytest.raises(ConfigError, match="tiny-running-sums"):
        ws.resolve_model_path(ModelConfig(), TaskConfig(name="gsm_symbolic"), progress=False)


@pytest.mark.slow
def test_two_steps_of_the_embedded_model_on_running_sums_through_the_cli(tmp_path):
    from reinforce_ada.cli import main

    run = tmp_path / "run"
    argv = ["train", "--task.name", "running_sums", "--steps", "2", "--run-dir", str(run), "--model.threads", "1"]
    argv += [
        "--generation.max_new_tokens",
        "163",
        "--run.batch_size",
        "2",
        "--eval-every",
        "0",
        "--run.eval_samples",
        "1",
    ]
    argv += ["--task.train_size", "64", "--task.level_weights", "1,1,1,1,1,1,1,1", "--run.progress", "false"]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["step"] == 2
    import tomllib

    assert tomllib.loads((run / "config.toml").read_text())["task"]["name"] == "running_sums"
    assert any(r.get("max_completion_tokens", 0) > 8 for r in rows)  # long answers were sampled


def test_a_comparison_takes_long_pools_alone():
    from reinforce_ada.bench.testbed import pools_task

    assert pools_task(["long-default", "long-hard"]) == "running_sums"
    assert pools_task(["default", "x=file:path=a.jsonl"]) == "arithmetic"
    with pytest.raises(ConfigError, match="mix long-answer"):
        pools_task(["default", "long-default"])
