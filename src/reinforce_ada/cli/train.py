"""`reinforce-ada train`: RL-train a policy with our trainer (`training.trainer`); the flags are generated from the
config dataclasses (`cli.flags`), and every flag and the config file are checked before torch is imported."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from reinforce_ada.cli.flags import Chosen, add_train_flags, train_config_from_args
from reinforce_ada.sampling.configure import arm_label


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser(
        "train",
        help="RL-train a policy (default: the embedded tiny model on built-in arithmetic)",
        usage="%(prog)s [--strategy NAME] [--config TOML] [--resume RUN_DIR] [--FLAG VALUE ...]",
    )
    add_train_flags(p, strategy)
    p.set_defaults(fn=cmd_train)


def cmd_train(args: argparse.Namespace) -> int:
    from reinforce_ada.cpu_load import runs_on_cpu, warn_if_oversubscribed
    from reinforce_ada.training import run_dir as run_folder

    cfg = train_config_from_args(args)  # every flag and the config file checked before torch is imported
    # every check of the run folder, once and before torch is imported (training.run_dir.open_run): the Trainer
    # takes its lock and checks no more
    opened = run_folder.open_run(cfg, explicit=getattr(args, "run.run_dir") is not None, resume=bool(args.resume))
    cfg, run_dir = opened.cfg, Path(opened.cfg.run.run_dir)
    if runs_on_cpu(cfg.model.device):  # the default device is auto: the CPU on a machine without CUDA
        threads = warn_if_oversubscribed(cfg.model.threads, explicit=getattr(args, "model.threads") is not None)
        cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, threads=threads))
    if args.resume and opened.reached is not None and opened.reached >= cfg.run.steps:
        opened.lock.release()
        print(
            f"{run_dir} already reached step {opened.reached} (run.steps={cfg.run.steps}): nothing to do. "
            f"To train further: reinforce-ada train --resume {run_dir} --steps N (N > {opened.reached})"
        )
        return 0
    from reinforce_ada.training.interrupt import Interrupted

    try:
        from reinforce_ada.models.load import resolve_device
        from reinforce_ada.training.trainer import Trainer

        resolve_device(cfg.model.device)  # a missing GPU fails now, not after the warm start
        trainer = Trainer(cfg, lock=opened.lock)
        if args.resume and trainer.resume():
            print(f"resumed {cfg.run.run_dir} at step {trainer.step}")
        last = trainer.fit()
    except Interrupted as e:
        print(f"interrupted at step {e.step}; continue with: reinforce-ada train --resume {run_dir}")
        return 130
    except BaseException:
        opened.lock.release()
        if opened.created:
            _remove_if_empty_run(run_dir)
        raise
    _report(cfg, run_dir, last)
    return 0


def _report(cfg: Any, run_dir: Path, last: dict[str, Any]) -> None:
    """The run's summary lines, its report figure and what it wrote."""
    from reinforce_ada.training.report import make_report, summary_lines
    from reinforce_ada.training.tracking import read_metrics

    report = make_report(run_dir, title=arm_label(cfg.strategy))
    for line in summary_lines(read_metrics(run_dir)) or [f"final: {json.dumps(last)}"]:
        print(line)
    written = ["metrics.jsonl", "samples.jsonl", "config.toml", "checkpoints/"]
    written += ["tensorboard/"] if (run_dir / "tensorboard").is_dir() else []  # not with --run.report_to none
    print(f"wrote {cfg.run.run_dir}/{', '.join(written)} and {report}")


def _remove_if_empty_run(run_dir: Path) -> None:
    """A run that failed before its first step leaves no folder behind (it holds no metrics or checkpoints)."""
    import shutil

    if not run_dir.is_dir() or run_dir.is_symlink() or any(p.is_symlink() for p in run_dir.iterdir()):
        return  # never rmtree through a link (run_dir.check_no_links refused it; leave it for the user to see)
    metrics = run_dir / "metrics.jsonl"
    has_steps = metrics.exists() and any('"step": ' in ln and '"step": 0,' not in ln for ln in metrics.open())
    if not has_steps and not any((run_dir / "checkpoints").glob("step_*")):
        shutil.rmtree(run_dir, ignore_errors=True)
