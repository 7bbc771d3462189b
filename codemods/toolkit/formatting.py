"""The target's own formatter, run on the lines the migration wrote.

:func:`find_formatter` reads which formatter the target uses from the project
directory above it (the first one holding ``pyproject.toml``, ``setup.cfg``,
``.style.yapf``, ``tox.ini`` or ``.git``):

* yapf: ``.style.yapf``, ``setup.cfg [yapf]``, ``[tool.yapf]`` in ``pyproject.toml``,
  or a ``yapf`` pin in its lint requirements (``requirements-lint.txt``,
  ``requirements-dev.txt``, ``requirements/lint.txt``);
* black: ``[tool.black]`` or a ``black`` pin;
* ruff format: ``[tool.ruff.format]``.

:func:`format_change` runs it on the line ranges of the new text that differ
from the old one (yapf ``lines``, black ``--line-ranges``, ruff format
``--range``), with the style the formatter itself resolves from that directory,
so untouched lines stay byte-identical. A new file is formatted whole. When the
formatter cannot be imported or run, the text keeps the migration's own layout
(:func:`layout_note` says so in one line).

When nothing names a formatter, :func:`infer_formatter` finds the one the files
already follow: the first of yapf's ``pep8``, ``google`` and ``facebook`` styles,
black and ruff format (those installed), each at its own column limit, under which
the directory's files are unchanged, else the one that changes fewest of their lines
when that is at most one line in 200 (a hand edit the formatter was not run on;
:func:`formatter_for` gives the named one, else that one). None fits: the rewritten lines keep the migration's layout,
within the longest line the files have and never beyond 80 (:func:`inferred_limit`).
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# (the readers of configuration files, the diff and the process runner are imported
# where they are used: a tree without a project directory never needs them)

_PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", ".style.yapf", "tox.ini", ".git")
_REQUIREMENTS = ("requirements-lint.txt", "requirements-dev.txt", "requirements/lint.txt")
_PIN = re.compile(r"^\s*(yapf|black)\s*(?:[=<>~!]=?\s*([\w.]+))?", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Formatter:
    #: ``yapf``, ``black`` or ``ruff``
    tool: str
    #: the project directory its style is resolved from
    directory: Path
    #: what names it (``pyproject.toml [tool.yapf]``, ``requirements-dev.txt: yapf==0.32.0``)
    declared_by: str
    #: the pinned version, when a requirements file pins one
    pin: str = ""
    #: inferred (nothing names one): yapf's style (``{based_on_style: pep8}``), and
    #: the column limit it formats to
    style: str = ""
    line_length: int = 0

    @property
    def available(self) -> bool:
        return _importable(self.tool)


def _importable(tool: str) -> bool:
    import importlib.util

    if tool == "yapf":
        return importlib.util.find_spec("yapf") is not None
    return importlib.util.find_spec(tool) is not None


def project_dir(start: Path) -> Path | None:
    here = start if start.is_dir() else start.parent
    here = here.resolve()
    for directory in [here, *here.parents]:
        if any((directory / name).exists() for name in _PROJECT_MARKERS):
            return directory
    return None


def _declared(directory: Path) -> Formatter | None:
    style = directory / ".style.yapf"
    if style.is_file():
        return Formatter("yapf", directory, ".style.yapf")
    pyproject = directory / "pyproject.toml"
    tool: dict[str, object] = {}
    if pyproject.is_file():
        from runnercheck.errors import ConfigError
        from runnercheck.tomlfile import load_toml

        try:
            data = load_toml(pyproject)
        except ConfigError:  # unreadable, not TOML, nested too deep: declares nothing
            data = {}
        found = data.get("tool", {})
        tool = found if isinstance(found, dict) else {}
    if "yapf" in tool:
        return Formatter("yapf", directory, "pyproject.toml [tool.yapf]")
    setup = directory / "setup.cfg"
    if setup.is_file():
        import configparser

        parser = configparser.ConfigParser()
        try:
            parser.read(setup, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            pass
        else:
            if parser.has_section("yapf"):
                return Formatter("yapf", directory, "setup.cfg [yapf]")
    if "black" in tool:
        return Formatter("black", directory, "pyproject.toml [tool.black]")
    ruff = tool.get("ruff")
    if isinstance(ruff, dict) and "format" in ruff:
        return Formatter("ruff", directory, "pyproject.toml [tool.ruff.format]")
    return None


def _pinned(directory: Path) -> Formatter | None:
    for name in _REQUIREMENTS:
        path = directory / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        match = _PIN.search(text)
        if match is not None:
            tool, version = match.group(1).lower(), match.group(2) or ""
            pin = f"{tool}=={version}" if version else tool
            return Formatter(tool, directory, f"{name}: {pin}", version)
    return None


@functools.lru_cache(maxsize=64)
def find_formatter(start: Path) -> Formatter | None:
    """The formatter the project holding ``start`` (a file or directory) uses."""
    directory = project_dir(start)
    if directory is None:
        return None
    declared = _declared(directory)
    pinned = _pinned(directory)
    if declared is not None and pinned is not None and pinned.tool == declared.tool:
        return Formatter(declared.tool, directory, declared.declared_by, pinned.pin)
    return declared or pinned


#: the styles tried when nothing names a formatter, in order: (tool, yapf's base
#: style, the column limit it formats to by default)
_INFERRED = (
    ("yapf", "pep8", 79),
    ("yapf", "google", 80),
    ("yapf", "facebook", 80),
    ("black", "", 88),
    ("ruff", "", 88),
)
#: the files of a directory a style is tried on (all of them, the largest first up to
#: this many bytes; tried smallest first)
_SAMPLE_FILES = 64
_SAMPLE_BYTES = 600_000
#: the line length where nothing names one and no style fits (at most)
FALLBACK_LIMIT = 80
#: a style fits files it leaves unchanged but for at most one line in this many
TOLERANCE = 200


def _sample(directory: Path) -> list[str]:
    """The texts a style is tried on: the largest ``*.py`` files of ``directory``
    (regular files, no links), smallest first."""
    import os

    sized: list[tuple[int, str]] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        try:
            if entry.name.endswith(".py") and entry.is_file(follow_symlinks=False):
                sized.append((entry.stat(follow_symlinks=False).st_size, entry.path))
        except OSError:
            continue
    texts: list[str] = []
    total = 0
    for size, name in sorted(sized, reverse=True)[:_SAMPLE_FILES]:
        if total + size > _SAMPLE_BYTES:
            continue
        try:
            texts.append(Path(name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        total += size
    return [t for t in reversed(texts) if t.strip()]


def _candidate(tool: str, base: str, limit: int, directory: Path) -> Formatter:
    style = f"{{based_on_style: {base}}}" if base else ""
    what = f"{tool} {base}" if base else tool
    return Formatter(
        tool,
        directory,
        f"inferred: the files here are unchanged by {what} (column {limit})",
        style=style,
        line_length=limit,
    )


@functools.lru_cache(maxsize=64)
def infer_formatter(directory: Path) -> Formatter | None:
    """The formatter and style under which the files of ``directory`` are already
    unchanged, or nearly (see the module docstring); None when none is."""
    import difflib

    texts = _sample(directory)
    if not texts:
        return None
    total = sum(t.count("\n") for t in texts)
    # a few lines a hand edit left (at most 1 in 200, no more than the best so far)
    allowed = total // TOLERANCE
    best: tuple[int, Formatter] | None = None
    for tool, base, limit in _INFERRED:
        if not _importable(tool):
            continue
        candidate = _candidate(tool, base, limit, directory)
        changed = 0
        try:
            for text in texts:
                formatted = _format_whole(candidate, directory / "x.py", text)
                if formatted != text:
                    matcher = difflib.SequenceMatcher(
                        None, text.splitlines(), formatted.splitlines(), autojunk=False
                    )
                    changed += sum(
                        max(i2 - i1, j2 - j1)
                        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
                        if tag != "equal"
                    )
                if changed > allowed:
                    break
        except Exception:  # the formatter's own failure: that style does not fit
            continue
        if changed == 0:
            return candidate
        if changed <= allowed and (best is None or changed < best[0]):
            best = (changed, candidate)
            allowed = changed
    if best is None:
        return None
    changed, found = best
    said = found.declared_by.replace("are unchanged by", f"differ in {changed} lines from")
    return Formatter(found.tool, directory, said, style=found.style, line_length=found.line_length)


def formatter_for(path: Path) -> Formatter | None:
    """The formatter the project names (:func:`find_formatter`), else the one its
    files follow (:func:`infer_formatter`, from the directory of ``path``)."""
    found = find_formatter(path)
    if found is not None:
        return found
    directory = (path if path.is_dir() else path.parent).resolve()
    return infer_formatter(directory)


@functools.lru_cache(maxsize=64)
def inferred_limit(directory: Path) -> int:
    """The line length of files nothing configures: the inferred formatter's column
    limit, else the longest line the files have, at most :data:`FALLBACK_LIMIT`."""
    found = infer_formatter(directory)
    if found is not None:
        return found.line_length
    longest = max((len(line) for t in _sample(directory) for line in t.splitlines()), default=0)
    return min(longest, FALLBACK_LIMIT) if longest else FALLBACK_LIMIT


def layout_note(formatter: Formatter | None) -> str | None:
    """One line when the rewritten lines keep the migration's own layout."""
    if formatter is None:
        return None
    if not formatter.available:
        return (
            f"{formatter.tool} (named by {formatter.declared_by}) cannot be imported here: "
            "the rewritten lines keep the migration's own layout"
        )
    if formatter.pin and formatter.tool == "yapf":
        import yapf

        if yapf.__version__ != formatter.pin:
            return (
                f"yapf {yapf.__version__} formats the rewritten lines; the project pins "
                f"{formatter.pin} ({formatter.declared_by})"
            )
    return None


def changed_ranges(old: str | None, new: str) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of ``new`` that are not lines of ``old``."""
    new_lines = new.splitlines()
    if old is None:
        return [(1, len(new_lines))] if new_lines else []
    import difflib

    matcher = difflib.SequenceMatcher(None, old.splitlines(), new_lines, autojunk=False)
    return [
        (j1 + 1, j2)
        for tag, _i1, _i2, j1, j2 in matcher.get_opcodes()
        if tag in ("replace", "insert") and j2 > j1
    ]


def format_change(path: Path, old: str | None, new: str) -> str:
    """``new`` with the project's formatter run on the lines that differ from ``old``
    (all of it when ``old`` is None); ``new`` unchanged when there is no formatter,
    it cannot run, or it fails on the text."""
    formatter = formatter_for(path)
    if formatter is None or not formatter.available:
        return new
    ranges = _with_blank_lines_above(changed_ranges(old, new), new)
    if not ranges:
        return new
    try:
        if formatter.tool == "yapf":
            return _yapf(formatter, new, ranges)
        if formatter.tool == "black":
            return _black(formatter, path, new, ranges)
        return _ruff(formatter, path, new, ranges)
    except Exception:  # the formatter's own failure keeps the migration's layout
        return new


def _with_blank_lines_above(ranges: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    """Each range from the blank lines right above it: the formatter decides how many
    blank lines come before a new statement (yapf leaves those outside its ``lines``
    alone, so a new module-level ``TypeVar`` after a variable kept two)."""
    lines = text.splitlines()
    out: list[tuple[int, int]] = []
    for start, end in ranges:
        while start > 1 and not lines[start - 2].strip():
            start -= 1
        if out and start <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def _format_whole(formatter: Formatter, path: Path, text: str) -> str:
    """``text`` formatted whole (a style tried on a file)."""
    if formatter.tool == "yapf":
        return _yapf(formatter, text, None)
    if formatter.tool == "black":
        return _black(formatter, path, text, [])
    return _ruff(formatter, path, text, [])


def _yapf(formatter: Formatter, text: str, ranges: list[tuple[int, int]] | None) -> str:
    import warnings

    with warnings.catch_warnings():  # yapf 0.32 imports lib2to3
        warnings.simplefilter("ignore", (DeprecationWarning, PendingDeprecationWarning))
        from yapf.yapflib import file_resources, yapf_api

        style = formatter.style or file_resources.GetDefaultStyleForDir(str(formatter.directory))
        formatted, _changed = yapf_api.FormatCode(text, style_config=style, lines=ranges)
    return str(formatted)


def _length(formatter: Formatter) -> list[str]:
    """The column limit of an inferred black or ruff (a named one reads its own)."""
    if formatter.line_length and formatter.tool != "yapf":
        return ["--line-length", str(formatter.line_length)]
    return []


def _black(formatter: Formatter, path: Path, text: str, ranges: list[tuple[int, int]]) -> str:
    args = [sys.executable, "-m", "black", "-q", *_length(formatter), "--stdin-filename", str(path)]
    for start, end in ranges:
        args += ["--line-ranges", f"{start}-{end}"]
    return _run([*args, "-"], text, formatter.directory)


def _ruff(formatter: Formatter, path: Path, text: str, ranges: list[tuple[int, int]]) -> str:
    base = [sys.executable, "-m", "ruff", "format", *_length(formatter)]
    base += ["--stdin-filename", str(path)]
    if not ranges:
        return _run([*base, "-"], text, formatter.directory)
    # one range per call, bottom up, so the earlier ranges keep their line numbers
    for start, end in sorted(ranges, reverse=True):
        text = _run([*base, "--range", f"{start}:{end}", "-"], text, formatter.directory)
    return text


def _run(args: list[str], text: str, cwd: Path) -> str:
    import subprocess

    proc = subprocess.run(args, input=text, capture_output=True, text=True, cwd=cwd, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-300:])
    return proc.stdout
