"""The mypy plugin's own test cases under the mypy of the running interpreter.

Run by ``scripts/mypy_versions.sh`` with the Python of a virtual environment that holds
one mypy release and runnercheck (installed with ``--no-deps``). It copies the fixture
projects of ``tests/mypy_plugin/fixtures`` to a temporary directory, runs that mypy
with the plugin on them (the ``mypy`` and ``runnercheck`` commands of the environment)
and compares the plugin's errors with ``tests/mypy_plugin/expected``, which the test
suite pins under the newest mypy. An error is its file, line and code: every one
expected must be reported, and no other (a message may word a type as that mypy's
typeshed does; such differences are listed, not failed).

* ``cases``: every situation of the fixture ``cases`` (``mypy engine cases``);
* ``gate``: the same through ``runnercheck mypy --disable-error-code
  runner-input-unbound`` (a plugin code on the command line);
* ``pyproject``: settings from ``[tool.runnercheck]``;
* ``kinds``: classes mypy's class hook never shows (custom metaclasses, classes in
  functions, a module whose only class has a metaclass, one whose top level ends in
  ``sys.exit()``), cold and incremental;
* ``incremental``: an edit to an input class re-checks runners in modules that do
  not import it (the plugin's indirect dependencies), then a dict value.

Exit status: 0 as under the newest mypy, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mypy_plugin.gate import contract_codes

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "mypy_plugin" / "fixtures"
EXPECTED = REPO / "tests" / "mypy_plugin" / "expected"
BIN = Path(sys.executable).parent

#: The plugin's error codes (the names of the catalog's RC2xx rules).
CODES = contract_codes()
_ERROR = re.compile(
    r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.*)  \[(?P<code>[a-z-]+)\]$"
)
#: What mypy before 1.19 prints for the plugin's codes in a configuration file (it parses
#: the file before loading plugins; the plugin applies those keys itself).
_EARLY_CODES = re.compile(r"(?:dis|en)able_error_code: Invalid error code\(s\): (?P<codes>.*)$")

Key = tuple[str, int, str]


def plugin_errors(text: str) -> tuple[Counter[Key], dict[Key, list[str]]]:
    """The plugin's errors in mypy's output: (file, line, code) counted, and messages."""
    found: Counter[Key] = Counter()
    messages: dict[Key, list[str]] = {}
    for line in text.splitlines():
        match = _ERROR.match(line)
        if match is None or match["code"] not in CODES:
            continue
        key = (match["path"].replace(os.sep, "/"), int(match["line"]), match["code"])
        found[key] += 1
        messages.setdefault(key, []).append(match["message"])
    return found, messages


def expected(name: str, drop: frozenset[str] = frozenset()) -> str:
    text = (EXPECTED / name).read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not any(f"[{c}]" in line for c in drop))


class Check:
    """One check's runs and what went wrong in them."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.errors = 0

    def run(self, command: str, *args: str, status: int | None = None) -> str:
        proc = subprocess.run(
            [str(BIN / command), *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=300,
            env={k: v for k, v in os.environ.items() if not k.startswith("MYPY")},
        )
        shown = f"{command} {' '.join(args)}"
        if status is not None and proc.returncode != status:
            self.problems.append(f"{shown}: exit {proc.returncode}, expected {status}")
        for line in proc.stderr.splitlines():
            early = _EARLY_CODES.search(line)
            codes = {c.strip() for c in early["codes"].split(",")} if early else set()
            if not codes or not codes <= CODES:
                self.problems.append(f"{shown}: stderr: {line}")
        return proc.stdout

    def compare(self, what: str, output: str, want: str) -> None:
        got, got_text = plugin_errors(output)
        wanted, wanted_text = plugin_errors(want)
        self.errors += sum(got.values())
        for key in sorted((wanted - got).elements()):
            self.problems.append(f"{what}: missing {key[0]}:{key[1]} [{key[2]}]")
        for key in sorted((got - wanted).elements()):
            self.problems.append(f"{what}: extra {key[0]}:{key[1]} [{key[2]}] {got_text[key][0]}")
        for key in sorted(set(got) & set(wanted)):
            if sorted(got_text[key]) != sorted(wanted_text[key]):
                self.notes.append(f"{key[0]}:{key[1]} words it {got_text[key]}")


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    if old not in text:
        raise AssertionError(f"{old!r} not in {path}")
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def check_cases(check: Check) -> None:
    out = check.run("mypy", "engine", "cases", status=1)
    check.compare("mypy engine cases", out, expected("cases.txt"))


def check_gate(check: Check) -> None:
    out = check.run(
        "runnercheck",
        "mypy",
        "--disable-error-code",
        "runner-input-unbound",
        "engine",
        "cases",
        status=1,
    )
    check.compare("runnercheck mypy", out, expected("cases.txt", {"runner-input-unbound"}))


def check_pyproject(check: Check) -> None:
    out = check.run("mypy", "wire", status=1)
    check.compare("mypy wire", out, expected("pyproject.txt"))


def check_kinds(check: Check) -> None:
    files = ("contract.py", "constrained.py", "metaclasses.py", "only_meta.py", "exits.py")
    out = check.run("mypy", *files, status=1)
    check.compare("cold", out, expected("kinds.txt"))
    edit(check.root / "only_meta.py", "A module", "The module")
    out = check.run("mypy", *files, status=1)
    check.compare("only_meta.py edited", out, expected("kinds.txt"))


def check_incremental(check: Check) -> None:
    files = ("base.py", "inputs.py", "mid.py", "final.py")
    check.run("mypy", *files, status=0)
    inputs = check.root / "inputs.py"
    edit(
        inputs,
        "    @classmethod\n    def from_broadcasted_tensor_dict(cls,",
        "    def from_broadcasted_tensor_dict(self,",
    )
    edit(inputs, "return cls(tensor_dict", "return type(self)(tensor_dict")
    out = check.run("mypy", *files, status=1)
    check.compare("inputs.py edited", out, expected("incremental_protocol.txt"))
    edit(
        inputs,
        "    def from_broadcasted_tensor_dict(self,",
        "    @classmethod\n    def from_broadcasted_tensor_dict(cls,",
    )
    edit(inputs, "return type(self)(tensor_dict", "return cls(tensor_dict")
    edit(
        inputs,
        '        return {"tokens": self.tokens}',
        '        callback = print\n        return {"tokens": self.tokens, "callback": callback}',
    )
    out = check.run("mypy", *files, status=1)
    check.compare("inputs.py edited again", out, expected("incremental_values.txt"))


#: name -> (fixture, the check)
CHECKS: dict[str, tuple[str, Callable[[Check], None]]] = {
    "cases": ("cases", check_cases),
    "gate": ("cases", check_gate),
    "pyproject": ("pyproject", check_pyproject),
    "kinds": ("kinds", check_kinds),
    "incremental": ("incremental", check_incremental),
}


def run_check(name: str, tmp: Path) -> tuple[Check, float]:
    fixture, run = CHECKS[name]
    root = tmp / name
    shutil.copytree(FIXTURES / fixture, root, ignore=shutil.ignore_patterns("__pycache__"))
    check = Check(name, root)
    begun = time.perf_counter()
    try:
        run(check)
    except (AssertionError, OSError, subprocess.SubprocessError) as exc:
        check.problems.append(f"{type(exc).__name__}: {exc}")
    return check, time.perf_counter() - begun


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checks", nargs="*", help=f"of {', '.join(CHECKS)} (default: all)")
    parser.add_argument("-v", "--verbose", action="store_true", help="list wording differences")
    parser.add_argument(
        "-j", "--jobs", type=int, default=2, help="checks run side by side (default 2)"
    )
    options = parser.parse_args()
    unknown = [name for name in options.checks if name not in CHECKS]
    if unknown:
        parser.error(f"unknown check: {', '.join(unknown)}")
    from mypy.version import __version__

    failed = 0
    started = time.perf_counter()
    names = options.checks or list(CHECKS)
    with tempfile.TemporaryDirectory(prefix="runnercheck-mypy-") as tmp:
        # the checks run side by side (each its own copy and cache), reported in order
        with ThreadPoolExecutor(max_workers=options.jobs) as pool:
            done = pool.map(lambda name: run_check(name, Path(tmp)), names)
            for check, took in done:
                verdict = "FAILED" if check.problems else "ok"
                worded = f", {len(check.notes)} worded otherwise" if check.notes else ""
                print(
                    f"mypy {__version__} {check.name:<11} {verdict:<6} {check.errors} plugin "
                    f"errors{worded} ({took:.1f} s)",
                    flush=True,
                )
                for problem in check.problems:
                    print(f"    {problem}")
                for note in check.notes if options.verbose else ():
                    print(f"    note: {note}")
                failed += bool(check.problems)
    total = time.perf_counter() - started
    print(f"mypy {__version__}: {'FAILED' if failed else 'ok'} ({total:.1f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
