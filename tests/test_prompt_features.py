"""The policy's view of a prompt (models.features): hidden states, first-token confidence, standardising."""

from __future__ import annotations

import numpy as np
import pytest

from reinforce_ada.errors import ConfigError
from reinforce_ada.models.features import first_token_confidence, prompt_features, prompt_hidden_states, standardise
from reinforce_ada.types import Prompt


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
