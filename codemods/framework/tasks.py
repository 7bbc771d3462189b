"""The tasks of a migration run: one group planned, rewritten and verified
(:func:`run_group`), one file through the single-class codemods (:func:`run_file`),
or, in ``--check``, one file whose rewrites the analysis replays (:func:`exact_file`);
and the run every task reads (:class:`Run`), made once per run, or once per process
of ``-j`` (:func:`init_worker`). The pipeline's stages (:mod:`.pipeline`) hand them
out and collect their results."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from codemods.facts.groups import ClassRef, Group
from codemods.facts.values import ValueFacts
from codemods.framework import decision, registry
from codemods.framework.definitions import flag_classes
from codemods.framework.refusal import Refusal
from runnercheck import collector
from runnercheck.analysis.extract import FunctionReader
from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.config import Config
from runnercheck.files import within_roots
from runnercheck.records import Change, Refused
from runnercheck.workspace.reading import CANNOT_READ

if TYPE_CHECKING:
    import libcst as cst

    from codemods.framework import verify
    from codemods.framework.results import GroupResult
    from codemods.merge_broadcasts.planned import Planned

MERGE = registry.MERGE_BROADCASTS.name


def held_back(group: Group) -> tuple[str, ...]:
    return tuple(f"{ref.name} ({ref.path.name})" for ref in [*group.workers, *group.runners])


@dataclass
class TaskResult:
    changes: dict[Path, Change] = field(default_factory=dict)
    refusals: list[Refused] = field(default_factory=list)
    groups: list[GroupResult] = field(default_factory=list)
    cst_files: int = 0
    #: the directories whose shared worker step this group wrote and did not verify
    unhoisted: dict[Path, str] = field(default_factory=dict)


@dataclass
class Run:
    """What every task of a run reads: the sources as read, their facts (one ``ast``
    parse per file, in the parent process) and the project view over them. Passed to
    each task; a process of ``-j`` makes its own (:func:`init_worker`)."""

    sources: dict[Path, bytes]
    facts: dict[Path, ModuleFacts]
    config: Config
    select: tuple[str, ...]
    roots: tuple[Path, ...] = ()
    #: Whether the analysis decides which files the single-class codemods may change
    #: (:mod:`codemods.framework.decision`); False: every file goes through them with LibCST.
    decide: bool = True
    #: Whether the result's new plain-mypy errors are looked for (not by ``--check``)
    plain_mypy: bool = True
    #: per set of files a rewrite is compared with, what the verification reads of them
    before: dict[frozenset[Path], verify.Baseline] = field(default_factory=dict)
    #: workers no shared worker input is made for (their groups were refused)
    unshared: frozenset[ClassRef] = frozenset()
    #: Whether function bodies that may not be asked about are left unparsed
    #: (:mod:`codemods.toolkit.unparsed`)
    unparsed: bool = True
    #: functions whose bodies a group asked for (parsed from then on)
    asked: set[str] = field(default_factory=set)
    #: the groups' runner attributes (the bodies that assign them are parsed)
    bound: frozenset[str] = frozenset()
    project: Project = field(init=False)
    _planned: Planned | None = field(default=None, init=False)
    single: dict[str, set[str]] | None = field(default=None, init=False)
    #: the ``ast`` of the files parsed in this process (the value facts read them)
    trees: dict[Path, ast.Module] = field(default_factory=dict)
    #: the readers of the methods of ``trees`` (the value facts start from their walks)
    readers: dict[int, FunctionReader] = field(default_factory=dict)
    #: each new file a verification parsed, compiled and read, by its path and bytes
    #: (several groups generate the same shared module): its tree, facts and readers
    generated: dict[tuple[Path, bytes], _Generated] = field(default_factory=dict)
    _values: ValueFacts | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.project = Project(self.facts.values(), self.config.contract())

    @property
    def planned(self) -> Planned:
        """The LibCST modules and plans of the groups, each made once (LibCST is
        imported on first use)."""
        if self._planned is None:
            from codemods.merge_broadcasts.planned import Planned
            from codemods.toolkit import unparsed

            self._planned = planned = Planned(self.sources, self.trees)
            if self.unparsed:
                planned.words = unparsed.contract_words(self.config.contract()) | self.asked
                planned.bound = self.bound
        return self._planned

    def parse_more(self, names: Iterable[str] | None) -> None:
        """Parse, from now on, the bodies of the functions ``names`` and of those that
        name them (None: every body): a group asked for one the run left unparsed
        (:class:`codemods.toolkit.unparsed.NeedsBody`). The modules of files that name none of
        them are kept."""
        old, self._planned = self._planned, None
        if names is None:
            self.unparsed = False
        else:
            self.asked |= set(names)
        if old is not None:
            words = [name.encode() for name in names or ()]
            self.planned.carry(
                old, lambda path: bool(words) and not any(w in self.sources[path] for w in words)
            )

    def single_targets(self) -> dict[str, set[str]]:
        """Per file, the single-class codemods that may change it."""
        if self.single is None:
            if self.decide:
                sources = {str(p): data for p, data in self.sources.items()}
                self.single = decision.single_targets(self.project, self.select, sources)
            else:
                self.single = decision.every_file(map(str, self.sources), self.select)
        return self.single

    def targets(self, path: Path) -> set[str]:
        """The single-class codemods that may change ``path``."""
        return self.single_targets().get(str(path), set())

    def old_facts(self, path: Path) -> ModuleFacts:
        """The facts of a file as read."""
        return self.facts[path]

    @property
    def values(self) -> ValueFacts:
        """The values of the methods of the files as read, each read when the
        verification first walks through it."""
        if self._values is None:
            sources: dict[Path, bytes | ast.Module] = {**self.sources, **self.trees}
            self._values = ValueFacts(sources, self.config.contract(), readers=self.readers)
        return self._values


class _Generated(NamedTuple):
    tree: ast.Module
    facts: ModuleFacts
    readers: dict[int, FunctionReader]


#: the run of this process, when it is a process of ``-j`` (set once, by
#: :func:`init_worker`, and read only by the tasks the pool hands it)
_WORKER_RUN: Run | None = None


def init_worker(
    sources: dict[Path, bytes],
    facts: dict[Path, ModuleFacts],
    config: Config,
    select: tuple[str, ...],
    roots: tuple[Path, ...],
    decide: bool,
    plain_mypy: bool,
    bound: frozenset[str],
) -> None:
    global _WORKER_RUN
    collector.rest(collector.LIBCST_THRESHOLD)  # a process of the run's own
    _WORKER_RUN = Run(sources, facts, config, select, roots, decide, plain_mypy, bound=bound)


def group_task(group: Group) -> TaskResult:
    """:func:`run_group` in a process of ``-j``, on that process's run."""
    assert _WORKER_RUN is not None
    return run_group(_WORKER_RUN, group)


def file_task(path: Path) -> TaskResult:
    """:func:`run_file` in a process of ``-j``, on that process's run."""
    assert _WORKER_RUN is not None
    return run_file(_WORKER_RUN, path)


def _single_codemods(
    state: Run, path: Path, module: cst.Module, refusals: list[Refused], group: str = ""
) -> tuple[cst.Module, list[str]]:
    from codemods import driver_only, self_return, super_dict

    contract = state.config.contract()
    applied: list[str] = []
    project = state.project
    left: list[Refused] = []
    if registry.SUPER_DICT.name in state.select:
        new, changed, skipped = super_dict.rewrite_module(module, project, str(path), contract)
        left += skipped
        if changed:
            module = new
            applied.append(registry.SUPER_DICT.name)
    if registry.DRIVER_ONLY.name in state.select:
        new, changed_fields, skipped = driver_only.rewrite_module(
            module, project, str(path), contract
        )
        left += skipped
        if changed_fields:
            module = new
            applied.append(registry.DRIVER_ONLY.name)
    if registry.SELF_RETURN.name in state.select:
        new, changed_classes = self_return.rewrite_module(module, contract)
        if changed_classes:
            module = new
            applied.append(registry.SELF_RETURN.name)
    # the fold's rewrite loads LibCST's matchers: only where the decision says it may fold
    if registry.FOLD_CONTROL_BROADCAST.name in state.targets(path):
        from codemods import fold_control_broadcast

        new, folded, skipped = fold_control_broadcast.rewrite_module(
            module, project, str(path), contract
        )
        left += skipped
        if folded:
            module = new
            applied.append(registry.FOLD_CONTROL_BROADCAST.name)
    refusals += [dataclasses.replace(r, group=group) for r in left]
    return module, applied


def _class_line(state: Run, path: Path, name: str) -> int:
    found = state.facts[path].classes.get(name)
    return found.line if found is not None else 0


def _context(state: Run, files: Iterable[Path]) -> dict[Path, bytes]:
    """The files to re-analyse with a change set: the files, the modules they
    import from the run (their partners: base classes, runners) and the modules that
    define the classes a non-driver branch builds with a literal flag."""
    wanted = {p for p in files if p in state.sources}
    for path in list(wanted):
        for module, _name, level in state.facts[path].import_sources.values():
            target = state.project.module_file(str(path), module, level)
            if target is not None:
                wanted.add(Path(target))
        for name in flag_classes(state.facts[path]):
            defined = state.project.resolve_class(name, str(path))
            if defined is not None and Path(defined.path) in state.sources:
                wanted.add(Path(defined.path))
    return {p: state.sources[p] for p in sorted(wanted)}


def _verify(
    state: Run,
    changes: dict[Path, Change],
    label: str,
    codemod: str,
    trees: dict[Path, tuple[ast.Module, str]] | None = None,
    read: dict[Path, ModuleFacts] | None = None,
    kept: frozenset[int] = frozenset(),
    readers: dict[int, FunctionReader] | None = None,
) -> Refused | None:
    """Compile the new sources and re-analyse them with their partner files.

    ``trees``: the ``ast`` and text of new sources already parsed (the others are
    parsed here); ``read``: the facts of new sources already read (``kept``: the
    methods among them whose values are those of the sources as read; ``readers``: the
    readers of the methods read, see :func:`extract_tree`). A new source with the bytes
    of one an earlier verification of the run parsed, compiled and read (a shared
    module several groups generate) is not read again."""
    from codemods.framework import verify

    trees = dict(trees or {})
    read = dict(read or {})
    readers = dict(readers or {})
    parsed: set[Path] = set()  # (parsed here)
    for path, change in changes.items():
        seen = state.generated.get((path, change.new)) if path not in trees else None
        if seen is not None:  # the same bytes parsed, compiled and read for another group
            trees[path] = (seen.tree, change.new.decode("utf-8", "replace"))
            read[path] = seen.facts
            readers.update(seen.readers)
            continue
        if path not in trees:
            parsed.add(path)
            text = change.new.decode("utf-8", "replace")
            try:
                trees[path] = (verify.parse(path, change.new), text)
            except (SyntaxError, ValueError) as exc:
                return Refused(
                    codemod,
                    "MIG110",
                    path,
                    0,
                    f"{label}: the rewritten {path.name} does not parse ({exc})",
                    label,
                )
        error = verify.compiles(path, trees[path][0])
        if error is not None:
            return Refused(
                codemod,
                "MIG110",
                path,
                0,
                f"{label}: the rewritten {path.name} does not compile ({error})",
                label,
            )
    old = {p: state.old_facts(p) for p in _context(state, changes)}
    new = dict(old)
    for path, change in changes.items():
        tree, text = trees[path]
        found = read.get(path)
        if found is None:
            walked: dict[int, FunctionReader] = {}
            found = verify.facts(path, tree, text, state.config, walked)
            readers.update(walked)
            if path in parsed:
                state.generated[(path, change.new)] = _Generated(tree, found, walked)
        new[path] = found
    key = frozenset(old)
    baseline = state.before.get(key)
    if baseline is None:
        baseline = state.before[key] = verify.Baseline(old, state.config, state.values)
    added = verify.new_findings(baseline, new)
    changed = []
    if not added:
        new_trees = {path: trees[path][0] for path in changes}
        new_values = state.values.changed(new_trees, kept, readers)
        changed = verify.changed_values(baseline, new, state.config, state.values, new_values)
    if changed:
        return Refused(
            codemod,
            "MIG111",
            next(iter(changes)),
            0,
            f"{label}: {'; '.join(c.describe() for c in changed)}",
            label,
        )
    if added:
        first = added[0]
        return Refused(
            codemod,
            "MIG110",
            Path(first.path),
            first.line,
            f"{label}: the rewritten code re-analyses with {first.code} ({first.message})",
            label,
        )
    return None


def _line_of(refusal: Refusal, modules: dict[Path, cst.Module], planned: Planned) -> int:
    """The line of the node a refusal cites, counted in a print of its module (which
    writes a function body left unparsed as the lines it was read from)."""
    if refusal.line or refusal.node is None:
        return refusal.line
    if refusal.path not in modules:
        return 0
    return planned.lines(refusal.path).line(refusal.node)


def run_group(state: Run, group: Group) -> TaskResult:
    """Plan, rewrite and verify one group; any failure leaves the group alone."""
    if group.refusal is not None:  # refused as found: no LibCST work at all
        refused = dataclasses.replace(group.refusal, group=group.label, held_back=held_back(group))
        return TaskResult(refusals=[refused])
    import libcst as cst

    from codemods.toolkit.unparsed import NeedsBody

    path = group.files[0] if group.files else Path(".")
    try:
        try:
            return _run_group(state, group)
        except NeedsBody as asked:  # the group again, with the bodies it asked for
            state.parse_more(asked.names)
        try:
            return _run_group(state, group)
        except NeedsBody:
            state.parse_more(None)
        return _run_group(state, group)
    except cst.ParserSyntaxError as exc:
        message = f"{group.label}: LibCST cannot parse a file of the group: {exc.message}"
        return TaskResult(refusals=[Refused(MERGE, CANNOT_READ, path, exc.raw_line, message)])
    except Exception as exc:  # a planner bug must not take the other groups down
        message = f"{group.label}: internal error {type(exc).__name__}: {exc}"
        return TaskResult(refusals=[Refused(MERGE, "MIG199", path, 0, message, group.label)])


def _run_group(state: Run, group: Group) -> TaskResult:
    from codemods.framework import verify
    from codemods.merge_broadcasts import stale_comments
    from codemods.merge_broadcasts.rewrite import finish, merge
    from codemods.toolkit import cstutil, formatting

    result = TaskResult()
    contract = state.config.contract()
    modules = state.planned.modules(group.files)
    result.cst_files = len(modules)
    try:
        merged = merge(group, modules, state.project, contract, state.planned, state.unshared)
    except Refusal as refusal:
        line = _line_of(refusal, modules, state.planned)
        result.refusals.append(refusal.record(MERGE, line, group.label, held_back(group)))
        return result
    changes: dict[Path, Change] = {}
    sub_refusals: list[Refused] = []
    single = state.single_targets()
    trees: dict[Path, tuple[ast.Module, str]] = {}
    # the legacy methods the group removed, named by the comments of its files
    renames = {
        r.removed_method: contract.prepare_input_method for r in merged.runners if r.removed_method
    }
    for path, module in merged.modules.items():
        applied: list[str] = []
        module, code, tree = finish(path, module, merged.used_before[path])
        if str(path) in single:
            # classes of the original file may want the single-class codemods too
            module, applied = _single_codemods(state, path, module, sub_refusals, group.label)
            if applied:
                code = module.code
                tree = verify.parse(path, code)
        encoding = modules[path].encoding
        refreshed = stale_comments.refresh(
            state.sources[path].decode(encoding, "replace"), code, renames
        )
        if refreshed != code:
            code, tree = refreshed, verify.parse(path, refreshed)
        formatted = formatting.format_change(
            path, state.sources[path].decode(encoding, "replace"), code
        )
        if formatted != code:
            code, tree = formatted, verify.parse(path, formatted)
        _renumber_notes(merged, path, state.sources[path].decode(encoding, "replace"), code)
        new = code.encode(encoding)
        if new != state.sources[path]:
            changes[path] = Change(path, state.sources[path], new, group.label, (MERGE, *applied))
            trees[path] = (tree, code)
    for path, text in merged.sources.items():
        if not within_roots(path, state.roots):
            runner = group.runners[0]
            result.refusals.append(
                Refused(
                    MERGE,
                    "MIG108",
                    runner.path,
                    _class_line(state, runner.path, runner.name),
                    f"{group.label}: needs a new {path.name} next to {runner.path.name}, "
                    "outside the given paths and the packages of the given files",
                    group.label,
                    held_back=held_back(group),
                )
            )
            return result
        text = formatting.format_change(path, None, text)
        # a new file takes the line ending of the files around it
        newline = cstutil.dominant_newline(b"".join(state.sources[p] for p in group.files))
        new = text.replace("\r\n", "\n").replace("\n", newline).encode("utf-8")
        changes[path] = Change(path, None, new, group.label, (MERGE,))
    failed = _verify(state, changes, group.label, MERGE, trees)
    if failed is not None:
        for directory in merged.hoisted:
            result.unhoisted[directory] = failed.message
        result.refusals.append(dataclasses.replace(failed, held_back=held_back(group)))
        return result
    result.changes = changes
    result.refusals += sub_refusals
    merged.modules = {}  # results cross process boundaries: text only
    result.groups.append(merged)
    return result


def run_file(state: Run, path: Path) -> TaskResult:
    """The single-class codemods on one file; any failure leaves it alone."""
    import libcst as cst

    try:
        return _run_file(state, path)
    except cst.ParserSyntaxError as exc:
        message = f"LibCST cannot parse it: {exc.message}"
        return TaskResult(refusals=[Refused("parse", CANNOT_READ, path, exc.raw_line, message)])
    except Exception as exc:
        message = f"internal error {type(exc).__name__}: {exc}"
        return TaskResult(refusals=[Refused("parse", "MIG199", path, 0, message)])


def _run_file(state: Run, path: Path) -> TaskResult:
    from codemods.toolkit import cstutil, formatting

    result = TaskResult(cst_files=1)
    original = cstutil.parse_module(state.sources[path])
    module, applied = _single_codemods(state, path, original, result.refusals)
    if not applied:
        return result
    code = formatting.format_change(path, original.code, module.code)
    change = Change(path, state.sources[path], code.encode(module.encoding), "", tuple(applied))
    failed = _verify(state, {path: change}, path.name, applied[0])
    if failed is not None:
        result.refusals.append(failed)
        return result
    result.changes[path] = change
    return result


def exact_file(state: Run, path: Path) -> TaskResult | None:
    """``--check`` on one file without LibCST, when the analysis tells what the
    single-class codemods do to it (:mod:`codemods.framework.replay`): the same changes and
    refusals as :func:`run_file`, the rewrite verified the same way. None when only
    LibCST can tell: a shape the replay does not follow, a rewrite the verification
    refuses (the refusal cites lines of the rewritten text), or a project with a mypy
    configuration when the run looks for new plain-mypy errors (they need the new
    bytes)."""
    from codemods.framework import replay, verify

    try:
        text = state.sources[path].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if state.plain_mypy:
        from codemods.framework import typecheck

        if typecheck.mypy_config(path) is not None:
            return None
    contract = state.config.contract()
    targets = state.targets(path)
    tree = state.trees.get(path)
    replayed = replay.replay(state.project, path, text, state.select, targets, contract, tree)
    if replayed is None:
        return None
    result = TaskResult(refusals=list(replayed.refusals))
    if not replayed.applied:
        return result
    applied = tuple(replayed.applied)
    change = Change(path, state.sources[path], b"", "", applied, exact=True)
    # the replayed tree keeps the positions of the text as read
    trees = {path: (replayed.tree, text)}
    facts = state.old_facts(path)
    readers: dict[int, FunctionReader] = {}
    try:
        read, kept = verify.rewritten_facts(
            path, replayed.read, facts, replayed.tree, text, state.config, replayed.marked, readers
        )
        failed = _verify(
            state, {path: change}, path.name, applied[0], trees, {path: read}, kept, readers
        )
    except (TypeError, ValueError):  # a replayed tree compile() rejects: LibCST decides
        return None
    if failed is not None:  # its message cites the lines of the rewritten text
        return None
    result.changes[path] = change
    return result


def _renumber_notes(merged: GroupResult, path: Path, old: str, new: str) -> None:
    """The group's notes on ``path`` cite lines of its rewritten text."""
    from codemods.toolkit.positions import line_map

    where = str(path)
    to_new = line_map(old, new)

    cited = re.compile(rf"\({re.escape(path.name)}:(\d+)\)")

    def renumbered(text: str) -> str:
        """``(<file>:<line>)`` of this file in a note's text, renumbered too."""
        return cited.sub(lambda m: f"({path.name}:{to_new(int(m.group(1)))})", text)

    def moved(notes: list[tuple[str, int, str]]) -> list[tuple[str, int, str]]:
        return [
            (p, to_new(n) if p == where and n else n, renumbered(t) if p == where else t)
            for p, n, t in notes
        ]

    merged.worker_notes = moved(merged.worker_notes)
    for runner in merged.runners:
        runner.notes = moved(runner.notes)
