"""The rule registry: what every code of every tool means, and where its entry lives.

A :class:`Rule` holds a code, its name, the tool that reports it, a one-line summary,
why it matters, and a bad and a good example that run as tests (a bad example
produces exactly its code, a good one nothing). Each entry lives beside what reports
it:

* ``check``'s rules in their modules of :mod:`runnercheck.rules` (``RULE``), its own
  errors (RC001, RC002) in :mod:`runnercheck.workspace.reading`;
* ``fuzz``'s (RC3xx) in :mod:`runnercheck.commands.fuzz`;
* the mypy plugin's (RC2xx; ``name`` is the mypy error code) in :mod:`mypy_plugin.rules`;
* ``migrate``'s reasons (MIGxxx) in :mod:`codemods.reasons`, and which codemod fixes
  which code in :mod:`codemods.framework.registry`.

This module sits below all of them: it holds :data:`CODES` (every code, name and
tool: what ``select``, ``ignore`` and the suppressions may name, known without
importing any entry), and :func:`all_rules` collects the entries on first use:
runnercheck's own from :data:`MODULES`, those of the packages that build on runnercheck
from the entry points of the group :data:`GROUP` (``pyproject.toml``), as
:mod:`runnercheck.commands.registry` finds their commands. ``runnercheck rules`` lists
them all.

An example of several files separates them with ``# file: NAME.py`` lines.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Literal

Tool = Literal["check", "mypy", "fuzz", "migrate"]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    tool: Tool
    summary: str
    why: str
    bad: str
    good: str
    #: What to change by hand when the tool leaves the code alone (migrate's refusals).
    fix: str = ""
    #: False when the examples only illustrate (the tool reports the code itself, on
    #: input no example can hold, such as an unreadable file or an internal error).
    runnable: bool = True
    #: The codemod that fixes what the rule reports (``runnercheck migrate --select
    #: NAME``): set by the registry from the codemods' own declarations.
    fixed_by: str = ""


def _variant(text: str, *edits: tuple[str, str]) -> str:
    """``text`` with each ``old`` (present exactly once) replaced by ``new``: one example
    made from another (a bad one from a good one, or the fix of a bad one), so the source
    shows exactly what differs between them."""
    for old, new in edits:
        if text.count(old) != 1:
            raise ValueError(f"catalog example edit does not match exactly once: {old!r}")
        text = text.replace(old, new)
    return text


#: Every code, its name and the tool that reports it, in the order ``runnercheck rules``
#: lists them: what a configuration, a baseline or an inline comment may name, known
#: without importing the modules that hold the entries (``check`` starts without the
#: plugin's, ``migrate``'s or ``fuzz``'s). ``tests/test_catalog.py`` keeps it equal to
#: the entries :func:`all_rules` collects.
CODES: dict[str, tuple[str, Tool]] = {
    "RC001": ("syntax-error", "check"),
    "RC002": ("internal-error", "check"),
    "RC003": ("half-applied-migration", "check"),
    "RC101": ("recursive-from-dict", "check"),
    "RC102": ("unaccepted-broadcast-key", "check"),
    "RC103": ("unbroadcast-field", "check"),
    "RC104": ("parent-dict-drift", "check"),
    "RC105": ("collective-in-prepare", "check"),
    "RC106": ("paired-broadcast", "check"),
    "RC107": ("missing-contract-method", "check"),
    "RC108": ("unpicklable-broadcast-value", "check"),
    "RC109": ("merged-dict-leak", "check"),
    "RC110": ("wrapper-control-broadcast", "check"),
    "RC111": ("unsent-broadcast-key", "check"),
    "RC112": ("role-schedules-differ", "check"),
    "RC201": ("runner-input-protocol", "mypy"),
    "RC202": ("from-dict-fixed-return", "mypy"),
    "RC203": ("runner-input-covariance", "mypy"),
    "RC204": ("execute-input-mismatch", "mypy"),
    "RC205": ("unbroadcastable-value", "mypy"),
    "RC206": ("runnercheck-internal", "mypy"),
    "RC207": ("runner-input-unbound", "mypy"),
    "RC301": ("roundtrip-lost-field", "fuzz"),
    "RC302": ("roundtrip-exception", "fuzz"),
    "RC303": ("roundtrip-altered-value", "fuzz"),
    "RC304": ("roundtrip-nondeterministic", "fuzz"),
    "RC305": ("roundtrip-mutates-sender", "fuzz"),
    "RC306": ("rank-failure", "fuzz"),
    "MIG003": ("symlink-outside", "migrate"),
    "MIG004": ("read-only", "migrate"),
    "MIG005": ("changed-on-disk", "migrate"),
    "MIG006": ("write-failed", "migrate"),
    "MIG007": ("half-applied", "migrate"),
    "MIG101": ("extra-broadcast", "migrate"),
    "MIG102": ("untraceable-key", "migrate"),
    "MIG103": ("missing-runner", "migrate"),
    "MIG104": ("missing-worker", "migrate"),
    "MIG105": ("unrecognised-shape", "migrate"),
    "MIG106": ("non-driver-state", "migrate"),
    "MIG107": ("key-collision", "migrate"),
    "MIG108": ("name-taken", "migrate"),
    "MIG109": ("unmigrated-caller", "migrate"),
    "MIG110": ("verify-failed", "migrate"),
    "MIG111": ("non-driver-value-changed", "migrate"),
    "MIG112": ("caller-not-rewritten", "migrate"),
    "MIG199": ("internal-error", "migrate"),
    "MIG201": ("parent-not-found", "migrate"),
    "MIG202": ("order-dependent", "migrate"),
    "MIG203": ("drifted-copy", "migrate"),
    "MIG204": ("control-values-unplaced", "migrate"),
}


#: Codes a configuration, a baseline or an inline comment may still name, and the code
#: each one is now: ``migrate`` reports a file it cannot read or parse as ``check``
#: does.
ALIASES: dict[str, str] = {"MIG001": "RC001", "MIG002": "RC001"}


def canonical(code: str) -> str:
    """The code ``code`` names (itself, or the code an alias stands for)."""
    return ALIASES.get(code.upper(), code)


def rule_words() -> tuple[set[str], set[str]]:
    """Every code and every name a ``select``/``ignore`` entry may use (a migrate reason
    is named by its code only)."""
    names = {name for name, tool in CODES.values() if tool != "migrate"}
    return set(CODES) | set(ALIASES), names


def code_of(code_or_name: str) -> str:
    """The code ``code_or_name`` names (a code, an alias or a rule's name); KeyError
    otherwise. Reads :data:`CODES` alone."""
    key = code_or_name.strip()
    code = canonical(key.upper())
    if code in CODES:
        return code
    for code, (name, tool) in CODES.items():
        if tool != "migrate" and name == key.lower():
            return code
    raise KeyError(code_or_name)


def name_of(code: str) -> str:
    """The name of the rule ``code``; KeyError for an unknown code."""
    return CODES[canonical(code)][0]


def lookup(rules: tuple[Rule, ...], code_or_name: str) -> Rule:
    """A rule of ``rules`` by code (``RC101``) or name (``recursive-from-dict``);
    KeyError otherwise."""
    key = code_or_name.strip()
    code = canonical(key.upper())
    for rule in rules:
        if rule.code == code or (rule.tool != "migrate" and rule.name == key.lower()):
            return rule
    raise KeyError(code_or_name)


#: runnercheck's own modules that hold entries (each defines ``RULES``), imported on
#: first use.
MODULES = ("runnercheck.rules", "runnercheck.commands.fuzz")

#: The entry-point group of the modules outside runnercheck that hold entries: each
#: defines ``RULES``, and may define ``FIXES`` (code -> the codemod that fixes it).
GROUP = "runnercheck.rules"


def _entry_modules() -> list[ModuleType]:
    """The modules the group's entry points name, the first of each name on
    ``sys.path`` (as :mod:`runnercheck.commands.registry` reads its group)."""
    from importlib.metadata import distributions

    found: dict[str, ModuleType] = {}
    for distribution in distributions():
        for entry in distribution.entry_points.select(group=GROUP):
            if entry.name not in found:
                found[entry.name] = entry.load()
    return list(found.values())


@functools.cache
def all_rules() -> tuple[Rule, ...]:
    """Every entry, in the order of :data:`CODES` (an installed distribution's own codes
    after them), each with the codemod that fixes it."""
    modules = [importlib.import_module(name) for name in MODULES] + _entry_modules()
    fixes: dict[str, str] = {}
    for module in modules:
        fixes.update(getattr(module, "FIXES", {}))
    rules = [replace(r, fixed_by=fixes.get(r.code, "")) for m in modules for r in m.RULES]
    order = {code: index for index, code in enumerate(CODES)}
    return tuple(sorted(rules, key=lambda rule: order.get(rule.code, len(order))))


def get(code_or_name: str) -> Rule:
    """Any rule by code or name; KeyError otherwise."""
    return lookup(all_rules(), code_or_name)


def for_tool(tool: Tool) -> tuple[Rule, ...]:
    return tuple(rule for rule in all_rules() if rule.tool == tool)


def markdown_table(rules: tuple[Rule, ...]) -> str:
    """The README's rule table."""
    lines = ["| code | name | tool | summary |", "| --- | --- | --- | --- |"]
    for rule in rules:
        lines.append(f"| {rule.code} | `{rule.name}` | {rule.tool} | {rule.summary} |")
    return "\n".join(lines)
