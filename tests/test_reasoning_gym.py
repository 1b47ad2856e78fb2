"""The reasoning-gym task family (`tasks.reasoning`): per dataset, the verifier on known right and wrong answers and
levels that follow the difficulty knob; seeded held-out splits; train, eval and the errors. Skipped without the
`reasoning` extra, except the tests of that error itself."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.models.tiny import CHARS, TinyModelConfig
from reinforce_ada.tasks import build, verifiers
from reinforce_ada.tasks.reasoning import FAMILY, PREFIX, final_answer, make_split, read_envelope
from reinforce_ada.tasks.reasoning_pool import BOS, LEVELS, write_pool
from reinforce_ada.tasks.reasoning_pool import make_split as pool_split
from reinforce_ada.tasks.registry import TASKS, benchmark_names, trainable_names
from reinforce_ada.training.config import TaskConfig

needs_rg = pytest.mark.skipif(
    __import__("importlib").util.find_spec("reasoning_gym") is None, reason="the reasoning extra is not installed"
)

KNOB = {
    "leg_counting": ("num_animals", "max_animals"),
    "letter_counting": ("span_length", "max_words"),
    "number_sorting": ("numbers", "max_numbers"),
    "spell_backward": ("word_len", "max_word_len"),
    "family_relationships": ("family_size", "max_family_size"),
}
"""dataset -> (the entry's metadata field that states the knob, the level config field that sets it)."""


def wrong(dataset: str, gold: str) -> list[str]:
    """Answers that must score below the threshold: off by one, another order, another word."""
    if dataset == "number_sorting":
        nums = json.loads(gold.replace("'", '"'))
        return [str(list(reversed(nums))), str(nums[:-1]), "[]"]
    if dataset in ("spell_backward", "family_relationships"):
        return ["zzzz", "q" * len(gold), "q" + gold]
    return [str(int(gold) + 1), "-1", gold + "0"]


def right(dataset: str, gold: str) -> list[str]:
    """The gold in the forms a model writes it: bare, in reasoning-gym's tags, boxed, in a sentence."""
    forms = [gold, f"Let me think.\n<answer>{gold}</answer>", f"So the answer is \\boxed{{{gold}}}."]
    if dataset == "number_sorting":
        return [*forms, f"Sorted: {gold}"]
    if dataset in ("spell_backward", "family_relationships"):
        return [*forms, f"The answer: {gold}.\nI hope this helps."]
    return [*forms, f"In total there are {gold}."]


def test_every_member_is_in_the_one_table():
    names = [PREFIX + n for n in FAMILY] + [PREFIX + "mix"]
    assert all(n in trainable_names() and n in benchmark_names() for n in names)
    assert all(TASKS[n].verifier == "reasoning_gym" for n in names)
    assert set(KNOB) == set(FAMILY)


@needs_rg
@pytest.mark.parametrize("dataset", sorted(FAMILY))
def test_verifier_scores_known_right_and_wrong_answers(dataset):
    _, held_out = make_split(dataset, train_size=0, eval_size=3, seed=0)
    assert len(held_out) == 3 * len(FAMILY[dataset].levels)
    for p in held_out:
        gold = read_envelope(p.answer)["answer"]
        for text in right(dataset, gold):
            assert verifiers.VERIFIERS["reasoning_gym"](text, p.answer) == 1.0, (p.id, text)
        for text in wrong(dataset, gold):
            if text != gold:
                assert verifiers.VERIFIERS["reasoning_gym"](text, p.answer) < 0.5, (p.id, text)
        assert verifiers.VERIFIERS["reasoning_gym"]("", p.answer) == 0.0
        if dataset == "spell_backward":  # the package's per-letter credit is kept: 0 < score < 1 for a near miss
            assert 0 < verifiers.VERIFIERS["reasoning_gym"](gold[:-1] + "#", p.answer) < 1


@needs_rg
@pytest.mark.parametrize("dataset", sorted(FAMILY))
def test_levels_follow_the_difficulty_knob(dataset):
    from reinforce_ada.tasks.reasoning import entry

    meta_key, cfg_key = KNOB[dataset]
    _, held_out = make_split(dataset, train_size=0, eval_size=8, seed=1)
    by_level: dict[int, set] = {}
    for p in held_out:
        env = read_envelope(p.answer)
        value = entry(dataset, env["level"], env["seed"], env["index"])["metadata"][meta_key]
        by_level.setdefault(p.level, set()).add(value)
    levels = FAMILY[dataset].levels
    assert sorted(by_level) == list(range(1, len(levels) + 1))
    for k, values in by_level.items():
        assert values == {levels[k - 1][cfg_key]}, (k, values)  # each level is its knob's value, nothing else
    knob = [levels[k][cfg_key] for k in range(len(levels))]
    assert knob == sorted(set(knob))  # strictly up with the level


@needs_rg
def test_splits_are_seeded_disjoint_and_by_level():
    train, held_out = make_split("letter_counting", train_size=200, eval_size=10, seed=3)
    again = make_split("letter_counting", train_size=200, eval_size=10, seed=3)
    other = make_split("letter_counting", train_size=200, eval_size=10, seed=4)
    assert [p.id for p in train] == [p.id for p in again[0]] and [p.text for p in held_out] == [
        p.text for p in again[1]
    ]
    assert {p.text for p in held_out} != {p.text for p in other[1]}
    assert not {p.text for p in train} & {p.text for p in held_out}  # nothing held out is trained on
    assert len({p.text for p in train}) == len(train) == 200
    assert sorted({p.level for p in train}) == [1, 2, 3, 4, 5]
    # the held-out split does not move with the training pool's size
    assert [p.text for p in make_split("letter_counting", train_size=50, eval_size=10, seed=3)[1]] == [
        p.text for p in held_out
    ]


@needs_rg
def test_level_weights_pick_levels_and_a_wrong_count_names_the_field():
    cfg = TaskConfig(name=PREFIX + "spell_backward", train_size=40, eval_size=2, level_weights=(0, 0, 1, 1, 0))
    train, held_out, _ = build(cfg)
    assert {p.level for p in train} == {3, 4} and {p.level for p in held_out} == {1, 2, 3, 4, 5}
    with pytest.raises(ConfigError, match=r"task.level_weights=\[1, 1\].*5 weights"):
        build(dataclasses.replace(cfg, level_weights=(1, 1)))


@needs_rg
def test_mix_holds_every_dataset_and_build_wires_the_verifier():
    train, held_out, verifier = build(TaskConfig(name=PREFIX + "mix", train_size=100, eval_size=10))
    assert {p.meta["dataset"] for p in train} == set(FAMILY) == {p.meta["dataset"] for p in held_out}
    assert len(held_out) == 10 * 5  # eval_size per level in all, shared between the datasets
    p = held_out[0]
    assert verifier(read_envelope(p.answer)["answer"], p.answer) == 1.0


@needs_rg
def test_eval_dataset_by_name_whatever_the_runs_task():
    from reinforce_ada.evaluation.datasets import load_dataset

    ds = load_dataset(PREFIX + "family_relationships", TaskConfig(eval_size=4), limit=7)
    assert ds.verifier == "reasoning_gym" and len(ds.prompts) == 7
    assert {p.level for p in ds.prompts} <= {1, 2, 3, 4, 5}


@needs_rg
def test_an_answer_not_from_this_generator_is_an_error_not_a_score():
    _, held_out = make_split("leg_counting", train_size=0, eval_size=1, seed=0)
    env = read_envelope(held_out[0].answer)
    forged = json.dumps({**env, "answer": str(int(env["answer"]) + 1)})
    with pytest.raises(ValueError, match="regenerates with gold"):
        verifiers.VERIFIERS["reasoning_gym"](env["answer"], forged)
    with pytest.raises(ValueError, match="not a reasoning-gym answer"):
        verifiers.VERIFIERS["reasoning_gym"]("12", "12")
    with pytest.raises(ConfigError, match="cannot be scored by verifier 'exact'.*envelope"):
        verifiers.fit("exact", PREFIX + "leg_counting", [(held_out[0].id, held_out[0].answer)])
    with pytest.raises(ConfigError, match="cannot be scored by verifier 'reasoning_gym'"):
        verifiers.fit("reasoning_gym", "arithmetic", [("p1", "12")])


def test_final_answer_reads_one_answer():
    assert final_answer("<answer>1</answer> or <answer>2</answer>", "number") == "2"
    assert final_answer("3 dogs and 4 cats: 28", "number") == "28"
    assert final_answer("no list here", "list") is None
    assert final_answer("\n\n  'mother'\nbut maybe father", "word") == "mother"


def test_a_missing_extra_names_the_install(monkeypatch):
    from reinforce_ada.tasks import reasoning

    monkeypatch.setitem(sys.modules, "reasoning_gym", None)  # import fails as if not installed
    reasoning._generator.cache_clear()
    reasoning.entry.cache_clear()
    with pytest.raises(ConfigError, match=r"pip install 'reinforce-ada\[reasoning\]'"):
        build(TaskConfig(name=PREFIX + "letter_counting", train_size=10, eval_size=1))
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "reasoning_gym" else object())
    with pytest.raises(ConfigError, match=r"reasoning_gym.*pip install 'reinforce-ada\[reasoning\]'"):
        verifiers.get("reasoning_gym")


@needs_rg
@pytest.mark.filterwarnings("ignore:.*distinct train questions")
def test_train_and_eval_from_the_command_line_with_the_level_report(model_dir, tmp_path, capsys):
    """`train --task.name reasoning_gym:<dataset> --model.path <model>` then `eval --dataset` on its checkpoint; the
    test model has 128 positions, which spell_backward's questions fit."""
    from reinforce_ada.cli import main
    from reinforce_ada.training.tracking import read_metrics

    run = tmp_path / "run"
    args = ["train", "--task.name", PREFIX + "spell_backward", "--model.path", str(model_dir), "--steps", "2"]
    args += ["--batch-size", "2", "--task.train_size", "20", "--task.eval_size", "2"]
    args += ["--generation.max_new_tokens", "6"]
    args += ["--strategy", "uniform", "--n", "2", "--run-dir", str(run), "--run.progress", "false"]
    args += ["--model.threads", "1", "--run.report_to", "none"]
    assert main(args) == 0
    rows = read_metrics(run)
    assert {f"eval_accuracy_L{k}" for k in range(1, 6)} <= set(rows[0]) and rows[-1]["step"] == 2
    assert "per level: L1" in capsys.readouterr().out
    out = tmp_path / "eval.json"
    eval_args = ["eval", "--checkpoint", str(run), "--dataset", PREFIX + "spell_backward", "--samples", "1"]
    assert main([*eval_args, "--limit", "5", "--max-new-tokens", "6", "--threads", "1", "--out", str(out)]) == 0
    res = json.loads(out.read_text())["datasets"][PREFIX + "spell_backward"]
    assert res["eval_prompts"] == 5 and res["eval_verifier_errors"] == 0


@needs_rg
def test_a_dataset_joins_the_family_with_one_line():
    from reinforce_ada.tasks.reasoning import Family
    from reinforce_ada.tasks.registry import register_reasoning_dataset

    levels = tuple(dict(min_n=1, max_n=10**k) for k in (1, 2, 3, 4, 6))
    try:
        register_reasoning_dataset("count_bits", Family("1 bits of a number", "max_n", levels))
        train, held_out, verifier = build(TaskConfig(name=PREFIX + "count_bits", train_size=20, eval_size=2))
        assert len(held_out) == 10 and PREFIX + "count_bits" in trainable_names()
        gold = read_envelope(held_out[-1].answer)["answer"]
        assert verifier(f"<answer>{gold}</answer>", held_out[-1].answer) == 1.0
        with pytest.raises(ConfigError, match="already in the family"):
            register_reasoning_dataset("count_bits", Family("other", "max_n", levels))
    finally:
        FAMILY.pop("count_bits", None)
        TASKS.pop(PREFIX + "count_bits", None)


# --- (was tests/test_reasoning_pool.py) -------------------------------------------------------------------------------
# The compact reasoning-gym pool (`tasks.reasoning_pool`): prompts in the tiny model's alphabet, exact answers,
# levels by generator and knob, and a file pool that `compare --pool` builds (with the paper's filter).


@needs_rg
def test_every_prompt_is_readable_by_the_tiny_model_and_its_answer_is_exact():
    train, held_out = pool_split(train_size=140, eval_size=5, seed=0)
    assert len(held_out) == 5 * len(LEVELS) and {p.level for p in train} == set(range(1, len(LEVELS) + 1))
    for p in train + held_out:
        expr = p.text.removeprefix(BOS).removesuffix("=")
        assert set(expr) <= set(CHARS) and len(p.text) + 8 <= TinyModelConfig().max_position, p.text
        assert int(p.answer) == eval(expr), p  # digits and + - * only: the gold is the expression's value
    assert not {p.text for p in train} & {p.text for p in held_out}
    by_level = {p.level: p.meta["dataset"] for p in held_out}
    assert by_level == {k + 1: name for k, (name, _) in enumerate(LEVELS)}


@needs_rg
def test_weights_leave_levels_out_and_a_bad_count_is_an_error():
    from reinforce_ada.errors import ConfigError

    train, held_out = pool_split((0, 1, 0, 0, 0, 0, 1), train_size=20, eval_size=2, seed=1)
    assert {p.level for p in train} == {p.level for p in held_out} == {2, 7}
    with pytest.raises(ConfigError, match="needs 7 weights"):
        pool_split((1, 1), train_size=4)


@needs_rg
def test_written_pool_is_a_compare_file_pool_with_the_paper_filter(tmp_path):
    from reinforce_ada.bench.testbed import build_pool, parse_pool
    from reinforce_ada.models.config import ModelConfig
    from reinforce_ada.models.load import load_policy
    from reinforce_ada.training.warm_start import SHIPPED_DIR

    train, held_out = write_pool(tmp_path / "rg", train_size=140, eval_size=10, seed=0)
    spec = parse_pool(f"general=file:path={train},eval={held_out},size=140,filter=0-0.375,filter_samples=0")
    model, tok = load_policy(SHIPPED_DIR, ModelConfig(threads=1))
    pool = build_pool(spec, model, tok, tmp_path / "out")
    assert 0 < len(pool.train) < 140 and all(0 < r <= 0.375 for r in pool.train_rates)
    assert pool.level_weights is not None and pool.stats["prompts"] == len(pool.train)


@needs_rg
def test_compare_names_the_pool_by_source_with_the_same_prompts_as_the_file(tmp_path):
    """`NAME=reasoning_gym:...` draws `make_split`'s prompts itself (no file to write first); a bad option is named."""
    from reinforce_ada.bench.testbed import _draw, parse_pool
    from reinforce_ada.errors import ConfigError

    spec = parse_pool("general=reasoning_gym:weights=1/1/0/0/0/0/1,size=30,seed=2")
    train, held_out = _draw(spec)
    want_train, want_held_out = pool_split((1, 1, 0, 0, 0, 0, 1), train_size=30, eval_size=256, seed=2)
    assert [p.text for p in train] == [p.text for p in want_train] and len(held_out) == len(want_held_out)
    filtered = parse_pool("general=reasoning_gym:filter=0-0.375,size=10")
    assert filtered.weights is None and len(_draw(filtered)[0]) == 40  # 4 x size candidates before the filter
    with pytest.raises(ConfigError, match="NAME=reasoning_gym"):
        parse_pool("general=reasoning-gym:size=10")
    with pytest.raises(ConfigError, match="needs 7 weights"):
        _draw(parse_pool("general=reasoning_gym:weights=1/1"))
