from __future__ import annotations

import copy

import pytest
import torch

from reinforce_ada.models.forward import left_pad, right_pad, sequence_logprobs

PROMPTS = [[2, 5, 6, 14], [2, 9], [2, 7, 7, 7, 8, 17]]
COMPLETIONS = [[8, 9, 1], [10], [4, 5, 6, 7, 8]]


def _one_row(model, prompt, completion, temperature):
    """Reference: an unpadded forward over one row."""
    ids = torch.tensor([prompt + completion])
    logits_LV = model(input_ids=ids).logits[0].float() / temperature
    logp_LV = logits_LV.log_softmax(-1)
    pred_TV = logp_LV[len(prompt) - 1 : len(prompt) + len(completion) - 1]
    logp_T = pred_TV.gather(-1, torch.tensor(completion).unsqueeze(-1)).squeeze(-1)
    entropy_T = -(pred_TV.exp() * pred_TV).sum(-1)
    return logp_T, entropy_T


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_matches_unpadded_forward_per_row(tiny_llama, temperature):
    with torch.no_grad():
        logp_BT, mask_BT, entropy_BT = sequence_logprobs(
            tiny_llama, PROMPTS, COMPLETIONS, 0, temperature=temperature, with_entropy=True
        )
    assert logp_BT.shape == mask_BT.shape == entropy_BT.shape == (3, 5)
    assert mask_BT.dtype == torch.bool
    assert mask_BT.sum(-1).tolist() == [len(c) for c in COMPLETIONS]
    for b, (p, c) in enumerate(zip(PROMPTS, COMPLETIONS, strict=True)):
        with torch.no_grad():
            want_logp_T, want_entropy_T = _one_row(tiny_llama, p, c, temperature)
        assert torch.allclose(logp_BT[b, : len(c)], want_logp_T, atol=1e-5)
        assert torch.allclose(entropy_BT[b, : len(c)], want_entropy_T, atol=1e-5)
        assert (logp_BT[b, len(c) :] == 0).all() and (entropy_BT[b, len(c) :] == 0).all()


def test_gradient_flows(tiny_llama):
    model = copy.deepcopy(tiny_llama)
    logp_BT, mask_BT, entropy_BT = sequence_logprobs(model, PROMPTS, COMPLETIONS, 0, with_entropy=True)
    (logp_BT.sum() + entropy_BT.sum()).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


def test_empty_completions(tiny_llama):
    logp_BT, mask_BT, entropy_BT = sequence_logprobs(tiny_llama, PROMPTS[:2], [[], []], 0)
    assert logp_BT.shape == mask_BT.shape == (2, 0) and entropy_BT is None


def test_bad_inputs_raise(tiny_llama):
    with pytest.raises(ValueError, match="prompts"):
        sequence_logprobs(tiny_llama, PROMPTS, COMPLETIONS[:2], 0)
    with pytest.raises(ValueError, match="temperature"):
        sequence_logprobs(tiny_llama, PROMPTS, COMPLETIONS, 0, temperature=0.0)
    with pytest.raises(ValueError, match="at least one token"):
        sequence_logprobs(tiny_llama, [[], [2]], [[3], [4]], 0)


def test_pad_helpers():
    ids_BL, mask_BL = left_pad([[1, 2], [3]], pad_id=9)
    assert ids_BL.tolist() == [[1, 2], [9, 3]] and mask_BL.tolist() == [[1, 1], [0, 1]]
    vals_BT, mask_BT = right_pad([[0.5], [], [1.0, 2.0]], value=-1.0)
    assert vals_BT.tolist() == [[0.5, -1.0], [-1.0, -1.0], [1.0, 2.0]]
    assert mask_BT.tolist() == [[True, False], [False, False], [True, True]]
