"""Dropout off in the learner, so that the on-policy PPO ratio is exactly 1.

The engines sample in eval mode (no dropout); the learner's forward runs in train mode. With dropout on, the learner's
log-probs are those of a randomly thinned network, not of the policy that sampled: the ratio is not 1 on-policy
(mean |delta log-prob| 0.027 on a GPT-2-style model with dropout 0.1) and the gradient is that of another policy.
As TRL's `disable_dropout`, every dropout is set to 0 at load: `nn.Dropout` modules (LoRA's `lora_dropout` included),
float `*dropout*` attributes of modules (HF attention layers pass e.g. `self.attention_dropout` to SDPA when training)
and the config's dropout fields. Departure from plain fine-tuning: there is no option to keep dropout; RL-from-
verifiable-rewards recipes (TRL, verl, OpenRLHF) train without it.
"""

from __future__ import annotations

import torch


def disable_dropout(model: torch.nn.Module) -> int:
    """Set every dropout probability in `model` to 0, in place; returns how many were non-zero."""
    changed = 0
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            changed += module.p > 0
            module.p = 0.0
            continue
        for name, value in list(vars(module).items()):
            if "dropout" in name and isinstance(value, float) and value > 0:
                setattr(module, name, 0.0)
                changed += 1
        config = getattr(module, "config", None)
        if config is not None and hasattr(config, "to_dict"):
            for name, value in config.to_dict().items():
                if ("dropout" in name or name.endswith("_pdrop")) and isinstance(value, float) and value > 0:
                    setattr(config, name, 0.0)
                    changed += 1
    return changed
