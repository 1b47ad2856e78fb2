"""The compact reasoning-gym pool (`tasks.reasoning_pool`): prompts in the tiny model's alphabet, exact answers,
levels by generator and knob, and a file pool that `compare --pool` builds (with the paper's filter)."""

from __future__ import annotations

import importlib.util

import pytest

from reinforce_ada.models.tiny import CHARS, TinyModelConfig
from reinforce_ada.tasks.reasoning_pool import BOS, LEVELS, make_split, write_pool

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("reasoning_gym") is None, reason="the reasoning extra is not installed"
)


def test_every_prompt_is_readable_by_the_tiny_model_and_its_answer_is_exact():
    train, held_out = make_split(train_size=140, eval_size=5, seed=0)
    assert len(held_out) == 5 * len(LEVELS) and {p.level for p in train} == set(range(1, len(LEVELS) + 1))
    for p in train + held_out:
        expr = p.text.removeprefix(BOS).removesuffix("=")
        assert set(expr) <= set(CHARS) and len(p.text) + 8 <= TinyModelConfig().max_position, p.text
        assert int(p.answer) == eval(expr), p  # digits and + - * only: the gold is the expression's value
    assert not {p.text for p in train} & {p.text for p in held_out}
    by_level = {p.level: p.meta["dataset"] for p in held_out}
    assert by_level == {k + 1: name for k, (name, _) in enumerate(LEVELS)}


def test_weights_leave_levels_out_and_a_bad_count_is_an_error():
    from reinforce_ada.errors import ConfigError

    train, held_out = make_split((0, 1, 0, 0, 0, 0, 1), train_size=20, eval_size=2, seed=1)
    assert {p.level for p in train} == {p.level for p in held_out} == {2, 7}
    with pytest.raises(ConfigError, match="needs 7 weights"):
        make_split((1, 1), train_size=4)


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


def test_compare_names_the_pool_by_source_with_the_same_prompts_as_the_file(tmp_path):
    """`NAME=reasoning_gym:...` draws `make_split`'s prompts itself (no file to write first); a bad option is named."""
    from reinforce_ada.bench.testbed import _draw, parse_pool
    from reinforce_ada.errors import ConfigError

    spec = parse_pool("general=reasoning_gym:weights=1/1/0/0/0/0/1,size=30,seed=2")
    train, held_out = _draw(spec)
    want_train, want_held_out = make_split((1, 1, 0, 0, 0, 0, 1), train_size=30, eval_size=256, seed=2)
    assert [p.text for p in train] == [p.text for p in want_train] and len(held_out) == len(want_held_out)
    filtered = parse_pool("general=reasoning_gym:filter=0-0.375,size=10")
    assert filtered.weights is None and len(_draw(filtered)[0]) == 40  # 4 x size candidates before the filter
    with pytest.raises(ConfigError, match="NAME=reasoning_gym"):
        parse_pool("general=reasoning-gym:size=10")
    with pytest.raises(ConfigError, match="needs 7 weights"):
        _draw(parse_pool("general=reasoning_gym:weights=1/1"))
