"""Facts read with the stdlib ``ast`` (fast): classes, imports, broadcasts, and
the worker/runner groups that ``merge-broadcasts`` rewrites together.

Which worker/runner pairs broadcast twice per step comes from the ``check``
engine's project facts (:class:`runnercheck.analysis.project.Project`, the same
analysis that reports RC106), so ``migrate`` rewrites exactly what ``check``
flags. A *group* is the worker class that defines the step plus every runner
class (and runner base class) it pairs with; groups sharing a runner merge.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from runnercheck.analysis.extract import extract_tree
from runnercheck.analysis.model import ClassFacts as CheckClass
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract


@dataclass
class ClassFacts:
    name: str
    node: ast.ClassDef
    bases: list[str]
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]

    @property
    def line(self) -> int:
        return self.node.lineno


@dataclass
class ModuleFacts:
    path: Path
    tree: ast.Module
    classes: dict[str, ClassFacts]
    #: local name -> (module, imported name or None for ``import x``, level)
    imports: dict[str, tuple[str, str | None, int]]


@dataclass(frozen=True)
class ClassRef:
    path: Path
    name: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.name}"


@dataclass
class Broadcast:
    path: Path
    cls: str
    method: str
    line: int
    send: bool
    #: the send's argument is an empty dict literal: the stop signal
    stop: bool


@dataclass
class Group:
    """One worker/runner group (paired broadcast) or a note about a non-group."""

    workers: list[ClassRef] = field(default_factory=list)
    runners: list[ClassRef] = field(default_factory=list)
    #: runner attribute on the worker (``self.model_runner``)
    runner_attr: dict[ClassRef, str] = field(default_factory=dict)
    refusal: tuple[str, Path, int, str] | None = None

    @property
    def files(self) -> list[Path]:
        seen: dict[Path, None] = {}
        for ref in [*self.workers, *self.runners]:
            seen.setdefault(ref.path, None)
        return list(seen)

    @property
    def label(self) -> str:
        names = [r.name for r in self.workers] + [r.name for r in self.runners]
        return "/".join(names) if names else "?"


@dataclass
class Note:
    """A worker/runner pair that is left alone, and why (not a refusal)."""

    path: Path
    line: int
    label: str
    message: str


def module_facts(path: Path, tree: ast.Module) -> ModuleFacts:
    classes: dict[str, ClassFacts] = {}
    imports: dict[str, tuple[str, str | None, int]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods = {
                item.name: item
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
            bases = [ast.unparse(base) for base in node.bases]
            classes[node.name] = ClassFacts(node.name, node, bases, methods)
    for found in _module_level(tree.body):
        if isinstance(found, ast.ImportFrom):
            for alias in found.names:
                imports[alias.asname or alias.name] = (found.module or "", alias.name, found.level)
        elif isinstance(found, ast.Import):
            for alias in found.names:
                local = alias.asname or alias.name.split(".")[0]
                imports[local] = (alias.name if alias.asname else local, None, 0)
    return ModuleFacts(path, tree, classes, imports)


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Module-level statements, looking into ``if``/``try`` blocks (guarded imports)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out += _module_level(stmt.body) + _module_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out += _module_level(stmt.body) + _module_level(stmt.orelse)
            for handler in stmt.handlers:
                out += _module_level(handler.body)
    return out


def is_broadcast_call(node: ast.AST, contract: Contract) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = (
        func.id
        if isinstance(func, ast.Name)
        else func.attr
        if isinstance(func, ast.Attribute)
        else None
    )
    return name == contract.broadcast_function


def broadcast_is_send(call: ast.Call) -> bool:
    return bool(call.args) or any(kw.arg == "tensor_dict" for kw in call.keywords)


def class_broadcasts(module: ModuleFacts, cls: ClassFacts, contract: Contract) -> list[Broadcast]:
    found: list[Broadcast] = []
    for name, method in cls.methods.items():
        for node in ast.walk(method):
            if is_broadcast_call(node, contract):
                assert isinstance(node, ast.Call)
                send = broadcast_is_send(node)
                payload = node.args[0] if node.args else None
                stop = send and isinstance(payload, ast.Dict) and not payload.keys
                found.append(Broadcast(module.path, cls.name, name, node.lineno, send, stop))
    return found


class Index:
    """All parsed modules of a run, with import resolution between them."""

    def __init__(self, modules: Iterable[ModuleFacts], contract: Contract) -> None:
        self.contract = contract
        self.modules: dict[Path, ModuleFacts] = {m.path: m for m in modules}
        self._by_dotted: dict[str, list[Path]] = {}
        for path in self.modules:
            parts = list(path.with_suffix("").parts)
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            for start in range(len(parts)):
                self._by_dotted.setdefault(".".join(parts[start:]), []).append(path)

    def module_file(self, origin: Path, module: str, level: int) -> Path | None:
        if level:
            base = origin.parent
            for _ in range(level - 1):
                base = base.parent
            target = base.joinpath(*module.split(".")) if module else base
            for candidate in (target.with_suffix(".py"), target / "__init__.py"):
                if candidate in self.modules:
                    return candidate
            return None
        parts = module.split(".")
        for start in range(len(parts)):
            # a renamed top package (a copy of ``vllm/`` under another name): try the
            # shorter suffixes, nearest to the importing file first
            candidates = self._by_dotted.get(".".join(parts[start:]), [])
            if len(candidates) == 1 and (start == 0 or candidates[0].parent == origin.parent):
                return candidates[0]
            if candidates:
                best = sorted(candidates, key=lambda p: -len(_common(p, origin)))
                if start == 0 or best[0].parent == origin.parent:
                    return best[0]
        return None

    def resolve_class(self, origin: Path, dotted: str) -> ClassRef | None:
        """The class that the name ``dotted`` means in the module ``origin``."""
        module = self.modules.get(origin)
        if module is None:
            return None
        head, _, rest = dotted.partition(".")
        if not rest and head in module.classes:
            return ClassRef(origin, head)
        imported = module.imports.get(head)
        if imported is None:
            return None
        mod, name, level = imported
        if name is None:
            # ``import pkg.mod`` then ``pkg.mod.Class``
            mod_path, _, cls_name = dotted.rpartition(".")
            target = self.module_file(origin, mod_path, 0)
            if target and cls_name in self.modules[target].classes:
                return ClassRef(target, cls_name)
            return None
        if rest:
            return None
        target = self.module_file(origin, mod, level)
        if target is None:
            # ``from pkg import module`` style is not a class import
            return None
        if name in self.modules[target].classes:
            return ClassRef(target, name)
        # re-exported: follow one more import hop
        inner = self.modules[target].imports.get(name)
        if inner and inner[1]:
            again = self.module_file(target, inner[0], inner[2])
            if again and inner[1] in self.modules[again].classes:
                return ClassRef(again, inner[1])
        return None

    def facts(self, ref: ClassRef) -> ClassFacts:
        return self.modules[ref.path].classes[ref.name]

    def bases(self, ref: ClassRef) -> list[ClassRef]:
        found = []
        for base in self.facts(ref).bases:
            resolved = self.resolve_class(ref.path, base)
            if resolved is not None:
                found.append(resolved)
        return found

    def mro(self, ref: ClassRef) -> list[ClassRef]:
        order: list[ClassRef] = []
        todo = [ref]
        while todo:
            current = todo.pop(0)
            if current in order:
                continue
            order.append(current)
            todo.extend(self.bases(current))
        return order

    def broadcasts(self, ref: ClassRef) -> list[Broadcast]:
        module = self.modules[ref.path]
        return class_broadcasts(module, module.classes[ref.name], self.contract)

    def all_classes(self) -> Iterable[ClassRef]:
        for path, module in self.modules.items():
            for name in module.classes:
                yield ClassRef(path, name)


def _common(a: Path, b: Path) -> tuple[str, ...]:
    out = []
    for x, y in zip(a.parts, b.parts, strict=False):
        if x != y:
            break
        out.append(x)
    return tuple(out)


def project_of(index: Index) -> Project:
    """The check engine's cross-file facts over the same parsed trees."""
    facts = [
        extract_tree(module.tree, str(path), contract=index.contract)
        for path, module in index.modules.items()
    ]
    return Project(facts, index.contract)


def _ref(cls: CheckClass) -> ClassRef:
    return ClassRef(Path(cls.path), cls.name)


def _label(worker: str, runners: Iterable[str]) -> str:
    return "/".join([worker, *runners])


def find_groups(index: Index, project: Project | None = None) -> tuple[list[Group], list[Note]]:
    """Worker/runner groups with a paired broadcast, plus notes on pairs left alone."""
    project = project or project_of(index)
    contract = index.contract
    groups: dict[ClassRef, Group] = {}
    notes: list[Note] = []
    noted: set[tuple[str, str]] = set()
    paired_runners: set[ClassRef] = set()
    for worker in sorted(project.workers(), key=lambda c: (c.path, c.line)):
        if project.is_abstract(worker):
            continue
        method = project.resolve_method(worker, contract.execute_method)
        if method is None:
            continue
        owner = _ref(method.owner)
        candidates = project.runner_candidates(worker)
        runner_attrs = {
            attr: names
            for klass in project.mro(worker)
            for attr, names in klass.self_attrs.items()
            if "runner" in attr.lower()
        }
        own = project.broadcasts_per_step(worker, None)
        if not candidates:
            if not runner_attrs and max(c.count for c in own.values()) >= 1:
                key = (worker.name, "")
                if key not in noted:
                    noted.add(key)
                    notes.append(
                        Note(
                            Path(worker.path),
                            worker.line,
                            worker.name,
                            "broadcasts but drives no model runner: left alone",
                        )
                    )
            if runner_attrs and max(c.count for c in own.values()) >= 1:
                attr, names = next(iter(runner_attrs.items()))
                group = groups.setdefault(owner, Group(workers=[owner]))
                group.refusal = (
                    "MIG103",
                    owner.path,
                    method.owner.line,
                    f"{worker.name} drives `self.{attr}` ({', '.join(names) or '?'}), "
                    "which is not a runner class found in the given paths",
                )
            continue
        for attr, runners in candidates.items():
            for runner in runners:
                counts = project.broadcasts_per_step(worker, runner)
                most = max(c.count for c in counts.values())
                if most > 1:
                    group = groups.setdefault(owner, Group(workers=[owner]))
                    group.runner_attr[owner] = attr
                    for member in project.mro(runner):
                        ref = _ref(member)
                        if ref.path in index.modules and member.name not in contract.runner_bases:
                            if ref not in group.runners:
                                group.runners.append(ref)
                            paired_runners.add(ref)
                    continue
                key = (worker.name, runner.name)
                if key in noted:
                    continue
                noted.add(key)
                why = (
                    "no broadcast in the worker or its runner"
                    if most == 0
                    else "one broadcast per step already"
                )
                notes.append(
                    Note(
                        Path(worker.path),
                        worker.line,
                        _label(worker.name, [runner.name]),
                        f"{why}: left alone",
                    )
                )
    # merge groups that share a runner or a file (a file is rewritten once)
    merged: list[Group] = []
    for group in groups.values():
        for other in merged:
            if set(other.runners) & set(group.runners) or set(other.files) & set(group.files):
                other.workers.extend(w for w in group.workers if w not in other.workers)
                other.runners.extend(r for r in group.runners if r not in other.runners)
                other.runner_attr.update(group.runner_attr)
                other.refusal = other.refusal or group.refusal
                break
        else:
            merged.append(group)
    # runners that broadcast but that no worker pairs with
    for ref in sorted(index.all_classes(), key=lambda r: (str(r.path), r.name)):
        if ref in paired_runners or any(ref in g.runners for g in merged):
            continue
        casts = [b for b in index.broadcasts(ref) if b.send and not b.stop]
        if not casts:
            continue
        cls = project.modules[str(ref.path)].classes.get(ref.name)
        if cls is None or project.is_worker(cls):
            continue
        if not project.is_runner(cls) and "Runner" not in ref.name:
            notes.append(
                Note(
                    ref.path,
                    casts[0].line,
                    ref.name,
                    f"broadcasts in `{casts[0].method}` but drives no model runner: left alone",
                )
            )
            continue
        if casts[0].method == contract.prepare_input_method:
            notes.append(
                Note(
                    ref.path,
                    casts[0].line,
                    ref.name,
                    f"broadcasts inside `{casts[0].method}` (merged API already; see "
                    "`runnercheck check`, RC105): left alone",
                )
            )
            continue
        held = any(
            ref in [_ref(r) for rs in project.runner_candidates(w).values() for r in rs]
            for w in project.workers()
        )
        if held:
            continue
        group = Group(runners=[ref])
        group.refusal = (
            "MIG104",
            ref.path,
            casts[0].line,
            f"{ref.name} broadcasts in `{casts[0].method}` but no worker in the given paths "
            "drives it",
        )
        merged.append(group)
    return merged, notes
