"""``runnercheck config [PATH]``: the effective configuration for PATH, validated."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "show the effective [tool.runnercheck] configuration for a path"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", type=Path, default=Path("."))
    parser.add_argument("--config", type=Path, help="read this TOML file instead of pyproject.toml")


def run(args: argparse.Namespace) -> int:
    from runnercheck.config import config_as_dict, find_pyproject, load_config
    from runnercheck.files import check_arguments

    check_arguments([args.path])  # a missing path is a usage error, as in every command
    config = load_config(args.path, args.config)
    source = args.config or find_pyproject(args.path)
    print(
        json.dumps({"source": str(source) if source else None, **config_as_dict(config)}, indent=2)
    )
    return 0
