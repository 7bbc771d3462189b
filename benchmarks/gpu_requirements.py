"""What the GPU check needs installed, and what a given machine lacks of it (stdlib only).

Needed: runnercheck's runtime dependencies (``[project] dependencies``, plus the
``fuzz`` extra when pyproject.toml has one) and pytest from the ``dev`` extra, except
the static tools: libcst and mypy serve ``check``, ``migrate`` and the mypy plugin,
never ``runnercheck fuzz`` or the GPU tests (tests/fuzz/test_without_static_tools.py
holds fuzz to that). pydantic stays: ``runnercheck.config`` imports it to validate a
``[tool.runnercheck]`` table, and only when the project read has one.

Usage (prints one requirement a line)::

    python benchmarks/gpu_requirements.py needed [--all]
    python benchmarks/gpu_requirements.py missing --present LIST [--all]
    python benchmarks/gpu_requirements.py present-of PYTHON   # what an interpreter has

``--all`` keeps the static tools. LIST names one distribution a line (``#`` comments).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
#: Dependencies only the static tools (check, migrate, the mypy plugin) import.
STATIC_ONLY = frozenset({"libcst", "mypy"})
#: What the GPU check runs besides runnercheck itself, taken from the ``dev`` extra.
CHECK_TOOLS = frozenset({"pytest"})

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return normalize(match.group(1))


def needed(pyproject: Path = REPO / "pyproject.toml", static: bool = False) -> list[str]:
    """The requirements the GPU check needs, as pyproject.toml spells them."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {})
    requirements = list(project.get("dependencies", [])) + list(extras.get("fuzz", []))
    requirements += [r for r in extras.get("dev", []) if requirement_name(r) in CHECK_TOOLS]
    seen: set[str] = set()
    result = []
    for requirement in requirements:
        name = requirement_name(requirement)
        if name in seen or (name in STATIC_ONLY and not static):
            continue
        seen.add(name)
        result.append(requirement)
    return result


def read_list(path: Path) -> set[str]:
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(requirement_name(line))
    return names


def present_of(python: str) -> set[str]:
    """The distributions an interpreter can import (``pip list``)."""
    out = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {requirement_name(line) for line in out.splitlines() if line.strip()}


def missing(requirements: list[str], present: set[str]) -> list[str]:
    return [r for r in requirements if requirement_name(r) not in present]


def unsatisfied(requirements: list[str]) -> list[str]:
    """The requirements this interpreter does not meet: absent, or another version (the
    version is checked where ``packaging`` or pip's copy of it can be imported)."""
    try:
        module: Any = importlib.import_module("packaging.requirements")
    except ImportError:
        try:  # pip's own copy, wherever pip is
            module = importlib.import_module("pip._vendor.packaging.requirements")
        except ImportError:
            module = None
    result = []
    for text in requirements:
        try:
            version = importlib.metadata.version(requirement_name(text))
        except importlib.metadata.PackageNotFoundError:
            result.append(text)
            continue
        if module is not None and not module.Requirement(text).specifier.contains(
            version, prereleases=True
        ):
            result.append(text)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("needed", "missing"):
        command = sub.add_parser(name)
        command.add_argument("--all", action="store_true", help="keep libcst and mypy")
        if name == "missing":
            command.add_argument("--present", type=Path, required=True)
    sub.add_parser("present-of").add_argument("python")
    args = parser.parse_args(argv)
    if args.command == "present-of":
        lines = sorted(present_of(args.python))
    else:
        lines = needed(static=args.all)
        if args.command == "missing":
            lines = missing(lines, read_list(args.present))
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
