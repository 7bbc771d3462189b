"""The rule catalog: unique codes and names, complete docs, the `rules` command."""

from __future__ import annotations

import re
import subprocess
import sys

from runnercheck import catalog
from runnercheck.commands.rules import all_rules, get


def test_codes_and_names_unique_and_well_formed() -> None:
    codes = [rule.code for rule in all_rules()]
    names = [rule.name for rule in all_rules() if rule.tool != "migrate"]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in all_rules():
        assert re.fullmatch(r"(RC|MIG)\d{3}", rule.code), rule.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name), rule.name
        assert rule.tool in ("check", "mypy", "fuzz", "migrate")
        assert rule.code.startswith("MIG") == (rule.tool == "migrate")
        for text in (rule.summary, rule.why, rule.bad, rule.good):
            assert text.strip(), rule.code


def test_lookup_by_code_and_name() -> None:
    assert get("rc101") is get("recursive-from-dict")
    assert get("RC201") is catalog.get("runner-input-protocol")
    assert get("mig105").name == "unrecognised-shape"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", *args], capture_output=True, text=True, timeout=60
    )


def test_rules_command_lists_every_rule() -> None:
    proc = run_cli("rules", "--format", "markdown")
    assert proc.returncode == 0
    for rule in all_rules():
        assert f"| {rule.code} | `{rule.name}` |" in proc.stdout


def test_rules_command_one_rule() -> None:
    proc = run_cli("rules", "RC106")
    assert proc.returncode == 0
    assert "paired-broadcast" in proc.stdout
    assert "Bad:" in proc.stdout and "Good:" in proc.stdout


def test_rules_command_says_what_to_change_by_hand_for_a_refusal() -> None:
    proc = run_cli("rules", "MIG105")
    assert proc.returncode == 0
    assert f"By hand:\n  {get('MIG105').fix}" in proc.stdout
    assert get("MIG105").fix
    assert "By hand:" not in run_cli("rules", "RC106").stdout


def test_rules_command_unknown_rule() -> None:
    proc = run_cli("rules", "RC999")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip() == "runnercheck: error: unknown rule 'RC999' (see `runnercheck rules`)"
    )
