"""docs/metrics.md, generated: every key a run writes to `metrics.jsonl` (and its trackers), each with its definition.

The definitions live in the code, beside what emits each key, so nothing is typed twice:
1) the ledger's fields (`sampling.ledger.Ledger`): the docstring under each (`training.config.field_docs`);
2) every other emitter declares `METRICS`, key -> one line: each strategy and admission rule class (`PoolStrategy`,
   `AdmissionRule`), the admission stage, the streaming driver, drift forgetting, the trainer, the learner's
   sampler/learner drift, the samples log, the context check, replay, evaluation, Ray workers, the benchmark probe;
   and the loss's statistics from `LossOutput`'s field docstrings (not written by the trainer).
The page documents the package's own strategies and admission rules (`ours`): one registered from outside (a plugin,
a test's) is left out, its keys being its author's to document.
A key that depends on an option is a pattern: `qhat_{k}` stands for `qhat_2`, `qhat_4`, ... (`defined`). A key written
only under a condition that its table's "when" does not already say begins its definition with "Only ...:".
`sources()` lists the tables; `page()` renders them. tests/test_metrics_doc.py checks the committed page against
`page()`, that every key the drivers and the trainer write is defined, and that no definition is stale.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass, fields

SECTIONS = (
    ("ledger", "Every training line: the ledger"),
    ("strategy", "Strategies"),
    ("admission", "Prompt admission"),
    ("memory", "Prompt memory"),
    ("learner", "The learner"),
    ("evaluation", "Evaluation"),
    ("loss", "Not in metrics.jsonl: the loss's statistics"),
)
"""The page's sections, in order: `Source.section` -> heading."""


@dataclass(frozen=True)
class Source:
    """One table of the page: keys one piece of code emits, when they are written, and where each is defined."""

    section: str
    title: str
    when: str
    metrics: dict[str, str]
    """key (or pattern) -> its definition."""
    where: dict[str, str]
    """key -> the code that declares it (`module.Class`)."""


def ours(cls: type) -> bool:
    """Whether a registered class is the package's own (not a plugin's)."""
    return cls.__module__.split(".")[0] == "reinforce_ada"


def _name(obj: object) -> str:
    """`sampling.ledger.Ledger` for the class or module `obj` (the package prefix dropped)."""
    name = getattr(obj, "__qualname__", None)
    module = obj.__name__ if name is None else f"{obj.__module__}.{name}"  # type: ignore[attr-defined]
    return module.removeprefix("reinforce_ada.")


def _source(section: str, title: str, when: str, metrics: dict[str, str], owner: object) -> Source:
    return Source(section, title, when, dict(metrics), dict.fromkeys(metrics, _name(owner)))


def _declared_by(cls: type, metrics: dict[str, str]) -> dict[str, str]:
    """key -> the most basic class in `cls`'s MRO whose own `METRICS` holds it (where its definition is written)."""
    out = {}
    for key in metrics:
        owner = next(c for c in reversed(cls.__mro__) if key in vars(c).get("METRICS", {}))
        out[key] = _name(owner)
    return out


def attribute_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass (the house's way of documenting a record's fields), read from
    its source: a documentation generator's job, so the package itself never parses source."""
    docs = {f.name: "" for f in fields(cls)}
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    for a, b in zip(body, body[1:], strict=False):
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant):
            docs[a.target.id] = " ".join(str(b.value.value).split())  # type: ignore[union-attr]
    return docs


def ledger_sources() -> list[Source]:
    from reinforce_ada.sampling import ledger, streaming

    docs = {f.name: attribute_docs(ledger.Ledger)[f.name] for f in fields(ledger.Ledger) if f.name != "extra"}
    every = "Every training line (step 1 on), whatever the strategy."
    return [
        _source("ledger", "The ledger's fields", every, docs, ledger.Ledger),
        _source("ledger", "The streaming driver", "Training lines of a streaming step.", streaming.METRICS, streaming),
    ]


def strategy_sources() -> list[Source]:
    from reinforce_ada.sampling.strategies import STRATEGIES

    names: dict[type, list[str]] = {}
    for name, cls in STRATEGIES.items():
        if ours(cls):
            names.setdefault(cls, []).append(name)
    out = []
    for cls, aliases in names.items():
        title = " / ".join(f"`{n}`" for n in aliases)
        when = "With " + " or ".join(f"`--strategy {n}`" for n in aliases) + "."
        out.append(Source("strategy", title, when, dict(cls.METRICS), _declared_by(cls, cls.METRICS)))
    return out


def admission_sources() -> list[Source]:
    from reinforce_ada.sampling.admission import ADMISSIONS, stage
    from reinforce_ada.sampling.strategies import STRATEGIES

    built_in = {}
    for name, cls in STRATEGIES.items():
        if cls.select_fixed:
            built_in.setdefault(cls.Options.__dataclass_fields__["select"].default, name)
    when = "With any `select` other than `none`, or with `evict` (on by default for `pilot_commit`)."
    out = [_source("admission", "The admission stage", when, stage.METRICS, stage)]
    for name, rule in ADMISSIONS.items():
        if name == "none" or not ours(rule):
            continue
        also = f" (built into `--strategy {built_in[name]}`)" if name in built_in else ""
        when = f"With `select={name}`{also}."
        out.append(Source("admission", f"`select={name}`", when, dict(rule.METRICS), _declared_by(rule, rule.METRICS)))
    return out


def memory_sources() -> list[Source]:
    from reinforce_ada.sampling.memory.forgetting import DriftForgetting

    when = "With `forgetting=drift` (our trainer and the simulator only)."
    return [_source("memory", "`forgetting=drift`", when, DriftForgetting.METRICS, DriftForgetting)]


def learner_sources() -> list[Source]:
    from reinforce_ada.bench import run as bench_run
    from reinforce_ada.engines import continuous, ray_state
    from reinforce_ada.training import context, experience, replay, samples_log, trainer
    from reinforce_ada.training.drift import Drift

    train = "Every training line of `reinforce-ada train` (and `compare`, `bench`)."
    measured = "Training lines whose update measured the sampler/learner mismatch (any token trained on)."
    probe = "Benchmark runs that ask for the value probe (`bench.run`)."
    return [
        _source("learner", "The trainer", train, trainer.METRICS, trainer),
        _source("learner", "Sampler/learner mismatch", measured, Drift.METRICS, Drift),
        _source("learner", "The samples log", train, samples_log.METRICS, samples_log),
        _source("learner", "The context check", "The step-0 line.", context.METRICS, context),
        _source("learner", "Replay", "With `[replay] enabled = true`.", replay.METRICS, replay),
        _source("learner", "Experience replay", "With `[replay] mode = samples`.", experience.METRICS, experience),
        _source("learner", "Ray rollout workers", "With `[rollout] workers > 0`.", ray_state.STEP_METRICS, ray_state),
        _source("learner", "Continuous batching", "With a streaming engine.", continuous.METRICS, continuous),
        _source("learner", "The benchmark's value probe", probe, bench_run.PROBE_METRICS, bench_run),
    ]


def evaluation_sources() -> list[Source]:
    from reinforce_ada.evaluation import metrics

    when = "The step-0 line, every `run.eval_every` steps and the last step's line."
    return [_source("evaluation", "Held-out evaluation", when, metrics.METRICS, metrics)]


def loss_sources(prefix: str = "loss/") -> list[Source]:
    from reinforce_ada.training.losses import LossOutput

    docs = {prefix + k: v for k, v in attribute_docs(LossOutput).items()}
    when = (
        f"`LossOutput.metrics(prefix={prefix!r})`, for code that calls `training.losses.policy_loss` itself; the "
        "trainer writes only `loss`, `entropy` and `clip_frac`, averaged over a step."
    )
    return [_source("loss", "`policy_loss`'s statistics", when, docs, LossOutput)]


def sources() -> list[Source]:
    """Every table of the page, in order."""
    return [
        *ledger_sources(),
        *strategy_sources(),
        *admission_sources(),
        *memory_sources(),
        *learner_sources(),
        *evaluation_sources(),
        *loss_sources(),
    ]


def pattern(key: str) -> re.Pattern[str]:
    """The keys a documented key stands for: each `{name}` matches one or more characters.

    >>> bool(pattern("qhat_{k}").fullmatch("qhat_4")), bool(pattern("qhat_{k}").fullmatch("qhat_"))
    (True, False)
    """
    parts = re.split(r"\{[a-z_]+\}", key)
    return re.compile(".+".join(re.escape(p) for p in parts))


def defined(key: str, metrics: dict[str, str]) -> bool:
    """Whether `key` is one of `metrics`' keys or matches one of its patterns."""
    return key in metrics or any(pattern(k).fullmatch(key) for k in metrics)


def conditional(definition: str) -> bool:
    """Whether a definition names the condition its key is written under ("Only with ...: ...")."""
    return definition.startswith("Only ") and ":" in definition


def _para(text: str) -> str:
    """A paragraph wrapped as the repository's Markdown is (lines of at most 120 characters)."""
    return textwrap.fill(" ".join(text.split()), 116, break_long_words=False, break_on_hyphens=False)


def _cell(text: str) -> str:
    """One line, safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _tracker_note() -> str:
    from reinforce_ada.training.tracking import TB_GROUPS

    groups = ", ".join(f"`{prefix}...` under `{group}/`" for prefix, group in TB_GROUPS)
    return (
        "The trackers of `run.report_to` (TensorBoard, W&B, MLflow, trackio) get the same keys, the numbers only (no "
        f"lists, no booleans, no nan), each as `section/key`: {groups}, every other key under `train/` "
        "(`training.tracking.tb_tag`)."
    )


def _table(src: Source) -> list[str]:
    lines = [f"### {src.title}", "", _para(src.when), ""]
    if not src.metrics:
        return [*lines, "No keys beyond the ledger's.", ""]
    lines += ["| key | definition | declared in |", "|---|---|---|"]
    for key, text in src.metrics.items():
        lines.append(f"| `{key}` | {_cell(text)} | `{src.where[key]}` |")
    return [*lines, ""]


def page() -> str:
    """The whole Markdown of docs/metrics.md."""
    lines = [
        "# Metrics",
        "",
        "<!-- Generated by docgen/metrics_page.py from the definitions in the code (`METRICS` beside each emitter,",
        "the docstrings of `sampling.ledger.Ledger`'s fields): edit those, not this page. -->",
        "",
        _para(
            "A run folder's `metrics.jsonl` has one JSON object per line, each with `step`. The step-0 line is the "
            "evaluation before training; each training line holds the step's ledger (where the sampling budget "
            "went), its strategy's and admission rule's keys, and the learner's; evaluation keys join the line every "
            "`run.eval_every` steps and at the last step. Non-finite numbers are written as `null`."
        ),
        "",
        _para(_tracker_note()),
        "",
        _para(
            "A key written `{name}` stands for a family: `qhat_{k}` is `qhat_2`, `qhat_4`, ... for each budget `k`. "
            "A definition that starts with *Only ...* names the condition its key is written under; otherwise the "
            "key is in every line its table's first sentence names."
        ),
        "",
    ]
    srcs = sources()
    for section, heading in SECTIONS:
        lines += [f"## {heading}", ""]
        for src in srcs:
            if src.section == section:
                lines += _table(src)
    return "\n".join(lines).rstrip("\n") + "\n"
