"""Shared pieces of tests/test_verl.py: verl-shaped dataset rows, a deterministic reward, and stand-ins for the two
verl parts that need a GPU (the agent loop that generates, the actor worker group that checkpoints)."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict
from tensordict.tensorclass import NonTensorData, NonTensorStack
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn

from reinforce_ada.integrations.verl_driver import ROLLOUT_N

PASS_RATE = (0.0, 0.1, 0.5, 0.9, 1.0, 0.3)


def reward(index: int, ordinal: int) -> float:
    """Deterministic Bernoulli reward of a prompt's ordinal-th sample (same for both drivers)."""
    return float(np.random.default_rng([index, ordinal]).random() < PASS_RATE[index % len(PASS_RATE)])


def dataset_rows(start: int, count: int) -> list[dict]:
    return [
        {
            "raw_prompt": [{"role": "user", "content": f"question {i}"}],
            "data_source": "toy",
            "reward_model": {"ground_truth": str(i)},
            "extra_info": {"index": i},
            "index": i,
        }
        for i in range(start, start + count)
    ]


class Rows:
    """verl's fetch path: `collate_fn` over dataset rows, a uid column, `tu.get_tensordict` (_fetch_one_gen_batch)."""

    def __init__(self, gen_batch: int):
        self.gen_batch, self.next = gen_batch, 0

    def __call__(self):
        batch = collate_fn(dataset_rows(self.next, self.gen_batch))
        self.next += self.gen_batch
        batch["uid"] = np.array([f"fetch{self.next}x{i}" for i in range(self.gen_batch)], dtype=object)
        return tu.get_tensordict(batch)


class FakeAgentLoop:
    """Stands in for verl's AgentLoopManagerTQ (no GPU here): writes what AgentLoopWorkerTQ writes to TransferQueue."""

    def __init__(self):
        self.sent: dict[int, int] = {}

    def generate_sequences(self, batch):
        import transfer_queue as tq

        for i in range(len(batch)):
            prompt = {}  # AgentLoopWorkerTQ.generate_sequences' per-row unpacking (it refuses other column types)
            for k, v in batch.items():
                if isinstance(v, torch.Tensor):
                    prompt[k] = v[i]
                elif isinstance(v, NonTensorStack):
                    prompt[k] = v[i].data
                elif isinstance(v, NonTensorData):
                    prompt[k] = v.data
                else:
                    raise TypeError(f"AgentLoopWorkerTQ cannot unpack column {k!r} of type {type(v)}")
            uid, index = prompt["uid"], int(prompt["index"])
            n = prompt.pop(ROLLOUT_N, 1)  # as _run_prompt: the row's count, else rollout.n
            assert isinstance(n, int) and prompt["global_steps"] == 1
            tq.kv_put(key=uid, partition_id="train", tag={"status": "running"})
            keys, masks, scores, tags = [], [], [], []
            for s in range(n):
                ordinal = self.sent.get(index, 0) + s
                length = 3 + ordinal % 4
                score = torch.zeros(length)
                score[-1] = reward(index, ordinal)
                keys.append(f"{uid}_{s}_0")
                masks.append(torch.ones(length, dtype=torch.int64))
                scores.append(score)
                tags.append({"status": "success", "prompt_len": 2, "response_len": length, "seq_len": 2 + length})
            self.sent[index] = self.sent.get(index, 0) + n
            fields = TensorDict(
                {
                    "response_mask": torch.nested.nested_tensor(masks, layout=torch.jagged),
                    "rm_scores": torch.nested.nested_tensor(scores, layout=torch.jagged),
                },
                batch_size=n,
            )
            tq.kv_batch_put(keys=keys, partition_id="train", fields=fields, tags=tags)
            tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})


class WorkerGroupStub:
    """Stands in for the actor worker group (FSDP workers need a GPU): records checkpoint calls."""

    def __init__(self):
        self.calls = []

    def save_checkpoint(self, local_path, *args, **kwargs):
        self.calls.append(("save", local_path))

    def load_checkpoint(self, local_path, **kwargs):
        self.calls.append(("load", local_path))
