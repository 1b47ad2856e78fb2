from __future__ import annotations

import dataclasses
import doctest
import json
import random

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from reinforce_ada import cache
from reinforce_ada.errors import ConfigError
from reinforce_ada.models import tiny
from reinforce_ada.models.config import ModelConfig
from reinforce_ada.models.tiny import TinyModelConfig, build_char_tokenizer, build_tiny_llama
from reinforce_ada.tasks.arithmetic import ArithmeticConfig, make_split, max_new_tokens
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.training import warm_start as warm_start_module
from reinforce_ada.training.warm_start import (
    SHIPPED_DIR,
    SFTConfig,
    config_hash,
    exact_level_rates,
    measure_pass_rates,
    resolve_model_path,
    shipped_matches,
    warm_start,
    warm_start_info,
    weights_sha256,
)
from reinforce_ada.types import Prompt

TASK = ArithmeticConfig(levels=((1, 1), (2, 2)), level_weights=(1, 1), train_size=20, eval_size=4)
MODEL = TinyModelConfig(hidden_size=16, num_layers=1, num_heads=1, intermediate_size=32)
SFT = SFTConfig(steps=3, batch_size=8, warmup_steps=1, level_weights=(1, 1), measure_prompts=2, measure_samples=2)


def test_tokenizer_ids_and_no_automatic_specials():
    tok = build_char_tokenizer()
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert tok.padding_side == "left"
    assert len(tok) == 4 + len(tiny.CHARS)
    assert tok.encode("12") == [5, 6]
    assert tok("12")["input_ids"] == [5, 6]
    for ch in tiny.CHARS:
        assert len(tok.encode(ch)) == 1
    assert tok.encode("<bos>9*8-7 =\n<eos>") == [2, 13, 16, 12, 15, 11, 18, 17, 19, 1]
    assert tok.encode("a") == [tok.unk_token_id]


def test_tokenizer_round_trip_and_save_load(tmp_path):
    tok = build_char_tokenizer()
    text = "<bos>12 + 345=\n357<eos>"
    ids = tok.encode(text)
    assert len(ids) == len("12 + 345=\n357") + 2
    assert tok.decode(ids) == text
    assert tok.decode(ids, skip_special_tokens=True) == "12 + 345=\n357"
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.encode(text) == ids
    assert loaded.decode(ids, skip_special_tokens=True) == "12 + 345=\n357"
    assert (loaded.pad_token, loaded.eos_token, loaded.bos_token, loaded.padding_side) == (
        "<pad>",
        "<eos>",
        "<bos>",
        "left",
    )
    batch = loaded(["<bos>1+2=", "<bos>10+20="], padding=True)["input_ids"]
    assert batch[0][:2] == [0, 0] and batch[0][2] == 2


def test_model_builds_seeded_and_forward_works():
    tok = build_char_tokenizer()
    model = build_tiny_llama(TinyModelConfig(), tok)
    assert 100_000 < sum(p.numel() for p in model.parameters()) < 200_000
    assert model.config.tie_word_embeddings and model.config._attn_implementation == "sdpa"
    enc = tok(["<bos>1+2=", "<bos>10+20="], return_tensors="pt", padding=True)
    logits = model(**enc).logits
    assert logits.shape == (2, enc["input_ids"].shape[1], len(tok))
    same = build_tiny_llama(TinyModelConfig(), tok)
    other = build_tiny_llama(TinyModelConfig(init_seed=1), tok)
    w = model.model.layers[0].mlp.up_proj.weight
    assert torch.equal(w, same.model.layers[0].mlp.up_proj.weight)
    assert not torch.equal(w, other.model.layers[0].mlp.up_proj.weight)


def test_bad_model_and_sft_configs_raise():
    with pytest.raises(ValueError, match="hidden_size"):
        TinyModelConfig(hidden_size=65, num_heads=2)
    with pytest.raises(ValueError, match="SFTConfig.steps"):
        SFTConfig(steps=0)
    with pytest.raises(ValueError, match="SFTConfig.level_weights"):
        warm_start(TASK, MODEL, SFTConfig(steps=1), cache_dir=None, progress=False)


class _ScriptedModel:
    """Stands in for `generate`: answers level 1 right, level 2 wrong, level 3 right but without `<eos>`."""

    training = True

    def __init__(self, tok):
        self.tok = tok

    def eval(self):
        self.training = False

    def train(self, mode=True):
        self.training = mode

    def generate(self, input_ids, attention_mask, max_new_tokens, **kwargs):
        rows = []
        for ids in input_ids.tolist():
            a, b = self.tok.decode(ids, skip_special_tokens=True).rstrip("=").split("+")
            level = len(a)
            answer = str(int(a) + int(b) + (level == 2))
            tail = self.tok.encode(answer + ("" if level == 3 else "<eos>"))
            rows.append(ids + (tail + [self.tok.pad_token_id] * max_new_tokens)[:max_new_tokens])
        return torch.tensor(rows)


def test_measure_pass_rates_scores_by_level_and_requires_eos():
    tok = build_char_tokenizer()
    prompts = [Prompt(id=f"p{a}", text=f"<bos>{a}+{a}=", answer=str(2 * a), level=len(str(a))) for a in (3, 4, 12, 345)]
    model = _ScriptedModel(tok)
    assert measure_pass_rates(model, tok, prompts, 3, 5, batch_size=4) == {1: 1.0, 2: 0.0, 3: 0.0}
    assert model.training


def test_measure_pass_rates_runs_generate_on_a_real_model():
    tok = build_char_tokenizer()
    model = build_tiny_llama(MODEL, tok)
    prompts = [
        Prompt(id="a", text="<bos>1+2=", answer="3", level=1),
        Prompt(id="b", text="<bos>10+20=", answer="30", level=2),
    ]
    rates = measure_pass_rates(model, tok, prompts, 4, 3, seed=0)
    assert set(rates) == {1, 2} and all(0.0 <= r <= 1.0 for r in rates.values())
    assert rates == measure_pass_rates(model, tok, prompts, 4, 3, seed=0)


def test_warm_start_writes_a_loadable_folder_then_reuses_it(tmp_path, monkeypatch):
    path = warm_start(TASK, MODEL, SFT, cache_dir=tmp_path, progress=False)
    assert path == tmp_path / config_hash(TASK, MODEL, SFT)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp folder left behind
    info = json.loads((path / "warm_start.json").read_text())
    assert info["steps"] == 3 and set(info["pass_rates"]) == {"1", "2"}
    assert info["sha256"] == weights_sha256(path) and set(info["exact_pass_rates"]) == {"1", "2"}
    assert "cores" in info["built_on"]
    assert info["task"]["levels"] == [[1, 1], [2, 2]] and info["model"]["hidden_size"] == 16
    model = AutoModelForCausalLM.from_pretrained(path)
    tok = AutoTokenizer.from_pretrained(path)
    assert model.config.hidden_size == 16 and tok.encode("<bos>1+1=") == [2, 5, 14, 5, 17]
    assert not torch.equal(
        model.model.layers[0].mlp.up_proj.weight, build_tiny_llama(MODEL, tok).model.layers[0].mlp.up_proj.weight
    )

    mtime = (path / "model.safetensors").stat().st_mtime_ns

    def no_training(*args, **kwargs):
        raise AssertionError("the cached warm start was retrained")

    monkeypatch.setattr(warm_start_module, "_sft", no_training)
    assert warm_start(TASK, MODEL, SFT, cache_dir=tmp_path, progress=False) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == mtime


def test_warm_start_is_deterministic(tmp_path):
    a = warm_start(TASK, MODEL, SFT, cache_dir=tmp_path / "a", progress=False)
    b = warm_start(TASK, MODEL, SFT, cache_dir=tmp_path / "b", progress=False)
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (
        json.loads((a / "warm_start.json").read_text())["pass_rates"]
        == json.loads((b / "warm_start.json").read_text())["pass_rates"]
    )


def test_default_cache_dir_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("REINFORCE_ADA_CACHE", str(tmp_path))
    assert cache.default_cache_dir() == tmp_path
    monkeypatch.delenv("REINFORCE_ADA_CACHE")
    assert cache.default_cache_dir().parts[-2:] == (".cache", "reinforce-ada")


def test_hash_changes_with_every_config():
    base = config_hash(TASK, MODEL, SFT)
    assert config_hash(TASK, MODEL, dataclasses.replace(SFT)) == base
    assert config_hash(dataclasses.replace(TASK, seed=1), MODEL, SFT) != base
    assert config_hash(TASK, dataclasses.replace(MODEL, init_seed=1), SFT) != base
    assert config_hash(TASK, MODEL, dataclasses.replace(SFT, lr=1e-4)) != base
    assert len(base) == 16


def test_doctests():
    assert doctest.testmod(tiny).failed == 0


def test_sft_batch_trains_on_the_answer_and_eos_only_and_skips_held_out():
    tok = build_char_tokenizer()
    held_out = {f"<bos>{a}+{b}=" for a in range(10) for b in range(10) if a != 3}
    ids, labels = warm_start_module._sft_batch(
        tok, TASK, dataclasses.replace(SFT, level_weights=(1, 0)), held_out, random.Random(0)
    )
    assert ids.shape == labels.shape and ids.shape[0] == SFT.batch_size
    for row, lab in zip(ids.tolist(), labels.tolist(), strict=True):
        text = tok.decode(row, skip_special_tokens=True)
        prompt, answer = text.split("=")
        assert prompt.startswith("3+") and str(3 + int(prompt[2:])) == answer
        n = len(prompt) + 2  # <bos> and "="
        assert row[:n] == tok.encode(f"<bos>{prompt}=")
        assert lab[:n] == [-100] * n
        assert lab[n : n + len(answer) + 1] == tok.encode(answer + "<eos>") == row[n : n + len(answer) + 1]
        assert set(lab[n + len(answer) + 1 :]) <= {-100} and set(row[n + len(answer) + 1 :]) <= {tok.pad_token_id}


def test_warm_start_rejects_sequences_longer_than_the_model(tmp_path):
    with pytest.raises(ValueError, match="max_position"):
        warm_start(TASK, dataclasses.replace(MODEL, max_position=8), SFT, cache_dir=tmp_path, progress=False)


def test_the_default_embedded_model_is_the_shipped_warm_start(monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("the shipped warm start was retrained")

    monkeypatch.setattr(warm_start_module, "_sft", no_training)
    assert resolve_model_path(ModelConfig(), TaskConfig(), progress=False) == SHIPPED_DIR
    info = warm_start_info(SHIPPED_DIR)
    assert info["sha256"] == weights_sha256(SHIPPED_DIR)
    assert info["model"] == dataclasses.asdict(TinyModelConfig()) and info["sft"]["steps"] == 2000
    assert (SHIPPED_DIR / "model.safetensors").stat().st_size < 1_000_000
    # any other config is not the shipped one: trained and cached as before
    assert not shipped_matches(TASK, MODEL, SFT)
    assert not shipped_matches(ArithmeticConfig(eval_size=256, seed=0), TinyModelConfig(), SFTConfig(steps=10))


def test_shipped_weights_give_the_recorded_pass_rates_on_this_machine():
    """The cross-machine check: the same weights give the same exact pass rates on any CPU (to float rounding)."""
    info = warm_start_info(SHIPPED_DIR)
    model = AutoModelForCausalLM.from_pretrained(SHIPPED_DIR)
    tok = AutoTokenizer.from_pretrained(SHIPPED_DIR)
    task = ArithmeticConfig(eval_size=256, seed=0)
    rates = exact_level_rates(model, tok, make_split(task)[1], max_new_tokens(task))
    assert {str(k): v for k, v in rates.items()} == pytest.approx(info["exact_pass_rates"], abs=1e-4)
    assert 0.9 < rates[1] and 0.1 < rates[5] < 0.3 and rates[7] < 0.05  # the spread the testbed needs


def test_damaged_shipped_weights_are_refused(tmp_path, monkeypatch):
    copy = tmp_path / "shipped"
    copy.mkdir()
    for f in SHIPPED_DIR.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    info = json.loads((copy / "warm_start.json").read_text())
    monkeypatch.setattr(warm_start_module, "SHIPPED_DIR", copy)
    task = ArithmeticConfig(eval_size=256, seed=0)
    model, sft = TinyModelConfig(), SFTConfig()
    assert shipped_matches(task, model, sft)
    assert warm_start(task, model, sft, cache_dir=tmp_path / "cache", progress=False) == copy
    (copy / "warm_start.json").write_text(json.dumps({**info, "sha256": "0" * 64}))
    with pytest.raises(ConfigError, match="sha256"):
        warm_start(task, model, sft, cache_dir=tmp_path / "cache", progress=False)


def test_warm_start_shows_a_progress_bar(tmp_path, capsys):
    warm_start(TASK, MODEL, SFT, cache_dir=tmp_path, progress=True)
    err = capsys.readouterr().err
    assert "warm start" in err and "3/3" in err and "pass rates" in err
