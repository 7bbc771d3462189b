"""``runnercheck rules [CODE]``: the rule catalog as a table, or one rule's doc."""

from __future__ import annotations

import argparse
import json

from runnercheck import catalog
from runnercheck.console import make_console
from runnercheck.errors import UsageError

HELP = "list the rules, or show one rule's documentation"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", nargs="?", help="a rule code (RC101) or name")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")


def run(args: argparse.Namespace) -> int:
    console = make_console()
    if args.code is None:
        if args.format == "json":
            print(json.dumps([rule.__dict__ for rule in catalog.RULES], indent=2))
        elif args.format == "markdown":
            print(catalog.markdown_table())
        else:
            from rich.table import Table

            table = Table("code", "name", "engine", "summary", title="runnercheck rules")
            for rule in catalog.RULES:
                table.add_row(rule.code, rule.name, rule.engine, rule.summary)
            console.print(table)
        return 0
    try:
        rule = catalog.get(args.code)
    except KeyError:
        raise UsageError(f"unknown rule {args.code!r} (see `runnercheck rules`)") from None
    if args.format == "json":
        print(json.dumps(rule.__dict__, indent=2))
        return 0
    text = (
        f"{rule.code} {rule.name} ({rule.engine})\n\n{rule.summary}\n\n"
        f"Why it matters:\n  {rule.why}\n\nBad:\n{_indent(rule.bad)}\n\nGood:\n{_indent(rule.good)}"
    )
    console.print(text, markup=False, highlight=False)
    return 0


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.splitlines())
