"""``runnercheck rules [CODE]``: the rule catalog as a table, or one rule's doc."""

from __future__ import annotations

import argparse
import json

from runnercheck import catalog
from runnercheck.catalog import Rule
from runnercheck.errors import UsageError

HELP = "list the rules, or show one rule's documentation"


def all_rules() -> tuple[Rule, ...]:
    """The whole catalog: ``check``'s codes, then the plugin's, the runtime validator's
    and ``migrate``'s reasons."""
    return catalog.all_rules()


def get(code_or_name: str) -> Rule:
    """Any rule by code or name; KeyError otherwise."""
    return catalog.get(code_or_name)


def markdown_table() -> str:
    """The README's rule table."""
    return catalog.markdown_table(all_rules())


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", nargs="?", help="a rule code (RC101) or name")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")


def run(args: argparse.Namespace) -> int:
    from runnercheck.console import make_console

    console = make_console()
    if args.code is None:
        if args.format == "json":
            print(json.dumps([rule.__dict__ for rule in all_rules()], indent=2))
        elif args.format == "markdown":
            print(markdown_table())
        else:
            from rich.table import Table

            table = Table("code", "name", "tool", "summary", title="runnercheck rules")
            for rule in all_rules():
                table.add_row(rule.code, rule.name, rule.tool, _summary(rule))
            console.print(table)
        return 0
    try:
        rule = get(args.code)
    except KeyError:
        raise UsageError(f"unknown rule {args.code!r} (see `runnercheck rules`)") from None
    if args.format == "json":
        print(json.dumps(rule.__dict__, indent=2))
        return 0
    text = (
        f"{rule.code} {rule.name} ({rule.tool})\n\n{rule.summary}\n\n"
        f"Why it matters:\n  {rule.why}\n\nBad:\n{_indent(rule.bad)}\n\nGood:\n{_indent(rule.good)}"
    )
    if rule.fixed_by:
        text += f"\n\nFix:\n  {_fix_command(rule)}"
    if rule.fix:
        text += f"\n\nBy hand:\n  {rule.fix}"
    console.print(text, markup=False, highlight=False)
    return 0


def _fix_command(rule: Rule) -> str:
    return f"runnercheck migrate --select {rule.fixed_by}"


def _summary(rule: Rule) -> str:
    """The table's summary cell: the summary, and the codemod that fixes the rule."""
    return f"{rule.summary}\nfix: {_fix_command(rule)}" if rule.fixed_by else rule.summary


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.splitlines())
