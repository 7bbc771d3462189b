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
   same way.

The caller (``runnercheck migrate``) prints, diffs or writes the result.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from codemods import driver_only, inputs, self_return, super_dict, verify
from codemods.discover import Group, Index, Note, find_groups, module_facts
from codemods.merge_broadcasts import GroupResult, finish, merge
from codemods.refusal import Refusal
from codemods.source import SkippedPath, collect, read_all, within_roots
from runnercheck import deep
from runnercheck.check.facts import ModuleFacts
from runnercheck.check.project import Project
from runnercheck.config import Config
from runnercheck.jobs import worker_count

MERGE = "merge-broadcasts"
SINGLE = ("self-return", "driver-only", "super-dict")
CODEMODS = (MERGE, *SINGLE)


@dataclass(frozen=True)
class Refused:
    codemod: str
    code: str
    path: Path
    line: int
    message: str
    group: str = ""


@dataclass
class FileChange:
    path: Path
    old: bytes | None
    new: bytes
    codemods: list[str] = field(default_factory=list)
    #: The group (label) the change belongs to; "" for a file changed alone.
    group: str = ""


@dataclass
class TaskResult:
    changes: dict[Path, FileChange] = field(default_factory=dict)
    refusals: list[Refused] = field(default_factory=list)
    groups: list[GroupResult] = field(default_factory=list)
    cst_files: int = 0


@dataclass
class MigrateResult:
    roots: tuple[Path, ...]
    select: tuple[str, ...]
    files_seen: int = 0
    files_parsed: int = 0
    files_cst: int = 0
    changes: dict[Path, FileChange] = field(default_factory=dict)
    refusals: list[Refused] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    groups: list[GroupResult] = field(default_factory=list)
    skipped: list[SkippedPath] = field(default_factory=list)
    #: Journals of interrupted runs met below the given paths (see runnercheck.journal).
    journals: list[Path] = field(default_factory=list)

    def counts(self) -> dict[str, dict[str, int]]:
        """Per codemod: files changed, refused, unchanged (of the files seen)."""
        out: dict[str, dict[str, int]] = {}
        for name in self.select:
            changed = {p for p, c in self.changes.items() if name in c.codemods}
            refused = {r.path for r in self.refusals if r.codemod == name} - changed
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


def needles(config: Config, select: Sequence[str]) -> tuple[bytes, ...]:
    found: list[bytes] = []
    if MERGE in select:
        found += [config.broadcast_function.encode(), b"unner"]
    if any(name in select for name in SINGLE):
        found += [config.as_dict_method.encode(), config.from_dict_method.encode()]
    return tuple(found)


# ------------------------------------------------------------- per-process state


@dataclass
class _State:
    sources: dict[Path, bytes]
    index: Index
    config: Config
    select: tuple[str, ...]
    before: dict[frozenset[Path], list] = field(default_factory=dict)
    facts: dict[Path, ModuleFacts] = field(default_factory=dict)
    roots: tuple[Path, ...] = ()

    def old_facts(self, path: Path) -> ModuleFacts:
        """The ``check`` facts of a file as read (computed once)."""
        found = self.facts.get(path)
        if found is None:
            tree = self.index.modules[path].tree
            text = self.sources[path].decode("utf-8", "replace")
            found = self.facts[path] = verify.facts(path, tree, text, self.config)
        return found


_STATE: _State | None = None


def _make_state(
    sources: dict[Path, bytes], config: Config, select: tuple[str, ...], roots: tuple[Path, ...]
) -> _State:
    modules = []
    for path, data in sources.items():
        modules.append(module_facts(path, ast.parse(data, filename=str(path))))
    return _State(sources, Index(modules, config.contract()), config, select, roots=roots)


def _init_worker(
    sources: dict[Path, bytes], config: Config, select: tuple[str, ...], roots: tuple[Path, ...]
) -> None:
    global _STATE
    _STATE = _make_state(sources, config, select, roots)


def _lookup_for(index: Index, path: Path, tree: ast.Module | None) -> inputs.ClassLookup:
    """Classes visible from ``path``: its own (from ``tree``, the current text),
    then what its imports resolve to in the run."""
    own = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)} if tree else {}

    def lookup(name: str) -> tuple[ast.ClassDef, inputs.ClassLookup] | None:
        if name in own:
            return own[name], lookup
        ref = index.resolve_class(path, name)
        if ref is None:
            return None
        module = index.modules[ref.path]
        return module.classes[ref.name].node, _lookup_for(index, ref.path, None)

    return lookup


def _single_codemods(
    state: _State, path: Path, module: cst.Module, refusals: list[Refused], group: str = ""
) -> tuple[cst.Module, list[str]]:
    contract = state.config.contract()
    applied: list[str] = []
    if "super-dict" in state.select:
        tree = ast.parse(module.code)
        new, changed, skipped = super_dict.rewrite_module(
            module, _lookup_for(state.index, path, tree), contract
        )
        refusals += [
            Refused("super-dict", s.code, path, _class_line(state, path, s.cls), s.message, group)
            for s in skipped
        ]
        if changed:
            module = new
            applied.append("super-dict")
    if "driver-only" in state.select:
        tree = ast.parse(module.code)
        new, changed_fields, skipped_d = driver_only.rewrite_module(
            module, _lookup_for(state.index, path, tree), contract
        )
        refusals += [
            Refused("driver-only", s.code, path, _class_line(state, path, s.cls), s.message, group)
            for s in skipped_d
        ]
        if changed_fields:
            module = new
            applied.append("driver-only")
    if "self-return" in state.select:
        new, changed_classes = self_return.rewrite_module(module, contract)
        if changed_classes:
            module = new
            applied.append("self-return")
    return module, applied


def _single_needles(state: _State) -> tuple[bytes, ...]:
    if not any(name in state.select for name in SINGLE):
        return ()
    return (state.config.as_dict_method.encode(), state.config.from_dict_method.encode())


def _class_line(state: _State, path: Path, name: str) -> int:
    module = state.index.modules.get(path)
    found = module.classes.get(name) if module is not None else None
    return found.line if found is not None else 0


def _context(state: _State, files: Iterable[Path]) -> dict[Path, bytes]:
    """The files to re-analyse with a change set: the files and the modules they
    import from the run (their partners: base classes, runners)."""
    wanted = {p for p in files if p in state.sources}
    for path in list(wanted):
        facts = state.index.modules.get(path)
        if facts is None:
            continue
        for module, _name, level in facts.imports.values():
            target = state.index.module_file(path, module, level)
            if target is not None:
                wanted.add(target)
    return {p: state.sources[p] for p in sorted(wanted)}


def _verify(
    state: _State,
    changes: dict[Path, FileChange],
    label: str,
    codemod: str,
    trees: dict[Path, tuple[ast.Module, str]] | None = None,
) -> Refused | None:
    """Compile the new sources and re-analyse them with their partner files.

    ``trees``: the ``ast`` and text of new sources already parsed (the others are
    parsed here)."""
    trees = dict(trees or {})
    for path, change in changes.items():
        if path not in trees:
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
    for path in changes:
        tree, text = trees[path]
        new[path] = verify.facts(path, tree, text, state.config)
    key = frozenset(old)
    if key not in state.before:
        state.before[key] = verify.findings(old, state.config)
    added = verify.new_findings(old, new, state.config, state.before[key])
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


def _line_of(refusal: Refusal, modules: dict[Path, cst.Module]) -> int:
    if refusal.line or refusal.node is None:
        return refusal.line
    module = modules.get(refusal.path)
    if module is None:
        return 0
    from libcst.metadata import MetadataWrapper, PositionProvider

    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    where = positions.get(refusal.node)
    return where.start.line if where is not None else 0


def run_group(group: Group) -> TaskResult:
    """Plan, rewrite and verify one group; any failure leaves the group alone."""
    path = group.files[0] if group.files else Path(".")
    try:
        return _run_group(group)
    except cst.ParserSyntaxError as exc:
        message = f"{group.label}: LibCST cannot parse a file of the group: {exc.message}"
        return TaskResult(refusals=[Refused(MERGE, "MIG001", path, exc.raw_line, message)])
    except Exception as exc:  # a planner bug must not take the other groups down
        message = f"{group.label}: internal error {type(exc).__name__}: {exc}"
        return TaskResult(refusals=[Refused(MERGE, "MIG199", path, 0, message, group.label)])


def _run_group(group: Group) -> TaskResult:
    state = _STATE
    assert state is not None
    result = TaskResult()
    contract = state.config.contract()
    modules = {p: cst.parse_module(state.sources[p]) for p in group.files}
    result.cst_files = len(modules)
    try:
        merged = merge(group, modules, state.index, contract)
    except Refusal as refusal:
        result.refusals.append(
            Refused(
                MERGE,
                refusal.code,
                refusal.path,
                _line_of(refusal, modules),
                refusal.message,
                group.label,
            )
        )
        return result
    changes: dict[Path, FileChange] = {}
    sub_refusals: list[Refused] = []
    single = _single_needles(state)
    trees: dict[Path, tuple[ast.Module, str]] = {}
    for path, module in merged.modules.items():
        applied: list[str] = []
        module, code, tree = finish(module, merged.used_before[path])
        if any(needle in state.sources[path] for needle in single):
            # classes of the original file may want the single-class codemods too
            module, applied = _single_codemods(state, path, module, sub_refusals, group.label)
            if applied:
                code = module.code
                tree = ast.parse(code)
        new = code.encode(modules[path].encoding)
        if new != state.sources[path]:
            changes[path] = FileChange(
                path, state.sources[path], new, [MERGE, *applied], group.label
            )
            trees[path] = (tree, code)
    for path, text in merged.sources.items():
        if not within_roots(path, state.roots):
            runner = group.runners[0]
            result.refusals.append(
                Refused(
                    MERGE,
                    "MIG108",
                    runner.path,
                    state.index.facts(runner).line,
                    f"{group.label}: needs a new {path.name} next to {runner.path.name}, "
                    "outside the given paths (give the directory, not single files)",
                    group.label,
                )
            )
            return result
        changes[path] = FileChange(path, None, text.encode("utf-8"), [MERGE], group.label)
    failed = _verify(state, changes, group.label, MERGE, trees)
    if failed is not None:
        result.refusals.append(failed)
        return result
    result.changes = changes
    result.refusals += sub_refusals
    merged.modules = {}  # results cross process boundaries: text only
    result.groups.append(merged)
    return result


def run_file(path: Path) -> TaskResult:
    """The single-class codemods on one file; any failure leaves it alone."""
    try:
        return _run_file(path)
    except cst.ParserSyntaxError as exc:
        message = f"LibCST cannot parse it: {exc.message}"
        return TaskResult(refusals=[Refused("parse", "MIG001", path, exc.raw_line, message)])
    except Exception as exc:
        message = f"internal error {type(exc).__name__}: {exc}"
        return TaskResult(refusals=[Refused("parse", "MIG199", path, 0, message)])


def _run_file(path: Path) -> TaskResult:
    state = _STATE
    assert state is not None
    result = TaskResult(cst_files=1)
    original = cst.parse_module(state.sources[path])
    module, applied = _single_codemods(state, path, original, result.refusals)
    if not applied:
        return result
    change = FileChange(path, state.sources[path], module.bytes, applied)
    failed = _verify(state, {path: change}, path.name, applied[0])
    if failed is not None:
        result.refusals.append(failed)
        return result
    result.changes[path] = change
    return result


def migrate(
    paths: Sequence[str | os.PathLike[str]],
    select: Sequence[str] = CODEMODS,
    config: Config | None = None,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> MigrateResult:
    """Plan, rewrite and verify; nothing is written (see :mod:`codemods.transaction`)."""
    global _STATE
    if not deep.in_deep_thread():  # deeply nested code needs a large stack (runnercheck.deep)
        return deep.call(migrate, paths, select, config, jobs, progress)
    config = config or Config()
    select = tuple(name for name in CODEMODS if name in select)
    collected = collect(paths)
    result = MigrateResult(collected.roots, select, skipped=list(collected.skipped))
    result.journals = list(collected.journals)
    result.files_seen = len(collected.files)
    wanted = needles(config, select)
    sources: dict[Path, bytes] = {}
    for path, data in read_all(collected.files, config.max_file_size):
        if isinstance(data, OSError):
            result.refusals.append(Refused("parse", "MIG002", path, 0, str(data)))
            continue
        if not any(needle in data for needle in wanted):
            continue
        try:
            too_deep = deep.too_deep(ast.parse(data, filename=str(path)))
        except SyntaxError as exc:
            result.refusals.append(
                Refused("parse", "MIG001", path, exc.lineno or 0, f"does not parse: {exc.msg}")
            )
            continue
        except (ValueError, RecursionError, MemoryError) as exc:
            message = f"does not parse: {deep.parse_failure(exc)}"
            result.refusals.append(Refused("parse", "MIG001", path, 0, message))
            continue
        if too_deep is not None:
            result.refusals.append(Refused("parse", "MIG001", path, 0, too_deep))
            continue
        sources[path] = data
    result.files_parsed = len(sources)
    for skip in collected.skipped:
        if skip.note:
            result.notes.append(Note(skip.path, 0, "note", skip.message))
        else:
            result.refusals.append(Refused("parse", skip.code, skip.path, 0, skip.message))
    state = _make_state(sources, config, select, collected.roots)
    groups: list[Group] = []
    if MERGE in select:
        facts = [state.old_facts(p) for p in state.index.modules]
        groups, found = find_groups(state.index, Project(facts, config.contract()))
        result.notes += found
    in_groups = {p for g in groups for p in g.files}
    single_needles = (config.as_dict_method.encode(), config.from_dict_method.encode())
    files = [
        p
        for p, data in sources.items()
        if p not in in_groups
        and any(name in select for name in SINGLE)
        and any(n in data for n in single_needles)
    ]
    total = len(groups) + len(files)
    done = 0
    outcomes: list[TaskResult] = []
    workers = worker_count(jobs, total)
    if workers > 1:
        with ProcessPoolExecutor(
            max_workers=workers,
            initializer=_init_worker,
            initargs=(sources, config, select, collected.roots),
        ) as pool:
            futures = [pool.submit(deep.call, run_group, g) for g in groups]
            futures += [pool.submit(deep.call, run_file, p) for p in files]
            for future in as_completed(futures):
                outcomes.append(future.result())
                done += 1
                if progress:
                    progress(done, total)
    else:
        _STATE = state
        try:
            for group in groups:
                outcomes.append(run_group(group))
                done += 1
                if progress:
                    progress(done, total)
            for path in files:
                outcomes.append(run_file(path))
                done += 1
                if progress:
                    progress(done, total)
        finally:
            _STATE = None
    for outcome in outcomes:
        result.files_cst += outcome.cst_files
        result.refusals += outcome.refusals
        result.groups += outcome.groups
        for path, change in outcome.changes.items():
            if path in result.changes:
                existing = result.changes[path]
                if existing.new == change.new and change.group not in existing.group.split(" + "):
                    existing.group = f"{existing.group} + {change.group}"
                if existing.new != change.new:
                    result.refusals.append(
                        Refused(
                            MERGE,
                            "MIG108",
                            path,
                            0,
                            f"two groups generate different versions of {path.name}",
                        )
                    )
                continue
            result.changes[path] = change
    result.refusals.sort(key=lambda r: (str(r.path), r.line, r.code))
    result.changes = dict(sorted(result.changes.items()))
    return result
