"""The rule catalog: unique codes and names, complete docs, the `rules` command."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from codemods.framework.registry import CODEMODS
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


def test_the_index_of_codes_is_the_entries() -> None:
    """``CODES`` (what ``select``/``ignore`` accept without importing any entry) lists
    every entry the registry collects, with its name and tool, in the same order."""
    assert list(catalog.CODES.items()) == [(r.code, (r.name, r.tool)) for r in all_rules()]


def test_each_tool_keeps_its_entries_beside_what_reports_them() -> None:
    from codemods.reasons import RULES as MIGRATE
    from mypy_plugin.rules import RULES as PLUGIN
    from runnercheck.commands.fuzz import RULES as FUZZ
    from runnercheck.rules import RULES as CHECK

    assert {r.tool for r in CHECK} == {"check"} and {r.tool for r in PLUGIN} == {"mypy"}
    assert {r.tool for r in FUZZ} == {"fuzz"} and {r.tool for r in MIGRATE} == {"migrate"}
    assert len(CHECK) + len(PLUGIN) + len(FUZZ) + len(MIGRATE) == len(all_rules())


def test_every_code_a_codemod_fixes_is_a_rule_that_names_it() -> None:
    declared = {code: codemod.name for codemod in CODEMODS for code in codemod.fixes}
    assert declared, "no codemod declares the codes it fixes"
    for code, name in declared.items():
        assert code in catalog.CODES, f"{name} fixes {code}, which is no rule"
        assert get(code).fixed_by == name
    assert {r.code for r in all_rules() if r.fixed_by} == set(declared)


def test_the_rules_command_shows_the_fix_beside_each_rule() -> None:
    table = run_cli("rules").stdout
    listing = json.loads(run_cli("rules", "--format", "json").stdout)
    fixes = {entry["code"]: entry["fixed_by"] for entry in listing}
    for codemod in CODEMODS:
        assert f"--select {codemod.name}" in " ".join(table.replace("│", " ").split())
        for code in codemod.fixes:
            assert fixes[code] == codemod.name
            one = run_cli("rules", code).stdout
            assert f"Fix:\n  runnercheck migrate --select {codemod.name}\n" in one
            assert json.loads(run_cli("rules", code, "--format", "json").stdout)["fixed_by"] == (
                codemod.name
            )
    assert fixes["RC101"] == "" and "Fix:" not in run_cli("rules", "RC101").stdout


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
