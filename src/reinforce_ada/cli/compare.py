"""`reinforce-ada compare`: its flags and its body (the machinery is `reinforce_ada.bench`)."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reinforce_ada.cli.checks import finite, given, not_an_input, read_lrs, whole
from reinforce_ada.errors import ConfigError

if TYPE_CHECKING:
    from reinforce_ada.cli.flags import Chosen


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser(
        "compare", help="convergence benchmark: sampling strategies side by side on the shipped testbed, with intervals"
    )
    p.add_argument(
        "--arms",
        default=None,
        metavar="ARMS",
        help="arms from the table in reinforce_ada.bench.arms or NAME=SPEC (parse_arm specs, optionally ending in "
        "'| optim.KEY=VALUE,...' for the arm's learner: optim.*, replay.*, run.batch_size, prior.samples; e.g. "
        "'grpo-2ep=uniform:n=4 | optim.epochs=2'), "
        "comma-separated (';' when a spec has commas); default: every arm in the table (those that do not parse yet "
        "are skipped)",
    )
    p.add_argument(
        "--pool",
        action="append",
        default=None,
        metavar="SPEC",
        help="repeatable: default, hard, NAME=arithmetic:weights=0/0/1/1/1/1/1[,size=N][,filter=0-0.375] or "
        "NAME=file:path=FILE[,eval=FILE][,filter=LO-HI] or NAME=reasoning_gym[:size=N,...] (the reasoning extra); "
        "default: default and hard (the lr sweep runs on the first)",
    )
    p.add_argument("--steps", type=int, default=None, help="RL steps per run (default 200; GRPO-n4 runs 2x)")
    p.add_argument(
        "--token-budget",
        type=whole,
        default=None,
        metavar="TOKENS",
        help="run every arm to this many generated tokens (--steps becomes a cap) and report held-out accuracy at "
        "that equal budget against the best uniform arm",
    )
    p.add_argument("--eval-points", type=int, default=None, help="with --token-budget: evaluations per run (20)")
    p.add_argument("--batch-size", type=int, default=None, help="prompts per step (default 16)")
    p.add_argument("--seeds", type=int, default=None, help="seeds of the headline arms (default 9)")
    p.add_argument("--other-seeds", type=int, default=None, help="seeds of the other arms (default 5)")
    p.add_argument("--seed-offset", type=int, default=0, help="first seed: an independent re-run uses other seeds")
    p.add_argument("--workers", type=int, default=1, help="runs at a time in worker processes (1 torch thread each)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="every arm, small (runs/compare-quick): a smoke test that every arm runs, not a result (it says so)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="output path without suffix: OUT.json and OUT.png (default runs/compare/convergence; --quick: "
        "runs/compare-quick/convergence); the pools, run folders and records go in OUT's folder",
    )
    p.add_argument(
        "--compute-arm",
        default=None,
        help="the adaptive arm whose compute-to-target figures are the headline (default mopps when it runs, else the "
        "first adaptive arm of --arms: not plain uniform sampling, not an oracle)",
    )
    p.add_argument(
        "--records",
        default=None,
        metavar="DIR",
        help="where finished runs are kept and reused (default OUT's folder/records); resumes an interrupted benchmark",
    )
    p.add_argument(
        "--report-only",
        action="store_true",
        help="run nothing: report on the runs --records already holds (a long run still going, or stopped)",
    )
    p.add_argument(
        "--long-arms",
        default=None,
        help="comma-separated arms that run twice as many steps (CompareConfig.ref_steps_factor, 2 from the command "
        "line; default grpo-n4; a compute run: the uniform family)",
    )
    add_lr_flags(p)
    p.set_defaults(fn=cmd_compare)


def add_lr_flags(p: argparse.ArgumentParser) -> None:
    """The learning-rate sweep's flags: its grid, its seeds, an arm's lr fixed, the grid grown at its edge."""
    p.add_argument("--sweep-seeds", type=int, default=None, help="seeds per lr in the sweep (default 2)")
    p.add_argument("--lrs", default=None, help="the sweep's lr grid, comma-separated (default 1e-4,2e-4,4e-4)")
    p.add_argument(
        "--lr", action="append", default=[], metavar="ARM=LR", help="repeatable: fix an arm's lr (skips its sweep)"
    )
    p.add_argument("--lrs-from", default=None, help="a result JSON: every arm at the lr that run chose (no sweep)")
    p.add_argument("--sweep-each-pool", action="store_true", help="sweep the lr on every pool, not only the first")
    p.add_argument(
        "--extend-sweep",
        type=int,
        default=None,
        metavar="N",
        help="grow an arm's lr grid by one value beyond its edge while its best lr sits there, at most N times",
    )


def compare_config(args: argparse.Namespace) -> Any:
    """The `bench.compare.CompareConfig` the parsed `compare` flags describe (every check done here)."""
    from reinforce_ada.bench.arms import ARMS, split_arms
    from reinforce_ada.bench.compare import QUICK, CompareConfig

    given(args, "out", "records", "lrs_from", "arms", "long_arms", "compute_arm", "lrs", "pool")
    if args.eval_points is not None and args.token_budget is None:  # read only with a budget: it did nothing
        raise ConfigError(f"--eval-points {args.eval_points} is read only with --token-budget; give both or neither")
    out = args.out or ("runs/compare-quick/convergence" if args.quick else "runs/compare/convergence")
    for suffix in (".json", ".png"):  # the result must not overwrite a file the comparison reads
        reads = {"--lrs-from": args.lrs_from, **{f"--pool {p}": f for p in args.pool or () for f in pool_files(p)}}
        not_an_input("--out", out, Path(out).with_suffix(suffix), reads)
    fixed = read_lrs(args.lrs_from) if args.lrs_from else {}
    for item in args.lr:
        arm, eq, lr = item.partition("=")
        try:
            fixed[arm.strip()] = float(lr)
        except ValueError:
            raise ConfigError(f"--lr {item!r}: write ARM=LR, e.g. seq-bal=4e-4") from None
        if not eq:
            raise ConfigError(f"--lr {item!r}: write ARM=LR, e.g. seq-bal=4e-4")
        finite(f"--lr {item}:", fixed[arm.strip()], least=0.0)
    arms = tuple(split_arms(args.arms)) if args.arms else tuple(ARMS)
    names = {a.partition("=")[0].strip() for a in arms}
    fields: dict[str, Any] = {"arms": arms, "out": out, "workers": args.workers, "seed_offset": args.seed_offset}
    fields["run_root"] = str(Path(out).parent)  # pools, run folders and records beside the result, not in the cwd
    fields["fixed_lrs"] = tuple((k, v) for k, v in fixed.items() if k in names)
    if args.pool:
        fields["pools"] = tuple(args.pool)
    if args.lrs:
        try:
            fields["lrs"] = tuple(float(x) for x in args.lrs.split(","))
        except ValueError:
            raise ConfigError(f"--lrs {args.lrs!r}: give comma-separated numbers, e.g. 2e-4,4e-4,8e-4") from None
        for lr in fields["lrs"]:
            finite(f"--lrs {args.lrs}: each", lr, least=0.0)
    if args.quick:
        fields.update(QUICK)
    if args.sweep_each_pool:
        fields["sweep_each_pool"] = True
    if args.long_arms:
        fields["long_arms"] = tuple(split_arms(args.long_arms))
    if args.report_only:
        fields["only_cached"] = True
    if args.records is not None:
        records_folder(args.records)
    for name in ("extend_sweep", "records"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    for name in ("steps", "batch_size", "seeds", "other_seeds", "sweep_seeds", "token_budget", "eval_points"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    c = CompareConfig(**fields)
    from reinforce_ada.bench.arms import check_costs, resolve_arms
    from reinforce_ada.bench.testbed import parse_pool, pool_max_new_tokens, pools_task

    pools_task(c.pools)  # long-answer and arithmetic pools need different models: refused together, up front
    most = max(pool_max_new_tokens(parse_pool(p)) for p in c.pools)
    check_costs(resolve_arms(list(c.arms))[0], c, most)  # n x batch x tokens, the budget: up front
    return dataclasses.replace(c, compute_arm=headline_arm(c, [a.partition("=")[0].strip() for a in arms], args))


def records_folder(path: str) -> None:
    """`--records` names a folder (finished runs are kept in it, one file each): a file there, a file in its way, or
    a folder that takes no files is a ConfigError naming the flag, before any run (it was a FileExistsError after
    the training)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ConfigError(f"--records {path}: a file, not a folder; give a folder (each finished run is a file in it)")
    parent = next((q for q in p.parents if q.exists()), None) if not p.exists() else p
    if parent is not None and not parent.is_dir():
        raise ConfigError(f"--records {path}: {parent} is a file, so the folder cannot be made; give another folder")
    if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--records {path}: {parent} takes no new files (no write permission); give another folder")


def pool_files(spec: str) -> list[str]:
    """The files a `--pool` spec reads (`NAME=file:path=FILE[,eval=FILE]`).

    >>> pool_files("mine=file:path=data/a.jsonl,eval=data/b.jsonl,filter=0-0.5"), pool_files("hard")
    (['data/a.jsonl', 'data/b.jsonl'], [])
    """
    return [v for k, _, v in (kv.partition("=") for kv in spec.partition(":")[2].split(",")) if k in ("path", "eval")]


def headline_arm(c: Any, names: list[str], args: argparse.Namespace) -> str:
    """The arm whose compute-to-target figures lead the report: `--compute-arm` (one of the arms), else the default
    when it runs, else the first adaptive arm (else the default, reported as absent). Adaptive is read from the parsed
    spec: not plain uniform sampling (learner settings aside) and not an oracle."""
    from reinforce_ada.bench.arms import resolve_arms

    if args.compute_arm is not None:
        if args.compute_arm not in names:
            raise ConfigError(f"--compute-arm {args.compute_arm}: not one of the arms run ({', '.join(names)})")
        return args.compute_arm
    if c.compute_arm in names:
        return c.compute_arm

    def adaptive(cfg: Any) -> bool:
        o = cfg.options
        plain = cfg.name == "uniform" and getattr(o, "select", "none") == "none"
        return not plain and getattr(o, "estimator", None) != "oracle"

    arms = {a.name: a.cfg for a in resolve_arms(list(c.arms))[0]}
    return next((n for n in names if n in arms and n not in c.oracles and adaptive(arms[n])), c.compute_arm)


def cmd_compare(args: argparse.Namespace) -> int:
    from reinforce_ada.bench import evidence
    from reinforce_ada.bench.compare import run_compare
    from reinforce_ada.bench.report import format_table, write

    c = compare_config(args)
    command = "reinforce-ada compare " + " ".join(sys.argv[2:])
    if evidence.smoke_test({"config": dataclasses.asdict(c)}):  # said first too: the run may take a while
        print(evidence.note({"config": dataclasses.asdict(c)}), file=sys.stderr)
    results = run_compare(c)
    js, png = write(results, c.out, command, series=False)  # full per-step series stay in the records
    print("\n".join(filter(None, [evidence.note(results), format_table(results)])))  # what the factors can support
    print(f"wrote {js} and {png}")
    return 0
