"""A prompt file's `features` column (tasks.files rule 8) and `reinforce-ada features`, which writes one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reinforce_ada.cli import main
from reinforce_ada.errors import ConfigError
from reinforce_ada.models.features import first_token_confidence, prompt_features, prompt_hidden_states, standardise
from reinforce_ada.sampling.memory import DifficultyPredictor
from reinforce_ada.tasks import build
from reinforce_ada.tasks.config import TaskConfig
from reinforce_ada.tasks.files import load_prompts
from reinforce_ada.types import Prompt


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_features_become_meta_and_rows_without_them_have_none(tmp_path):
    f = _jsonl(
        tmp_path / "p.jsonl",
        [
            {"prompt": "1+1=", "answer": "2", "features": [0.5, -1, 2]},
            {"prompt": "2+2=", "answer": "4"},
            {"prompt": "3+3=", "answer": "6", "features": [0, 0, 1e-3]},
        ],
    )
    ps = load_prompts(f)
    assert ps[0].meta["features"] == [0.5, -1.0, 2.0]
    assert "features" not in ps[1].meta
    assert ps[2].meta["features"] == [0.0, 0.0, 1e-3]
    assert all("features" not in p.meta for p in load_prompts(f, features_key=None))
    # the predictor reads them: a prompt with features moves the dense weights, one without does not
    pred = DifficultyPredictor(dim=16)
    pred.update(ps[0], 4, 4)
    assert pred.w_dense is not None and np.any(pred.w_dense != 0)


def test_csv_features_are_a_json_array(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text('prompt,answer,features\n1+1=,2,"[1, 2]"\n2+2=,4,\n')
    ps = load_prompts(f)
    assert ps[0].meta["features"] == [1.0, 2.0] and "features" not in ps[1].meta


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("not json", "a JSON array"),
        ([], "non-empty list"),
        ({"a": 1}, "non-empty list"),
        ([1, "x"], r"features\[1\] = 'x'"),
        ([1, True], r"features\[1\] = True"),
        ("[1, NaN]", r"features\[1\] = nan"),
        ([1, 10**400], r"features\[1\] = 1000"),
    ],
)
def test_bad_features_name_the_row_and_column(tmp_path, value, match):
    f = _jsonl(tmp_path / "p.jsonl", [{"prompt": "1+1=", "answer": "2", "features": value}])
    with pytest.raises(ConfigError, match=rf"row 1, column 'features'.*{match}"):
        load_prompts(f)


def test_features_of_other_lengths_are_an_error_naming_both_rows(tmp_path):
    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1), "features": [1.0] * (2 if i < 2 else 3)} for i in range(3)]
    with pytest.raises(ConfigError, match=r"row 3, column 'features': 3 values, but row 1 has 2"):
        load_prompts(_jsonl(tmp_path / "p.jsonl", rows))


@pytest.mark.filterwarnings("ignore:task.eval_path is unset")
def test_the_file_task_reads_its_features_key(tmp_path):
    rows = [{"prompt": f"{i}+1=", "answer": str(i + 1), "emb": [float(i), 1.0]} for i in range(8)]
    f = _jsonl(tmp_path / "p.jsonl", rows)
    train, held, _ = build(TaskConfig(name="file", path=str(f), features_key="emb", eval_size=2))
    assert all(len(p.meta["features"]) == 2 for p in [*train, *held])
    train, _, _ = build(TaskConfig(name="file", path=str(f), features_key="", eval_size=2))
    assert all("features" not in p.meta for p in train)


def test_cli_features_writes_rows_a_file_task_trains_on(model_dir, tmp_path, capsys):
    src = _jsonl(tmp_path / "q.jsonl", [{"q": f"{i}+{i}=", "a": str(2 * i), "level": 1} for i in range(6)])
    out = tmp_path / "f.jsonl"
    argv = ["features", "--model", str(model_dir), "--dataset", str(src), "--prompt-key", "q", "--answer-key", "a"]
    assert main([*argv, "--kind", "both", "--out", str(out), "--threads", "1"]) == 0
    assert "6 rows with a" in capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["q"] for r in rows] == [f"{i}+{i}=" for i in range(6)]  # the file's own rows, in order
    x = np.array([r["features"] for r in rows])
    hidden = json.loads((model_dir / "config.json").read_text())["hidden_size"]
    assert x.shape == (6, hidden + 2)
    assert np.allclose(x.mean(axis=0), 0.0, atol=1e-5)  # standardised over the file
    ps = load_prompts(out, prompt_key="q", answer_key="a")
    assert len(ps[0].meta["features"]) == hidden + 2
    # a features column already in the input is replaced, even a malformed one
    bad = _jsonl(tmp_path / "bad.jsonl", [{"prompt": "1+1=", "answer": "2", "features": "oops"}])
    again = tmp_path / "again.jsonl"
    assert main(["features", "--model", str(model_dir), "--dataset", str(bad), "--out", str(again)]) == 0
    assert len(json.loads(again.read_text())["features"]) == hidden
    raw = tmp_path / "raw.jsonl"
    assert main([*argv, "--kind", "confidence", "--no-standardise", "--out", str(raw), "--threads", "1"]) == 0
    conf = np.array([json.loads(line)["features"] for line in raw.read_text().splitlines()])
    assert conf.shape == (6, 2) and np.all(conf[:, 0] >= 0) and np.all(conf[:, 1] <= 0)  # entropy, top log-prob


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--temperature", "0", "--kind", "confidence"], "temperature must be a finite number > 0"),
        (["--temperature", "inf", "--kind", "confidence"], "temperature must be a finite number > 0"),
        (["--device", "tpu"], "--device 'tpu' is not a device"),
        (["--dataset", "nope"], "unknown dataset 'nope'"),
        (["--dataset", "arithmetic"], "a built-in benchmark is a held-out split"),
    ],
)
def test_cli_features_bad_input_exits_2(model_dir, tmp_path, capsys, extra, needle):
    src = _jsonl(tmp_path / "q.jsonl", [{"prompt": "1+1=", "answer": "2"}])
    argv = ["features", "--model", str(model_dir), "--dataset", str(src), "--out", str(tmp_path / "o.jsonl")]
    with pytest.raises(SystemExit) as e:
        main([*argv, *extra])
    assert e.value.code == 2 and needle in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_a_prompt_longer_than_the_models_context_is_refused_before_the_first_forward(model_dir, tmp_path, capsys):
    """Issue 40: a 30,000-character prompt ended in a MemoryError after minutes; now one line names it up front."""
    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "1+" * 15_000 + "1=", "answer": "x", "id": "long"}]
    src = _jsonl(tmp_path / "q.jsonl", rows)
    argv = ["features", "--model", str(model_dir), "--dataset", str(src), "--out", str(tmp_path / "o.jsonl")]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert (
        e.value.code == 2 and "prompt 'long' has 30002 tokens; the model reads at most 128" in capsys.readouterr().err
    )


def test_attention_memory_is_checked_per_batch(monkeypatch):
    from types import SimpleNamespace

    from reinforce_ada.models import features
    from reinforce_ada.types import Prompt

    model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=None, num_attention_heads=4))
    monkeypatch.setattr(features, "usable_memory", lambda: 2**30)
    prompts = [Prompt(id=str(i), text="x", answer="1") for i in range(8)]
    ids = [[1] * 10_000] * 8  # 4 heads x 10^8 scores x 4 bytes = 1.6 GB per row
    with pytest.raises(ConfigError, match=r"prompt '0' has 10000 tokens: a batch of 8 needs about 11.9 GiB.*shorten"):
        features.check_lengths(model, prompts, ids, batch_size=8)
    features.check_lengths(model, prompts, [[1] * 1000] * 8, batch_size=8)  # 128 MB a batch: fine


def test_a_resume_whose_features_changed_width_is_refused_at_resume(tmp_path):
    """Issue 40: a run resumed after its features file was rewritten with another width loaded, then failed in the
    middle of the next step; the checkpoint is now refused at resume (and an older one tried), naming the widths."""
    from types import SimpleNamespace

    from reinforce_ada.training.checkpoint import CheckpointError
    from reinforce_ada.training.resume import check_feature_width
    from reinforce_ada.types import Prompt

    predictor = DifficultyPredictor(dim=8)
    predictor.update(Prompt("a", "1+1=", "2", meta={"features": [0.1, 0.2, 0.3]}), 1, 2)
    strategy = SimpleNamespace(memory=SimpleNamespace(predictor=predictor))
    same = [Prompt("a", "1+1=", "2", meta={"features": [0.0, 1.0, 2.0]})]
    check_feature_width(strategy, same, tmp_path)
    wider = [Prompt("b", "2+2=", "4"), Prompt("a", "1+1=", "2", meta={"features": [0.0] * 5})]
    with pytest.raises(
        CheckpointError, match=r"learned 3 feature weights, but the task's prompts now have features of 5"
    ):
        check_feature_width(strategy, wider, tmp_path)
    with pytest.raises(CheckpointError, match="now have no features"):
        check_feature_width(strategy, [Prompt("b", "2+2=", "4")], tmp_path)
    check_feature_width(SimpleNamespace(memory=SimpleNamespace(predictor=DifficultyPredictor())), wider, tmp_path)


# -- prompt features --------------------------------------------------------------------------------------------------
# The policy's view of a prompt (models.features): hidden states, first-token confidence, standardising.
def test_hidden_states_do_not_depend_on_batch_padding(tiny_llama, char_tokenizer):
    short, long = Prompt(id="a", text="1+2="), Prompt(id="b", text="123+456=")
    alone = prompt_hidden_states(tiny_llama, char_tokenizer, [short])
    both = prompt_hidden_states(tiny_llama, char_tokenizer, [short, long], batch_size=2)
    split = prompt_hidden_states(tiny_llama, char_tokenizer, [short, long], batch_size=1)
    assert both.shape == (2, tiny_llama.config.hidden_size)
    assert np.allclose(alone[0], both[0], atol=1e-5)
    assert np.allclose(both, split, atol=1e-5)
    assert not np.allclose(both[0], both[1])
    was = tiny_llama.training
    try:
        for mode in (True, False):  # the model comes back in the mode it was in
            tiny_llama.train(mode)
            prompt_hidden_states(tiny_llama, char_tokenizer, [short])
            assert tiny_llama.training is mode
    finally:
        tiny_llama.train(was)


def test_hidden_states_bad_input(tiny_llama, char_tokenizer):
    with pytest.raises(ConfigError, match="has no tokens"):
        prompt_hidden_states(tiny_llama, char_tokenizer, [Prompt(id="empty", text="")])
    with pytest.raises(ConfigError, match="batch_size"):
        prompt_hidden_states(tiny_llama, char_tokenizer, [Prompt(id="a", text="1")], batch_size=0)


def test_standardise():
    x = np.array([[1.0, 5.0, 2.0], [3.0, 5.0, 4.0], [5.0, 5.0, 0.0]])
    z = standardise(x)
    assert np.allclose(z.mean(axis=0), 0.0)
    assert np.allclose(z[:, 1], 0.0)  # a constant column
    assert np.allclose(z[:, 0].std(), 1 / np.sqrt(3))
    with pytest.raises(ConfigError, match="non-empty"):
        standardise(np.zeros((0, 3)))


def test_first_token_confidence(tiny_llama, char_tokenizer):
    prompts = [Prompt(id="a", text="1+2="), Prompt(id="b", text="123+456=")]
    c = first_token_confidence(tiny_llama, char_tokenizer, prompts, batch_size=1)
    assert c.shape == (2, 2)
    vocab = tiny_llama.config.vocab_size
    assert np.all((c[:, 0] >= 0) & (c[:, 0] <= np.log(vocab) + 1e-9))  # entropy in [0, log V]
    assert np.all((c[:, 1] <= 0) & (c[:, 1] >= -np.log(vocab) - 1e-9))  # top log-prob in [-log V, 0]
    assert np.allclose(c, first_token_confidence(tiny_llama, char_tokenizer, prompts, batch_size=2), atol=1e-6)
    # a high temperature flattens the distribution: more entropy, a lower top probability
    hot = first_token_confidence(tiny_llama, char_tokenizer, prompts, temperature=100.0)
    assert np.all(hot[:, 0] > c[:, 0]) and np.all(hot[:, 1] < c[:, 1])
    with pytest.raises(ConfigError, match="temperature"):
        first_token_confidence(tiny_llama, char_tokenizer, prompts, temperature=0.0)


def test_hidden_state_is_the_models_last_hidden_state_at_the_last_token(tiny_llama, char_tokenizer):
    import torch

    p = Prompt(id="a", text="12+345=")
    ids = torch.tensor([char_tokenizer(p.text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = tiny_llama(input_ids=ids, output_hidden_states=True)
    want_h = out.hidden_states[-1][0, -1].double().numpy()
    logp = torch.log_softmax(out.logits[0, -1].double(), -1)
    hidden, conf = prompt_features(tiny_llama, char_tokenizer, [p, Prompt(id="b", text="1=")])
    assert np.allclose(hidden[0], want_h, atol=1e-5)
    assert np.allclose(conf[0], [float(-(logp.exp() * logp).sum()), float(logp.max())], atol=1e-6)
