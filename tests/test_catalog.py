"""The rule catalog: unique codes and names, complete docs, the `rules` command."""

from __future__ import annotations

import re
import subprocess
import sys

from runnercheck import catalog


def test_codes_and_names_unique_and_well_formed() -> None:
    codes = [rule.code for rule in catalog.RULES]
    names = [rule.name for rule in catalog.RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in catalog.RULES:
        assert re.fullmatch(r"RC\d{3}", rule.code), rule.code
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", rule.name), rule.name
        assert rule.engine in ("check", "mypy", "fuzz")
        for text in (rule.summary, rule.why, rule.bad, rule.good):
            assert text.strip(), rule.code


def test_lookup_by_code_and_name() -> None:
    assert catalog.get("rc101") is catalog.get("recursive-from-dict")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", *args], capture_output=True, text=True, timeout=60
    )


def test_rules_command_lists_every_rule() -> None:
    proc = run_cli("rules", "--format", "markdown")
    assert proc.returncode == 0
    for rule in catalog.RULES:
        assert f"| {rule.code} | `{rule.name}` |" in proc.stdout


def test_rules_command_one_rule() -> None:
    proc = run_cli("rules", "RC106")
    assert proc.returncode == 0
    assert "paired-broadcast" in proc.stdout
    assert "Bad:" in proc.stdout and "Good:" in proc.stdout


def test_rules_command_unknown_rule() -> None:
    proc = run_cli("rules", "RC999")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == "runnercheck: error: unknown rule 'RC999' (see `runnercheck rules`)"
    )
