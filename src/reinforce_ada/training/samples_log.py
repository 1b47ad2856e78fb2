"""What the policy actually wrote: a few completions per step in `samples.jsonl`, the clipped share, and one warning
when a run cannot learn.

1) `SampleLog.record(step, batch)` appends up to `run.samples_per_step` rows to `RUN/samples.jsonl`: the first kept
   sample of each of the step's first prompts (deterministic; no random draw, so a resumed run repeats the same rows),
   with prompt, completion, reference answer, reward and whether the completion was cut at
   `generation.max_new_tokens`; a replayed earlier answer (`training.replay`) carries `replayed_from`, the step it
   was generated at. It returns the step's `completions_clipped_share` (kept samples whose `finish_reason` is
   `length`, replayed ones aside: they were not generated this step; TRL logs the same as
   `completions/clipped_ratio`).
2) On the first step this process trains, if every reward drawn is 0, it prints one warning with the fix: when most
   completions were cut at the token limit, the model had no room to answer (raise `--generation.max_new_tokens`);
   otherwise the verifier or template does not fit how the model answers. SmolLM2 on a file task with the defaults
   (8 new tokens, `exact`, `plain`) used to run to the end with reward 0 and no word.
3) `python -m reinforce_ada.training.samples_log RUN [--step N] [-n K]` prints a run's samples.

A resumed run first drops the rows of steps at or after the one it resumes at (its metrics.jsonl does the same).
The file is written as metrics.jsonl is, through the run folder's gate (`training.gate.Folder`: appended O_NOFOLLOW,
rewritten by atomic rename, each path walked from the folder's descriptor), so a link put in its place while the run
goes is refused, not written through; a damaged file (rows that are not
objects, steps that are not whole numbers, deep nesting) is read row by row, the bad lines skipped and counted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from reinforce_ada.errors import ConfigError
from reinforce_ada.sampling.ledger import StepBatch
from reinforce_ada.training.gate import Folder

FILE = "samples.jsonl"
MAX_CHARS = 4000
"""Prompt and completion texts longer than this are cut in the file (with a marker saying how much was left out)."""
CLIPPED_WARN_SHARE = 0.5
"""With all rewards 0, at least this share of completions cut at the token limit blames the limit."""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CHARS else f"{text[:MAX_CHARS]}... [+{len(text) - MAX_CHARS} chars]"


def sample_rows(step: int, batch: StepBatch, k: int) -> list[dict[str, Any]]:
    """Up to `k` rows: the first kept sample of each of the step's first `k` prompts that kept any."""
    rows = []
    for g in batch.groups:
        if len(rows) >= k:
            break
        if not g.samples:
            continue
        s = g.samples[0]
        rows.append(
            {
                "step": step,
                "prompt_id": g.prompt.id,
                "prompt": _cut(g.prompt.text),
                "completion": _cut(s.text),
                "answer": g.prompt.answer,
                "reward": s.reward,
                "clipped": s.finish_reason == "length",
                "finish_reason": s.finish_reason,
                "num_tokens": s.num_tokens,
                **({"replayed_from": s.replayed_from} if s.replayed_from is not None else {}),
            }
        )
    return rows


METRICS: dict[str, str] = {
    "completions_clipped_share": "Share of the step's trained samples cut at generation.max_new_tokens (replayed "
    "ones aside; nan when none).",
}
"""What `SampleLog.record` adds to the step's metrics (docs/metrics.md)."""


def clipped_share(batch: StepBatch) -> float:
    """Share of the step's kept samples cut at `max_new_tokens`, replayed earlier answers aside (NaN when none)."""
    reasons = [s.finish_reason for g in batch.groups for s in g.samples if s.replayed_from is None]
    return sum(r == "length" for r in reasons) / len(reasons) if reasons else float("nan")


def zero_reward_warning(
    step: int, batch: StepBatch, *, max_new_tokens: int, verifier: str, template: str, run_dir: Path
) -> str | None:
    """The warning when every reward drawn in the step is 0 (None otherwise), naming the settings that fix it."""
    from reinforce_ada.tasks.templates import TEMPLATES
    from reinforce_ada.tasks.verifiers import VERIFIERS

    rewards = [r for g in batch.groups for r in g.pool_rewards]
    if not rewards or any(r != 0 for r in rewards):
        return None
    share = clipped_share(batch)
    where = f"{run_dir / FILE} (reinforce-ada samples {run_dir})"
    choices = (
        f"--task.verifier is one of {sorted(VERIFIERS)} or module:function, --task.template one of {sorted(TEMPLATES)}"
    )
    # "nothing to learn from", not "no update": a tracker baseline (SPO) still gives failed samples advantages
    head = f"warning: step {step}: all {len(rewards)} rewards are 0, so no sample shows the model a right answer"
    if share >= CLIPPED_WARN_SHARE:
        return (
            f"{head}, and {share:.0%} of completions were cut at generation.max_new_tokens={max_new_tokens} tokens: "
            "the model has no room to finish an answer. Raise --generation.max_new_tokens (a chat model that works "
            f"step by step needs 128-512), and check that task.verifier={verifier} and task.template={template} "
            f"fit how it answers ({choices}). See the completions in {where}."
        )
    return (
        f"{head}, though completions end on their own ({share:.0%} cut at max_new_tokens={max_new_tokens}): "
        f"task.verifier={verifier} may not read the model's answers, or task.template={template} may not ask for "
        f"the form the verifier expects ({choices}). See the completions in {where}."
    )


class SampleLog:
    """Writes `samples.jsonl` and the one-time zero-reward warning for a run (see the module docstring)."""

    def __init__(self, run_dir: Path | Folder, cfg: Any) -> None:
        self.folder = run_dir if isinstance(run_dir, Folder) else Folder(run_dir)
        self.path = self.folder.path / FILE
        self.cfg = cfg
        self.per_step = cfg.run.samples_per_step
        self._checked = False  # the zero-reward check runs on the first step this process trains

    def record(self, step: int, batch: StepBatch) -> dict[str, float]:
        """Append the step's rows (after dropping rows of step >= `step` left by an earlier process); return
        `{"completions_clipped_share": ...}` for the step's metrics."""
        if not self._checked:
            self._drop_from(step)
            self._checked = True
            from reinforce_ada.tasks import task_spec

            t, g = self.cfg.task, self.cfg.generation
            msg = zero_reward_warning(
                step,
                batch,
                max_new_tokens=g.max_new_tokens,
                verifier=t.verifier or f"{task_spec(t.name).verifier} (the {t.name} task's default)",
                template=t.template,
                run_dir=self.path.parent,
            )
            if msg:
                print(msg, file=sys.stderr, flush=True)
        rows = sample_rows(step, batch, self.per_step)
        if rows:  # O_NOFOLLOW, as metrics.jsonl: a link put here mid-run is refused, never written through
            self.folder.append(FILE, "".join(json.dumps(r) + "\n" for r in rows))
        return {"completions_clipped_share": clipped_share(batch)}

    def _drop_from(self, step: int) -> None:
        if not os.path.lexists(self.path):
            return
        text = _read_text(self.path)
        keep = [ln for ln in text.split("\n") if (row := _row(ln)) is not None and row["step"] < step]
        self.folder.write(FILE, "".join(ln + "\n" for ln in keep))  # atomic, never through a link


def _row(line: str) -> dict[str, Any] | None:
    """A samples.jsonl line as a row: a JSON object whose `step` is a whole number; None for anything else (a
    half-written line, a list, a number, null, a text / missing / infinite / NaN step, nesting too deep)."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):  # deliberate: RecursionError is how Python's parser meets deep nesting
        return None
    if not isinstance(row, dict):
        return None
    step = row.get("step")
    if isinstance(step, bool) or not isinstance(step, int):
        return None
    return row


def _read_text(path: Path) -> str:
    """The file's text; a folder, FIFO, socket, device or link in its place is a ConfigError (a FIFO would block)."""
    if path.is_symlink():
        raise ConfigError(f"{path} is a symbolic link; a run folder holds no links (remove it)")
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not the samples file `reinforce-ada train` writes; remove or rename it")
    if not path.is_file():
        raise ConfigError(f"{path} is not a regular file (a FIFO, socket or device); remove it")
    return path.read_text(errors="replace")


def read_samples(run_dir: Path, step: int | None = None, damaged: list[int] | None = None) -> list[dict[str, Any]]:
    """The rows of a run's samples.jsonl (of one step, or the last step logged when `step` is -1). Lines that are
    not a row (`_row`) are skipped; their line numbers go to `damaged` when given. Lines split on "\\n" only: a raw
    U+2028 or U+0085 inside a JSON string is valid JSON, not a line break."""
    path = Path(run_dir) / FILE
    if not os.path.lexists(path):
        raise ConfigError(f"{path} does not exist: give a run folder made by `reinforce-ada train`")
    rows = []
    for i, ln in enumerate(_read_text(path).split("\n"), start=1):
        if not ln.strip():
            continue
        row = _row(ln)
        if row is None:
            if damaged is not None:
                damaged.append(i)
            continue
        rows.append(row)
    if step == -1 and rows:
        step = max(r["step"] for r in rows)
    return [r for r in rows if step is None or r["step"] == step]


def format_sample(row: dict[str, Any]) -> str:
    cut = " (cut at max_new_tokens)" if row.get("clipped") else ""
    return (
        f"--- step {row.get('step')}  prompt {row.get('prompt_id')}  reward {row.get('reward')}  "
        f"{row.get('num_tokens')} tokens{cut}\n"
        f"[prompt]\n{row.get('prompt')}\n[completion]\n{row.get('completion')}\n[answer] {row.get('answer')}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Print completions a run saved (RUN/samples.jsonl).")
    ap.add_argument("run", help="run folder")
    ap.add_argument("--step", type=int, default=-1, help="step to show (default: the last one logged)")
    ap.add_argument("-n", type=int, default=1, help="samples to print (default 1)")
    args = ap.parse_args(argv)
    damaged: list[int] = []
    try:
        rows = read_samples(Path(args.run), args.step, damaged)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if damaged:
        lines = ", ".join(map(str, damaged[:5])) + (", ..." if len(damaged) > 5 else "")
        print(
            f"note: skipped {len(damaged)} line(s) of {Path(args.run) / FILE} that are not a sample row "
            f"(line {lines}: not a JSON object with a whole-number step)",
            file=sys.stderr,
        )
    if not rows:
        print(f"no samples for step {args.step} in {Path(args.run) / FILE}", file=sys.stderr)
        return 1
    print("\n".join(format_sample(r) for r in rows[: max(1, args.n)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
