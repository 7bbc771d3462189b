"""Reading a path set: the files, their bytes, the prefilter and one ``ast`` parse each.

``check`` reads through :func:`discover` and :func:`analyse_all` (the files found under
the given paths, skipped by the byte prefilter when they cannot matter, their facts
extracted in parallel with ``jobs > 1``); ``migrate`` reads its collected files with
:func:`read_all` and parses each with :func:`parse_module`. A file that cannot be read
(unreadable, over ``max_file_size``, too large to analyse) or parsed (a syntax error,
nested deeper than CPython compiles) is one failure with the code of
:data:`CANNOT_READ`; an exception while extracting a file's facts is
:data:`INTERNAL_ERROR`, for that file only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from runnercheck import deep
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.prefilter import class_bases, might_matter, needles
from runnercheck.catalog import Rule
from runnercheck.contract import Contract
from runnercheck.files import (
    DEFAULT_MAX_FILE_SIZE,
    MAX_ANALYSED_SIZE,
    ReadError,
    Walk,
    read_source,
    too_large_to_analyse,
    walk,
)
from runnercheck.jobs import worker_count

if TYPE_CHECKING:  # the cache's own imports cost start-up time under --no-cache
    from runnercheck.workspace.cache import FactsCache

#: A file that cannot be read or parsed.
CANNOT_READ_RULE = Rule(
    code="RC001",
    name="syntax-error",
    tool="check",
    summary="A source file could not be read or parsed; it was not analysed.",
    why="A file the tools cannot read may hide any other finding; the run reports it and exits non-zero instead of silently skipping it. `migrate` reports the same code for a file it cannot read or parse, and leaves that file alone (MIG001 and MIG002, its codes before, are still accepted in `ignore`, `select`, `per_file_ignores`, inline comments and baselines, as RC001).",
    bad="""\
def prepare_model_input(self, seq_group_metadata_list:
    return None
""",
    good="""\
def prepare_model_input(self, seq_group_metadata_list):
    return None
""",
)
CANNOT_READ = CANNOT_READ_RULE.code

#: An internal error while reading a file's facts (or while a rule of ``check`` judges
#: it).
INTERNAL_ERROR_RULE = Rule(
    code="RC002",
    name="internal-error",
    tool="check",
    summary="The checker failed on this file or class; it was not (fully) analysed.",
    why="An internal error must not hide the rest of the run: it is reported for the file it happened in, the other files are still checked, and the run exits non-zero.",
    bad="(reported by runnercheck itself, with the exception)",
    good="(no such finding)",
    runnable=False,
)
INTERNAL_ERROR = INTERNAL_ERROR_RULE.code


# --------------------------------------------------------------------- the files


@dataclass(frozen=True)
class SourceFile:
    path: Path
    #: The path as findings show it (relative when the argument was relative).
    display: str
    #: The contents to read instead of the file's (a buffer given on stdin).
    data: bytes | None = None


def discover(
    paths: Sequence[str | Path], exclude: Sequence[str] = (), root: Path | None = None
) -> tuple[list[SourceFile], Walk]:
    """Python files under ``paths`` (directories recursively), minus ``exclude`` globs,
    with the walk's problems and the journals it met.

    Raises :class:`UsageError` naming the first path that does not exist."""
    walked = walk(paths, suffixes=(".py", ".pyi"), exclude=exclude, root=root, links="read")
    return [SourceFile(s.path, s.display) for s in walked.files], walked


def read_all(
    files: Iterable[Path], limit: int = DEFAULT_MAX_FILE_SIZE
) -> Iterator[tuple[Path, bytes | OSError]]:
    """Each file's bytes, or the :class:`ReadError` that says why it was not read."""
    for path in files:
        try:
            yield path, read_source(path, limit)
        except ReadError as exc:
            yield path, exc


# ------------------------------------------------------------------- one parse


class ParseFailure(NamedTuple):
    """Why a file's bytes give no tree: the line (0 when none applies) and a message."""

    line: int
    message: str


def parse_module(data: bytes, path: Path) -> ast.Module | ParseFailure:
    """``data`` parsed once with ``ast``, or why it cannot be analysed (a syntax error,
    nesting deeper than CPython compiles, a parser that gives up)."""
    try:
        tree = ast.parse(data, filename=str(path))
    except SyntaxError as exc:
        return ParseFailure(exc.lineno or 0, f"does not parse: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return ParseFailure(0, f"does not parse: {deep.parse_failure(exc)}")
    too_deep = deep.too_deep(tree, data)
    if too_deep is not None:
        return ParseFailure(0, too_deep)
    return tree


# ------------------------------------------------------------ facts, per file


@dataclass
class FileOutcome:
    display: str
    facts: ModuleFacts | None = None
    #: The file on disk (None for in-memory sources).
    path: Path | None = None
    #: Base names of a file the prefilter skipped (for the second round).
    skipped_bases: frozenset[str] | None = None
    error: str | None = None
    #: CANNOT_READ for a file that cannot be read, INTERNAL_ERROR for an internal error.
    error_code: str = INTERNAL_ERROR


def analyse_file(
    source: SourceFile,
    contract: Contract,
    force: bool = False,
    limit: int = DEFAULT_MAX_FILE_SIZE,
    cache: FactsCache | None = None,
) -> FileOutcome:
    """Read one file and extract its facts (or take them from ``cache``), or say why it
    was skipped or failed."""
    try:
        data = source.data if source.data is not None else read_source(source.path, limit)
    except ReadError as exc:
        return FileOutcome(source.display, error=str(exc), error_code=CANNOT_READ)
    try:
        if not force and not might_matter(data, needles(contract)):
            return FileOutcome(source.display, skipped_bases=class_bases(data))
        if len(data) > MAX_ANALYSED_SIZE:
            return FileOutcome(
                source.display, error=too_large_to_analyse(len(data)), error_code=CANNOT_READ
            )
        if cache is not None:
            facts = cache.facts(data, source.display, contract)
        else:
            facts = extract_source(data, source.display, contract)
        return FileOutcome(source.display, facts=facts, path=source.path)
    except Exception as exc:  # an internal error is reported for this file only
        return FileOutcome(source.display, error=f"internal error: {deep.describe(exc)}")


def _analyse_chunk(
    chunk: list[SourceFile],
    contract: Contract,
    force: bool,
    limit: int = DEFAULT_MAX_FILE_SIZE,
    cache: FactsCache | None = None,
) -> list[FileOutcome]:
    """A chunk of files, in a thread that can walk deeply nested code (runnercheck.deep)."""
    return deep.call(lambda: [analyse_file(s, contract, force, limit, cache) for s in chunk])


def analyse_all(
    sources: list[SourceFile],
    contract: Contract,
    jobs: int,
    force: bool = False,
    limit: int = DEFAULT_MAX_FILE_SIZE,
    cache: FactsCache | None = None,
) -> list[FileOutcome]:
    """:func:`analyse_file` for each of ``sources``, in order; in ``jobs`` processes
    when there are enough of them."""
    workers = worker_count(jobs, len(sources) // 4)
    if workers <= 1 or len(sources) < 8:
        return _analyse_chunk(sources, contract, force, limit, cache)
    from concurrent.futures import ProcessPoolExecutor  # only for -j: costs start-up time

    size = max(1, len(sources) // (workers * 4))
    chunks = [sources[i : i + size] for i in range(0, len(sources), size)]
    count = len(chunks)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = pool.map(
            _analyse_chunk,
            chunks,
            [contract] * count,
            [force] * count,
            [limit] * count,
            [cache] * count,
        )
        return [outcome for chunk in results for outcome in chunk]
