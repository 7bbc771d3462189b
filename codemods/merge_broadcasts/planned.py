"""The LibCST work of one ``migrate`` run on its groups, each piece done once.

A run needs the plan of a group more than once: its own rewrite plans it, and the
helpers that the input classes of a directory share (:mod:`.shared_helpers`) come
from the plans of every group there, for each group that generates the base module.
:class:`Planned` keeps, for the run, each file's LibCST module, each group's plans (or
the error planning raised) with the line index of its modules, each directory's
helpers and shared worker inputs, and each runner's input class. So each file is parsed with LibCST once, each group is
planned once and the helpers of a directory are computed once, whichever group asks
first.

LibCST trees are immutable, and a plan is only read once it is made, so sharing them
between the groups of a run gives each the result that planning it alone would give.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from codemods.facts.groups import ClassRef, Group, find_groups
from codemods.merge_broadcasts.groups import plan_group
from codemods.merge_broadcasts.runner_model import RunnerPlan
from codemods.merge_broadcasts.runner_rewrite import input_class
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.toolkit import cstutil, layout, unparsed
from codemods.toolkit.kept_text import Kept, kept_text
from codemods.toolkit.positions import Lines
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract

if TYPE_CHECKING:
    from codemods.merge_broadcasts.shared_helpers import Helpers
    from codemods.merge_broadcasts.shared_worker_input import SharedInput
    from codemods.merge_broadcasts.worker_hoist import Hoist

Plans = tuple[list[RunnerPlan], list[WorkerPlan]]
#: a rewritten worker class, the generic runner parents it names, whether it uses ``Type``
Worker = tuple[cst.ClassDef, list[tuple[Path, str]], bool]


@dataclass
class ImportSites:
    """What :func:`.rewrite.import_path` finds, kept for a run: per directory, its
    modules in the project (sorted); per module, the modules it imports from, in order,
    each with the file it resolves to."""

    modules: dict[Path, list[Path]] = field(default_factory=dict)
    imports: dict[Path, list[tuple[str, int, Path]]] = field(default_factory=dict)


class Planned:
    """The run's sources (every file as read), parsed and planned on demand, once."""

    def __init__(
        self, sources: Mapping[Path, bytes], trees: Mapping[Path, ast.Module] | None = None
    ) -> None:
        self.sources = sources
        #: the ``ast`` of the files that have one (a file whose facts were cached has none)
        self.trees = trees or {}
        self._kept: dict[Path, Kept | None] = {}
        self._modules: dict[Path, cst.Module] = {}
        self._lines: dict[Path, Lines] = {}
        self._plans: dict[tuple[ClassRef, ...], Plans | Exception] = {}
        #: the helpers of each directory (:func:`.shared_helpers.shared_helpers` fills it)
        self.helpers: dict[Path, Helpers] = {}
        self._inputs: dict[int, tuple[RunnerPlan, list[cst.BaseStatement]]] = {}
        self._groups: tuple[Project, list[Group]] | None = None
        #: the shared worker inputs of each directory (:mod:`.rewrite` fills it)
        self.worker_inputs: dict[
            tuple[Path, int, frozenset[ClassRef]], dict[ClassRef, SharedInput]
        ] = {}
        #: the shared step of each directory (:mod:`.rewrite` fills it)
        self.hoists: dict[tuple[Path, frozenset[ClassRef]], Hoist] = {}
        #: directories whose shared step did not verify: their workers keep their own
        self.no_hoist: set[Path] = set()
        self._workers: dict[tuple[int, str, tuple[str, ...]], tuple[WorkerPlan, Worker]] = {}
        self._limits: dict[Path, int] = {}
        self._sites: tuple[Project, ImportSites] | None = None
        #: the words that make a function's body parsed (:func:`.unparsed.parse`);
        #: None: every body is parsed
        self.words: frozenset[str] | None = None
        #: the attributes whose assignments make a function's body parsed: the runner
        #: attributes, which the merge annotates where a worker assigns them
        self.bound: frozenset[str] = frozenset()
        self._own_trees: dict[Path, ast.Module | None] = {}

    def worker(
        self,
        plan: WorkerPlan,
        runner_plans: list[RunnerPlan],
        contract: Contract,
        asserted: Sequence[str],
        make: Callable[..., Worker],
    ) -> Worker:
        """The worker class as the merge writes it (``make``: :func:`.rewrite.final_worker`),
        made once per plan and input (a directory's shared step reads every worker)."""
        key = (id(plan), plan.input_name, tuple(asserted))
        found = self._workers.get(key)
        if found is None or found[0] is not plan:
            found = (plan, make(plan, runner_plans, contract, asserted))
            self._workers[key] = found
        return found[1]

    def line_limit(self, start: Path) -> int:
        """:func:`layout.line_limit`, read once per directory for the run (every group
        and shared module of a directory asks it; each read looks for configuration
        files in every directory above)."""
        here = start if start.is_dir() else start.parent
        if here not in self._limits:
            self._limits[here] = layout.line_limit(start)
        return self._limits[here]

    def import_sites(self, project: Project) -> ImportSites:
        """How each module of the run names its siblings of a directory, as far as
        :func:`.rewrite.import_path` has asked (it fills this; for ``project`` only)."""
        if self._sites is None or self._sites[0] is not project:
            self._sites = (project, ImportSites())
        return self._sites[1]

    def module(self, path: Path) -> cst.Module:
        """The file's module, parsed on first use."""
        return self.modules([path])[path]

    def groups(self, project: Project) -> list[Group]:
        """``find_groups(project)[0]``, found once (the list is only read)."""
        if self._groups is None or self._groups[0] is not project:
            self._groups = (project, find_groups(project)[0])
        return self._groups[1]

    def modules(self, files: Iterable[Path]) -> dict[Path, cst.Module]:
        """Each file's module, parsed on first use (:func:`cstutil.parse_module`), but
        for the function bodies that name none of :attr:`words`, where the run has the
        file's ``ast`` (:mod:`codemods.toolkit.unparsed`)."""
        out: dict[Path, cst.Module] = {}
        for path in files:
            if path not in self._modules:
                data, module = self.sources[path], None
                if self.words is not None:
                    tree = self._tree(path)
                    if tree is not None:
                        module = unparsed.parse(data, tree, self.words, self.bound)
                if module is None:
                    module = cstutil.parse_module(data)
                else:
                    cstutil.remember_code(module, data.decode("utf-8"))
                self._modules[path] = module
            out[path] = self._modules[path]
        return out

    def carry(self, old: Planned, keep: Callable[[Path], bool]) -> None:
        """Take over what the run told ``old`` (:attr:`no_hoist`) and the modules it
        parsed of the files ``keep`` accepts."""
        self.no_hoist |= old.no_hoist
        for path, module in old._modules.items():
            if keep(path):
                self._modules[path] = module

    def kept_text(self, path: Path) -> Kept | None:
        """The text of the statements of the file's module (:mod:`codemods.toolkit.kept_text`),
        read once; None for a file whose module does not print back its bytes as UTF-8.
        Its ``ast`` is the run's, or (facts from the cache) parsed here: a parse costs
        less than the print of the statements it spares."""
        if path not in self._kept:
            module, data = self.module(path), self.sources[path]
            text = cstutil.module_code(module)
            found = None
            if text.encode("utf-8", "surrogatepass") == data:
                tree = self._tree(path)
                if tree is not None:
                    found = kept_text(module, tree, text)
            self._kept[path] = found
        return self._kept[path]

    def _tree(self, path: Path) -> ast.Module | None:
        """The file's ``ast``: the run's, or (facts from the cache) parsed here once."""
        tree = self.trees.get(path)
        if tree is None and path not in self._own_trees:
            try:
                tree = ast.parse(self.sources[path], filename=str(path))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                tree = None
            self._own_trees[path] = tree
        return tree if tree is not None else self._own_trees.get(path)

    def lines(self, path: Path) -> Lines:
        """The line index of the file's module (resolved once, on first use), counting
        from the statements' kept text where that needs no ``ast`` parse of its own (the
        run's ``ast`` of the file, or a kept text read already)."""
        if path not in self._lines:
            module = self.modules([path])[path]
            owner = weakref.ref(self)  # (the lines are kept here: no cycle through them)

            def kept() -> Kept | None:
                planned = owner()
                if planned is None or (path not in planned.trees and path not in planned._kept):
                    return None
                return planned.kept_text(path)

            self._lines[path] = Lines(module, kept)
        return self._lines[path]

    def plans(self, group: Group, project: Project, contract: Contract) -> Plans:
        """The group's plans; raises again what planning it raised (a Refusal)."""
        key = (*group.workers, *group.runners)
        if key not in self._plans:
            try:
                modules = self.modules(group.files)
                self._plans[key] = plan_group(group, modules, project, contract, self.lines)
            except Exception as exc:  # kept: asked again, the group fails the same way
                self._plans[key] = exc
        found = self._plans[key]
        if isinstance(found, Exception):
            raise found
        return found

    def release(self) -> None:
        """Drop the errors kept for the groups whose planning failed (the run is over):
        each holds, through its traceback, the frames that asked for it, and so this
        object and every tree it keeps, in a cycle only the garbage collector frees."""
        for key, found in self._plans.items():
            if isinstance(found, Exception):
                self._plans[key] = found.with_traceback(None)

    def input_class(
        self, plan: RunnerPlan, base: str, contract: Contract
    ) -> list[cst.BaseStatement]:
        """:func:`.runner_rewrite.input_class` of a planned runner, made once (the
        helpers of its directory are found in it, then the rewrite writes it)."""
        found = self._inputs.get(id(plan))
        if found is None or found[0] is not plan:
            found = (plan, input_class(plan, base, contract))
            self._inputs[id(plan)] = found
        return list(found[1])
