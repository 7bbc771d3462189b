"""The migration pipeline: facts -> plan -> rewrite -> verify (nothing written here).

1. collect the ``*.py`` files under the given paths (no symbolic links followed);
2. a byte prefilter: only files that mention the contract's names are parsed
   (stdlib ``ast``, fast); a file that does not parse is reported and skipped;
3. facts: the worker/runner groups with a paired broadcast (the ``check``
   engine's project facts);
4. per group: parse its files with LibCST, plan every class (a refusal leaves
   the whole group alone), rewrite, run the selected single-class codemods on
   the result, then verify: every new source compiles and re-analyses with
   ``runnercheck check`` with no RC106 and no finding the old sources lacked;
5. the other prefiltered files get the single-class codemods, verified the
   same way; in ``--check`` (``exact``), a file whose rewrites the analysis
   replays on its ``ast`` (:mod:`codemods.framework.replay`) is verified from the
   replay, without LibCST.

Here the stages (:func:`_migrate`); the tasks of 4 and 5, and the run they read, are
:mod:`codemods.framework.tasks`. The caller (``runnercheck migrate``) prints, diffs or
writes the result.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from codemods import fold_plan
from codemods.facts.groups import Group, find_groups
from codemods.framework import decision, registry
from codemods.framework.definitions import read_definitions
from codemods.framework.source import Collected, collect, package_files
from codemods.framework.tasks import (
    MERGE,
    Run,
    TaskResult,
    exact_file,
    file_task,
    group_task,
    init_worker,
    run_file,
    run_group,
)
from runnercheck import collector, deep
from runnercheck.analysis.extract import FunctionReader, extract_tree, read_shapes
from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.prefilter import select_sources
from runnercheck.analysis.project import Project
from runnercheck.analysis.stages import mixed_pairs
from runnercheck.config import Config
from runnercheck.files import MAX_ANALYSED_SIZE, too_large_to_analyse
from runnercheck.jobs import worker_count
from runnercheck.records import Change, Note, Refused
from runnercheck.workspace.reading import CANNOT_READ, ParseFailure, parse_module, read_all

if TYPE_CHECKING:
    from codemods.framework.results import GroupResult
    from runnercheck.contract import Contract
    from runnercheck.workspace.cache import FactsCache

CODEMODS = registry.NAMES


@dataclass
class MigrateResult:
    roots: tuple[Path, ...]
    select: tuple[str, ...]
    files_seen: int = 0
    files_parsed: int = 0
    files_cst: int = 0
    changes: dict[Path, Change] = field(default_factory=dict)
    refusals: list[Refused] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    groups: list[GroupResult] = field(default_factory=list)
    #: Journals of interrupted runs met below the given paths (see runnercheck.writes.journal).
    journals: list[Path] = field(default_factory=list)
    #: What :func:`codemods.framework.run.apply` wrote, and one line per interrupted run it put back.
    written: list[Path] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per codemod: files changed, refused, unchanged (of the files seen)."""
        out: dict[str, dict[str, int]] = {}
        for name in self.select:
            changed = {p for p, c in self.changes.items() if name in c.codemods}
            refused = {r.path for r in self.refusals if r.kind == name} - changed
            existing = {p for p in changed if self.changes[p].old is not None}
            out[name] = {
                "changed": len(changed),
                "refused": len(refused),
                "unchanged": max(0, self.files_seen - len(existing) - len(refused)),
            }
        return out

    @property
    def exit_code(self) -> int:
        return 1 if self.changes else 0


def _without_refused_workers(
    state: Run, groups: list[Group], outcomes: list[TaskResult]
) -> list[TaskResult]:
    """A group whose shared worker input was made for a worker of a group refused
    later (its verification failed) runs again without that worker: the module
    then holds and names only the workers that use it."""
    refused = {r.group for o in outcomes for r in o.refusals if r.kind == MERGE and r.group}
    dropped = frozenset(w for g in groups if g.label in refused for w in g.workers)
    if not dropped:
        return outcomes
    named = {(str(w.path), w.name) for w in dropped}
    again = {r.label for o in outcomes for r in o.groups if named & set(r.shared_with)}
    if not again:
        return outcomes
    state.unshared = dropped
    rerun = {g.label: run_group(state, g) for g in groups if g.label in again}
    kept = [o for o in outcomes if not any(r.label in again for r in o.groups)]
    return kept + list(rerun.values())


def _without_failed_hoists(
    state: Run, groups: list[Group], outcomes: list[TaskResult], notes: list[Note]
) -> list[TaskResult]:
    """The groups of a directory whose shared worker step did not verify run again, each
    worker keeping its own step: never a tree where some workers use the base."""
    failed: dict[Path, str] = {}
    for outcome in outcomes:
        failed.update(outcome.unhoisted)
    if not failed:
        return outcomes
    state.planned.no_hoist.update(failed)
    again = {g.label for g in groups if any(w.path.parent in failed for w in g.workers)}
    rerun = [run_group(state, g) for g in groups if g.label in again]

    def labels(outcome: TaskResult) -> set[str]:
        return {r.label for r in outcome.groups} | {r.group for r in outcome.refusals}

    kept = [o for o in outcomes if not labels(o) & again]
    for directory, why in sorted(failed.items()):
        notes.append(
            Note(
                "worker-base",
                directory,
                0,
                f"the workers here keep their own steps: the shared step did not verify ({why})",
            )
        )
    return kept + rerun


def _mixed(project: Project) -> list[Refused]:
    """MIG007 for each worker driving a runner at another stage of the migration."""
    return [
        Refused(MERGE, "MIG007", Path(pair.worker.path), pair.line, pair.message)
        for worker in project.workers()
        for pair in mixed_pairs(project, worker)
    ]


def _read_loaded_names(state: Run, groups: Iterable[Group]) -> set[Path]:
    """The names each file of a group to rewrite loads (the rewrite keeps the imports
    they use), read from its ``ast`` only for those files, unless its facts (from the
    cache) hold them; returns the files read."""
    from runnercheck.analysis.syntax import loaded_names

    read: set[Path] = set()
    for path in {p for g in groups if g.refusal is None for p in g.files}:
        facts = state.facts.get(path)
        if facts is None or facts.loaded_names is not None:
            continue
        tree = state.trees.get(path)
        if tree is None and path in state.sources:  # its facts came from the cache
            tree = ast.parse(state.sources[path], filename=str(path))
        if tree is not None:
            facts.loaded_names = loaded_names(tree)
            read.add(path)
    return read


def _read_shapes(state: Run, groups: Iterable[Group], read: set[Path]) -> set[Path]:
    """The shapes group planning plans from (:func:`read_shapes`), read only for the
    files of the classes it asks about: none when every group is refused as found (a
    refused group is never planned), else every class of a group (refused or not: a
    shared base module's signature reads every group's runners) and every class they
    inherit from. ``read``: the files whose facts ``migrate`` read itself (the others
    were read as ``check`` reads them, without shapes). Returns the files read."""
    groups = list(groups)
    if all(group.refusal is not None for group in groups):
        return set()
    project = state.project
    wanted: set[Path] = set()
    for group in groups:
        for ref in [*group.workers, *group.runners]:
            module = project.modules.get(str(ref.path))
            cls = module.classes.get(ref.name) if module is not None else None
            if cls is None:
                wanted.add(ref.path)
                continue
            wanted.update(Path(c.path) for c in project.mro(cls))
    done: set[Path] = set()
    contract = state.config.contract()
    for path in sorted(wanted & read):
        facts = state.facts.get(path)
        if facts is None or facts.shapes_read:
            continue
        tree = state.trees.get(path)
        if tree is None:  # its facts came from the cache
            tree = ast.parse(state.sources[path], filename=str(path))
        read_shapes(facts, tree, state.sources[path].decode("utf-8", "replace"), contract)
        done.add(path)
    return done


def _given_files(paths: Sequence[str | os.PathLike[str]], files: Iterable[Path]) -> set[Path]:
    """The collected files that were given as files (not found in a given directory)."""
    named = {Path(os.path.realpath(p)) for p in paths if not os.path.isdir(p)}
    return {path for path in files if path in named}


def migrate(
    paths: Sequence[str | os.PathLike[str]],
    select: Sequence[str] = CODEMODS,
    config: Config | None = None,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
    collected: Collected | None = None,
    decide: bool = True,
    cache_root: Path | None = None,
    exact: bool = False,
    plain_mypy: bool = True,
    callers: bool = True,
) -> MigrateResult:
    """Plan, rewrite and verify; nothing is written (:func:`codemods.framework.run.apply` writes).

    ``collected``: the walk of ``paths`` when the caller has made it. ``decide=False``:
    without the analysis's decision of which files a codemod may change
    (:mod:`codemods.framework.decision`), every given file goes through the single-class codemods
    (the same result, slower: for the tests and the benchmark). ``cache_root``: read the
    facts of unchanged files from, and write new ones to, the facts cache under it
    (:mod:`runnercheck.workspace.cache`). ``exact`` (``--check``, with ``decide``): a file
    whose single-class rewrites the analysis replays (:func:`exact_file`) goes through no
    LibCST; its change has no new bytes. ``plain_mypy=False`` (``--check``): the
    changed files are not run through plain mypy before and after (no new-error
    notes; ``--diff`` and writing give them). ``callers=False`` (``--no-callers``):
    calls of a removed method are rewritten only inside the given paths."""
    args = (
        paths,
        select,
        config,
        jobs,
        progress,
        collected,
        decide,
        cache_root,
        exact,
        plain_mypy,
        callers,
    )
    if not deep.in_deep_thread():  # deeply nested code needs a large stack (runnercheck.deep)
        return deep.call(migrate, *args)
    with collector.at_rest(collector.LIBCST_THRESHOLD):
        return _migrate(*args)


def _migrate(
    paths: Sequence[str | os.PathLike[str]],
    select: Sequence[str],
    config: Config | None,
    jobs: int,
    progress: Callable[[int, int], None] | None,
    collected: Collected | None,
    decide: bool,
    cache_root: Path | None,
    exact: bool,
    plain_mypy: bool,
    callers: bool,
) -> MigrateResult:
    """The stages of a run: read the files, parse them into facts, plan what goes
    to which task, run the tasks (rewrite and verify), collect their results, then
    what spans the run (callers, layout and plain-mypy notes)."""
    config = config or Config()
    select = tuple(name for name in CODEMODS if name in select)
    if collected is None:
        collected = collect(paths)
    result = MigrateResult(collected.roots, select)
    result.journals = list(collected.journals)
    result.files_seen = len(collected.files)
    files = _read_files(paths, collected, config, select, result)
    cache = _facts_cache(cache_root, config.contract())
    if cache is not None and cache.unused:
        result.notes.append(Note("path", cache.directory, 0, cache.unused))
    parsed = _parse(files, config, select, cache, result)
    for skip in collected.skipped:
        if isinstance(skip, Note):
            result.notes.append(skip)
        else:
            result.refusals.append(skip)
    result.roots = (*collected.roots, *sorted({p.parent for p in files.packages}))
    run = Run(
        parsed.sources,
        parsed.facts,
        config,
        select,
        result.roots,
        decide,
        plain_mypy,
        trees=parsed.trees,
        readers=parsed.readers,
    )
    tasks = _plan(run, parsed, files.given, cache, exact, result)
    outcomes = tasks.settled + _run_tasks(run, tasks, jobs, progress, collected.roots)
    outcomes = _without_failed_hoists(run, tasks.groups, outcomes, result.notes)
    outcomes = _without_refused_workers(run, tasks.groups, outcomes)
    _collect(result, outcomes)
    if MERGE in select:
        _update_callers(result, config, collected.roots, files.read, parsed.trees, callers)
    result.notes += _layout_notes(result.changes)
    if result.changes and plain_mypy:  # (the type checks load only then)
        result.notes += _plain_mypy_notes(result.changes)
    result.refusals.sort(key=lambda r: (str(r.path), r.line, r.code))
    result.changes = dict(sorted(result.changes.items()))
    _release(run)
    return result


@dataclass
class _Files:
    """The files a run read: every file under the given paths (and the packages of
    the files given alone), those given, and those that can matter (the prefilter)."""

    read: dict[Path, bytes]
    given: set[Path]
    wanted: list[Path]
    #: the files given alone whose packages were read as context
    packages: set[Path]


def _read_files(
    paths: Sequence[str | os.PathLike[str]],
    collected: Collected,
    config: Config,
    select: tuple[str, ...],
    result: MigrateResult,
) -> _Files:
    """Read the collected files (one that cannot be read is refused), and the
    packages of the files given alone that can matter."""
    contract = config.contract()
    read: dict[Path, bytes] = {}
    for path, data in read_all(collected.files, config.max_file_size):
        if isinstance(data, OSError):
            result.refusals.append(Refused("parse", CANNOT_READ, path, 0, str(data)))
            continue
        read[path] = data
    given = set(read)
    wanted = select_sources(read, contract, runners=MERGE in select)
    # a file given alone stands for its group: its package is read as context
    packages = _given_files(paths, collected.files) & set(wanted)
    context = package_files(packages, collected.files)
    for path, data in read_all(context, config.max_file_size):
        if not isinstance(data, OSError):
            read[path] = data
    if context:
        wanted = select_sources(read, contract, runners=MERGE in select)
    return _Files(read, given, wanted, packages)


@dataclass
class _Parsed:
    """The files that parsed, with their facts (``ast`` parsed here, or from the cache)."""

    sources: dict[Path, bytes] = field(default_factory=dict)
    facts: dict[Path, ModuleFacts] = field(default_factory=dict)
    #: the ``ast`` of the files parsed here (a file whose facts come from the cache has none)
    trees: dict[Path, ast.Module] = field(default_factory=dict)
    readers: dict[int, FunctionReader] = field(default_factory=dict)
    #: the files whose facts came from the cache
    hits: set[Path] = field(default_factory=set)


def _parse(
    files: _Files,
    config: Config,
    select: tuple[str, ...],
    cache: FactsCache | None,
    result: MigrateResult,
) -> _Parsed:
    """The facts of each file that can matter (a given file too large or that does
    not parse is refused), and of the modules defining the names the groups need."""
    contract = config.contract()
    parsed = _Parsed()
    for path in files.wanted:
        data = files.read[path]
        if len(data) > MAX_ANALYSED_SIZE:
            result.refusals.append(
                Refused("parse", CANNOT_READ, path, 0, too_large_to_analyse(len(data)))
            )
            continue
        # only facts of a file that parsed are stored: a hit parsed, and was not too deep
        cached = cache.lookup(data, str(path), _CACHED) if cache is not None else None
        if cached is not None:
            parsed.sources[path] = data
            parsed.facts[path] = cached
            parsed.hits.add(path)
            continue
        tree = parse_module(data, path)
        if isinstance(tree, ParseFailure):
            if path in files.given:  # a context file that does not parse adds nothing
                result.refusals.append(Refused("parse", CANNOT_READ, path, tree.line, tree.message))
            continue
        text = data.decode("utf-8", "replace")
        parsed.facts[path] = extract_tree(
            tree, str(path), text, contract, True, False, shapes=False, readers=parsed.readers
        )
        parsed.sources[path] = data
        parsed.trees[path] = tree
    result.files_parsed = len([p for p in parsed.sources if p in files.given])
    if MERGE in select:
        definitions = read_definitions(parsed.facts, contract, config.max_file_size)
        for path, (data, module_facts) in definitions.items():
            parsed.sources[path] = data
            parsed.facts[path] = module_facts
    return parsed


@dataclass
class _Tasks:
    """What a run's tasks are: the groups to rewrite and the files for the
    single-class codemods, with the outcomes of those the analysis settled alone."""

    groups: list[Group] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    settled: list[TaskResult] = field(default_factory=list)


def _plan(
    run: Run,
    parsed: _Parsed,
    given: set[Path],
    cache: FactsCache | None,
    exact: bool,
    result: MigrateResult,
) -> _Tasks:
    """The groups of the given files, and the given files outside them that a
    single-class codemod may change; a file the analysis settles (or, in ``exact``,
    replays) goes to no task."""
    tasks = _Tasks()
    shaped: set[Path] = set()
    if MERGE in run.select:
        groups, found = find_groups(run.project)
        run.bound = frozenset(a for g in groups for a in g.runner_attr.values())
        shaped = _read_shapes(run, groups, set(parsed.trees) | parsed.hits)
        # only the groups of the given files; a group of context files alone is not ours
        tasks.groups = [g for g in groups if any(p in given for p in g.files)]
        mine = given | {p for g in tasks.groups for p in g.files}
        result.notes += [note for note in found if note.path in mine]
        result.refusals += _mixed(run.project)
    loaded = _read_loaded_names(run, tasks.groups)
    if cache is not None:  # (stored once the files of the groups hold their loaded names)
        for path in parsed.sources:
            if path in parsed.trees or path in (loaded | shaped) & parsed.hits:
                cache.store(parsed.sources[path], str(path), _CACHED, parsed.facts[path])
    in_groups = {p for g in tasks.groups for p in g.files}
    single = run.single_targets()
    tasks.files = [
        p for p in parsed.sources if p in given and p not in in_groups and str(p) in single
    ]
    if run.decide:  # a file the analysis settles goes to no task (and no LibCST)
        for path in list(tasks.files):
            refusals = decision.settled(run.project, str(path), single[str(path)])
            if refusals is not None:
                tasks.settled.append(TaskResult(refusals=refusals))
                tasks.files.remove(path)
    if run.decide and exact:  # --check: a file the analysis replays goes to no LibCST
        for path in list(tasks.files):
            replayed = exact_file(run, path)
            if replayed is not None:
                tasks.settled.append(replayed)
                tasks.files.remove(path)
    return tasks


def _run_tasks(
    run: Run,
    tasks: _Tasks,
    jobs: int,
    progress: Callable[[int, int], None] | None,
    collected_roots: tuple[Path, ...],
) -> list[TaskResult]:
    """Each group and file through its task, in this process or in ``jobs``
    processes (each making its own run, under ``collected_roots``); the outcomes in
    the order a serial run makes them."""
    groups, files = tasks.groups, tasks.files
    total = len(groups) + len(files)
    done = 0
    workers = worker_count(jobs, total)
    if workers <= 1:
        outcomes: list[TaskResult] = []
        for group in groups:
            outcomes.append(run_group(run, group))
            done += 1
            if progress:
                progress(done, total)
        for path in files:
            outcomes.append(run_file(run, path))
            done += 1
            if progress:
                progress(done, total)
        return outcomes
    from concurrent.futures import ProcessPoolExecutor, as_completed  # only for -j

    initargs = (
        run.sources,
        run.facts,
        run.config,
        run.select,
        collected_roots,
        run.decide,
        run.plain_mypy,
        run.bound,
    )
    with ProcessPoolExecutor(workers, initializer=init_worker, initargs=initargs) as pool:
        futures = [pool.submit(deep.call, group_task, g) for g in groups]
        futures += [pool.submit(deep.call, file_task, p) for p in files]
        for future in as_completed(futures):
            future.result()  # (a task that raised raises here, as soon as it ends)
            done += 1
            if progress:
                progress(done, total)
        # in the order a serial run makes them, whichever process finished first
        return [future.result() for future in futures]


def _collect(result: MigrateResult, outcomes: list[TaskResult]) -> None:
    """The tasks' outcomes into the run's result: a fold that cannot apply is a note;
    a file two groups generate alike is one change of both, else refused (MIG108)."""
    for outcome in outcomes:
        result.files_cst += outcome.cst_files
        for refusal in outcome.refusals:
            # a fold the plan shows cannot apply is no refusal: nothing is left for a
            # person, as RC110 is then a note of ``check``
            if fold_plan.unfixable(refusal):
                result.notes.append(fold_plan.as_note(refusal))
            else:
                result.refusals.append(refusal)
        result.groups += outcome.groups
        for path, change in outcome.changes.items():
            if path not in result.changes:
                result.changes[path] = change
                continue
            existing = result.changes[path]
            if existing.new == change.new and change.group not in existing.group.split(" + "):
                label = f"{existing.group} + {change.group}"
                result.changes[path] = dataclasses.replace(existing, group=label)
            if existing.new != change.new:
                message = f"two groups generate different versions of {path.name}"
                result.refusals.append(Refused(MERGE, "MIG108", path, 0, message))


def _plain_mypy_notes(changes: dict[Path, Change]) -> list[Note]:
    """A note per error plain mypy reports on the changed files and not before."""
    from codemods.framework import typecheck

    checked = {p: (c.old, c.new) for p, c in changes.items() if not c.exact}
    try:
        errors = typecheck.new_errors(checked)
    except OSError as exc:  # its temporary trees cannot be written (disk full, a limit)
        first = min(checked, default=None)
        if first is None:
            return []
        reason = exc.strerror or str(exc)
        return [Note("mypy", first, 0, f"plain mypy not run: {reason}")]
    return [
        Note("mypy", e.path, e.line, f"a new plain-mypy error [{e.code}]: {e.message}")
        for e in errors
    ]


def _release(run: Run) -> None:
    """The run's LibCST trees, and what was read from them, can go."""
    if "libcst" in sys.modules:
        from codemods.toolkit import cstutil, node_index

        node_index.forget()
        cstutil.forget_codes()
    if run._planned is not None:
        run._planned.release()


#: The facts cache's name for what ``migrate`` extracts (``names=True``).
_CACHED = "migrate"


def _facts_cache(root: Path | None, contract: Contract) -> FactsCache | None:
    if root is None:
        return None
    from runnercheck.workspace.cache import FactsCache

    return FactsCache(root, contract)


def _layout_notes(changes: dict[Path, Change]) -> list[Note]:
    """One line per project whose changed files keep the migration's own layout."""
    if not changes:
        return []
    from codemods.toolkit import formatting

    notes: list[Note] = []
    seen: set[Path | None] = set()
    for path in changes:
        found = formatting.find_formatter(path)
        key = found.directory if found is not None else None
        if key in seen:
            continue
        seen.add(key)
        message = formatting.layout_note(found)
        if message is not None:
            notes.append(Note("format", path, 0, message))
    return notes


#: the code of a call of a removed method that is not rewritten
CALLER_CODE = "MIG112"


def _update_callers(
    result: MigrateResult,
    config: Config,
    roots: Sequence[Path],
    read: dict[Path, bytes],
    trees: dict[Path, ast.Module],
    project: bool = True,
) -> None:
    """Calls of the legacy methods the groups removed, anywhere in the project:
    rewritten when the new method is a drop-in (``project=False``: only inside the
    given paths), else named (MIG112). A rewritten caller is written with the groups
    whose methods it calls (one transaction). ``read``: every file read under the
    given paths (not walked or read again); ``trees``: the ``ast`` of those the run
    parsed (not parsed again)."""
    if not any(runner.removed_method for group in result.groups for runner in group.runners):
        return  # no method removed: no caller to look for (and no LibCST to import)
    from codemods.framework import verify
    from codemods.merge_broadcasts import callers
    from codemods.toolkit import formatting

    contract = config.contract()
    removed = [
        callers.Removed(
            runner.runner,
            runner.removed_method,
            contract.prepare_input_method,
            runner.input_class,
            tuple(runner.returned_fields),
            frozenset(group.used_before),
            frozenset(runner.optional_fields),
            (group.label,),
        )
        for group in result.groups
        for runner in group.runners
        if runner.removed_method
    ]
    within = list(roots) if not project else [*roots, *(callers.search_root(r) for r in roots)]
    found = callers.find_callers(
        removed, roots, within, skip=result.changes, known=read, walked=roots, trees=trees
    )
    labels = {group.label for group in result.groups}
    for path, (old, new) in found.rewritten.items():
        new = formatting.format_change(path, old, new)
        failed = verify.compiles(path, new.encode("utf-8"))
        if failed is not None:
            why = f"the rewritten calls do not compile ({failed}): left alone"
            result.refusals.append(Refused(MERGE, CALLER_CODE, path, 0, why))
            continue
        group = " + ".join(g for g in found.groups.get(path, []) if g in labels)
        result.changes[path] = Change(
            path, old.encode("utf-8"), new.encode("utf-8"), group or "callers", (MERGE,)
        )
        if not any(path == r or r in path.parents for r in roots):
            result.roots = (*result.roots, path)
    result.refusals += [
        Refused(MERGE, CALLER_CODE, path, ln, text) for path, ln, text in found.named
    ]
