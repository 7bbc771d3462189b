"""Classes across files: name and import resolution, the one MRO (C3), method lookup
along it, module-level functions, dataclass fields and driver-only declarations."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePath

from runnercheck.analysis.model import (
    ClassFacts,
    FieldFacts,
    FunctionFacts,
    ModuleFacts,
    Role,
)
from runnercheck.analysis.syntax import last_name
from runnercheck.contract import VLLM, Contract

#: Base names that contribute no dataclass fields and no contract methods.
NEUTRAL_BASES = frozenset(
    {"object", "ABC", "ABCMeta", "Generic", "Protocol", "NamedTuple", "Enum", "Any"}
)
ROLES: tuple[Role, ...] = ("driver", "non-driver")


@dataclass(frozen=True)
class MethodRef:
    """A method found by MRO lookup: the class that defines it and its facts."""

    owner: ClassFacts
    func: FunctionFacts


def module_parts(path: str) -> tuple[str, ...]:
    parts = list(PurePath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return tuple(parts)


class Hierarchy:
    """The class hierarchy of a set of modules (a part of :class:`~runnercheck.analysis.project.Project`)."""

    def __init__(self, modules: Iterable[ModuleFacts], contract: Contract = VLLM) -> None:
        self.contract = contract
        self.modules: dict[str, ModuleFacts] = {m.path: m for m in modules}
        self._by_name: dict[str, list[ClassFacts]] = {}
        self._functions_by_name: dict[str, list[FunctionFacts]] = {}
        self._by_suffix: dict[tuple[str, ...], list[ModuleFacts]] = {}
        self._class_module: dict[int, ModuleFacts] = {}
        for module in self.modules.values():
            for cls in module.classes.values():
                self._by_name.setdefault(cls.name, []).append(cls)
                self._class_module[id(cls)] = module
            for func in module.functions.values():
                self._functions_by_name.setdefault(func.name, []).append(func)
            parts = module_parts(module.path)
            for i in range(len(parts)):
                self._by_suffix.setdefault(parts[i:], []).append(module)
        #: The package directories of the analysed files (``vllm``, ``worker``, ...).
        self._packages = {
            part for module in self.modules.values() for part in module_parts(module.path)[:-1]
        }
        self._mro: dict[int, list[ClassFacts]] = {}
        self._resolved: dict[tuple[str, str], ClassFacts | None] = {}
        self._package_dirs: dict[PurePath, bool] = {}
        self._ancestors: dict[int, set[str]] = {}

    # ------------------------------------------------------------ classes
    def module_of(self, cls: ClassFacts) -> ModuleFacts:
        return self._class_module[id(cls)]

    def all_classes(self) -> list[ClassFacts]:
        return [c for m in self.modules.values() for c in m.classes.values()]

    def modules_named(self, dotted_module: str, from_path: str) -> list[ModuleFacts]:
        level = len(dotted_module) - len(dotted_module.lstrip("."))
        name = dotted_module.lstrip(".")
        parts = tuple(p for p in name.split(".") if p)
        if level:
            base = module_parts(from_path)[:-1]
            if level > 1:
                base = base[: len(base) - (level - 1)]
            parts = base + parts
        return self._by_suffix.get(parts, []) if parts else []

    def module_file(self, from_path: str, module: str, level: int) -> str | None:
        """The path of the module that ``from_path`` imports as ``module`` at relative
        ``level``, or None when it is not a file of the run.

        An absolute name is matched by its full dotted path (:meth:`dotted_name`), or,
        for a file outside every package, by the longest suffix of the name its path
        ends with (loose copies of a package's files); a module of another package with
        the same last name is never it. Nearest the importing file first."""
        origin = PurePath(from_path)
        if level:
            base = origin.parent
            for _ in range(level - 1):
                base = base.parent
            target = base.joinpath(*module.split(".")) if module else base
            for candidate in (target.with_suffix(".py"), target / "__init__.py"):
                if str(candidate) in self.modules:
                    return str(candidate)
            return None
        parts = tuple(module.split("."))
        for start in range(len(parts)):
            candidates = [
                m for m in self._by_suffix.get(parts[start:], []) if self._names(m.path, parts)
            ]
            if not candidates:
                continue
            paths = sorted(
                (PurePath(m.path) for m in candidates),
                key=lambda p: -len(_common_prefix(p, origin)),
            )
            if start == 0 or paths[0].parent == origin.parent:
                return str(paths[0])
        return None

    def _names(self, path: str, parts: tuple[str, ...]) -> bool:
        """Whether the absolute dotted name ``parts`` can be the module at ``path``:
        its full dotted name, or any name ending with its stem when it lies outside
        every package (loose files, whose name depends on where they are imported from)."""
        dotted = self.dotted_name(path)
        if len(dotted) > 1 or (dotted and PurePath(path).name == "__init__.py"):
            return dotted == parts
        return parts[-1:] == dotted

    def dotted_name(self, path: str) -> tuple[str, ...]:
        """The full dotted module name of the file at ``path``: its stem under every
        directory above it that is a package (an ``__init__.py`` in the run or on disk),
        the stem alone outside a package."""
        origin = PurePath(path)
        names = [] if origin.name == "__init__.py" else [origin.stem]
        directory = origin.parent
        while self._is_package(directory):
            names.append(directory.name)
            if directory.parent == directory:
                break
            directory = directory.parent
        return tuple(reversed(names))

    def _is_package(self, directory: PurePath) -> bool:
        known = self._package_dirs.get(directory)
        if known is None:
            init = directory / "__init__.py"
            known = str(init) in self.modules or os.path.isfile(init)
            self._package_dirs[directory] = known
        return known

    def _below(self, mod_name: str, cls_name: str, from_path: str) -> ClassFacts | None:
        """The class ``cls_name`` of a module inside package ``mod_name``."""
        if mod_name.startswith("."):
            level = len(mod_name) - len(mod_name.lstrip("."))
            base = module_parts(from_path)[:-level]
            wanted = base + tuple(p for p in mod_name.lstrip(".").split(".") if p)
        else:
            wanted = tuple(mod_name.split("."))
        size = len(wanted)
        for cls in self._by_name.get(cls_name, []):
            parts = module_parts(cls.path)[:-1]
            if any(parts[i : i + size] == wanted for i in range(len(parts) - size + 1)):
                return cls
        return None

    def resolve_class(self, name: str, from_path: str) -> ClassFacts | None:
        """The class a (possibly dotted) name refers to in the file ``from_path``
        (each name and file resolved once)."""
        key = (name, from_path)
        if key in self._resolved:
            return self._resolved[key]
        found = self._resolve_class(name, from_path)
        self._resolved[key] = found
        return found

    def _resolve_class(self, name: str, from_path: str) -> ClassFacts | None:
        simple = last_name(name)
        module = self.modules.get(from_path)
        if module is not None:
            if "." not in name and simple in module.classes:
                return module.classes[simple]
            head = name.split(".", 1)[0]
            origin = module.imports.get(head)
            if origin is not None:
                full = origin + name[len(head) :]
                mod_name, _, cls_name = full.rpartition(".")
                for candidate in self.modules_named(mod_name, from_path):
                    if cls_name in candidate.classes:
                        return candidate.classes[cls_name]
                top = mod_name.lstrip(".").split(".", 1)[0]
                if mod_name.startswith(".") or top in self._packages:
                    # imported from a module of the analysed packages that was not read:
                    # only a class of a module below it (a package re-exporting it) is
                    # that class; a namesake elsewhere is another one
                    return self._below(mod_name, cls_name, from_path)
        found = self._by_name.get(simple, [])
        if not found:
            return None
        if len(found) == 1:
            return found[0]
        here = str(PurePath(from_path).parent)
        for cls in found:
            if str(PurePath(cls.path).parent) == here:
                return cls
        return sorted(found, key=lambda c: (c.path, c.line))[0]

    def direct_bases(self, cls: ClassFacts) -> list[ClassFacts | str]:
        out: list[ClassFacts | str] = []
        for base in cls.bases:
            if last_name(base) in NEUTRAL_BASES:
                continue
            resolved = self.resolve_class(base, cls.path)
            out.append(
                resolved if resolved is not None and resolved is not cls else last_name(base)
            )
        return out

    def mro(self, cls: ClassFacts) -> list[ClassFacts]:
        cached = self._mro.get(id(cls))
        if cached is not None:
            return cached
        self._mro[id(cls)] = [cls]  # guards cycles
        seqs: list[list[ClassFacts]] = []
        bases = [b for b in self.direct_bases(cls) if isinstance(b, ClassFacts)]
        for base in bases:
            seqs.append(list(self.mro(base)))
        seqs.append(list(bases))
        result = [cls]
        while True:
            seqs = [s for s in seqs if s]
            if not seqs:
                break
            head = None
            for seq in seqs:
                candidate = seq[0]
                if not any(candidate in s[1:] for s in seqs):
                    head = candidate
                    break
            if head is None:  # inconsistent: fall back to depth-first order
                for seq in seqs:
                    for item in seq:
                        if item not in result:
                            result.append(item)
                break
            result.append(head)
            for seq in seqs:
                if seq and seq[0] is head:
                    seq.pop(0)
        self._mro[id(cls)] = result
        return result

    def ancestor_names(self, cls: ClassFacts) -> set[str]:
        """Names of every base reachable from ``cls`` (in the tree or not), not ``cls``."""
        cached = self._ancestors.get(id(cls))
        if cached is not None:
            return cached
        names: set[str] = set()
        self._ancestors[id(cls)] = names
        for base in self.direct_bases(cls):
            if isinstance(base, str):
                names.add(base)
            else:
                names.add(base.name)
                names |= self.ancestor_names(base)
        return names

    def unresolved_bases(self, cls: ClassFacts) -> set[str]:
        out: set[str] = set()
        for klass in self.mro(cls):
            out.update(b for b in self.direct_bases(klass) if isinstance(b, str))
        return out

    def inherits(self, cls: ClassFacts, names: Iterable[str]) -> bool:
        wanted = set(names)
        return bool(wanted & self.ancestor_names(cls))

    # ------------------------------------------------------------ methods
    def resolve_method(
        self, cls: ClassFacts, name: str, after: ClassFacts | None = None
    ) -> MethodRef | None:
        """``name`` looked up along the MRO of ``cls`` (after ``after`` for ``super()``)."""
        mro = self.mro(cls)
        start = 0
        if after is not None:
            for i, klass in enumerate(mro):
                if klass is after:
                    start = i + 1
                    break
        for klass in mro[start:]:
            func = klass.methods.get(name)
            if func is not None:
                return MethodRef(klass, func)
        return None

    def defines(self, cls: ClassFacts, name: str) -> ClassFacts | None:
        """The first class along the MRO that defines ``name`` (method or class attribute)."""
        for klass in self.mro(cls):
            if name in klass.methods or name in klass.class_attrs:
                return klass
        return None

    def resolve_function(self, callee: str, from_path: str) -> FunctionFacts | None:
        """A module-level function named by ``callee`` as called in ``from_path``."""
        simple = last_name(callee)
        module = self.modules.get(from_path)
        if module is not None:
            if "." not in callee and simple in module.functions:
                return module.functions[simple]
            head = callee.split(".", 1)[0]
            origin = module.imports.get(head)
            if origin is not None:
                full = origin + callee[len(head) :]
                mod_name, _, func_name = full.rpartition(".")
                for candidate in self.modules_named(mod_name, from_path):
                    if func_name in candidate.functions:
                        return candidate.functions[func_name]
        found = self._functions_by_name.get(simple, [])
        return found[0] if len(found) == 1 else None

    # ------------------------------------------------------------- fields
    def unknown_bases(self, cls: ClassFacts) -> set[str]:
        """Bases of ``cls`` (or its ancestors) outside the analysed files that may add
        fields or contract methods."""
        neutral = {*NEUTRAL_BASES, *self.contract.input_bases}
        return {name for name in self.unresolved_bases(cls) if name not in neutral}

    def dataclass_fields(self, cls: ClassFacts) -> dict[str, tuple[ClassFacts, FieldFacts]] | None:
        """All dataclass fields of ``cls`` (inherited too), or None when some base
        outside the tree might add fields."""
        if self.unknown_bases(cls):
            return None
        fields: dict[str, tuple[ClassFacts, FieldFacts]] = {}
        for klass in reversed(self.mro(cls)):
            if klass.is_dataclass:
                for fld in klass.fields:
                    fields[fld.name] = (klass, fld)
        return fields

    def is_driver_only(self, cls: ClassFacts, fld: FieldFacts) -> bool:
        """Declared driver-only: marker metadata (inline or a constant) or the config list."""
        if fld.driver_only:
            return True
        if fld.metadata_ref is not None and self._is_marker_constant(fld.metadata_ref, cls):
            return True
        return any(self.contract.is_driver_only(k.name, fld.name) for k in self.mro(cls))

    def _is_marker_constant(self, ref: str, cls: ClassFacts) -> bool:
        owner = next(
            (k for k in self.mro(cls) if any(f.metadata_ref == ref for f in k.fields)), cls
        )
        module = self.module_of(owner)
        if "." not in ref and ref in module.driver_only_constants:
            return True
        head = ref.split(".", 1)[0]
        origin = module.imports.get(head)
        if origin is None:
            return False
        full = origin + ref[len(head) :]
        mod_name, _, name = full.rpartition(".")
        return any(
            name in m.driver_only_constants for m in self.modules_named(mod_name, module.path)
        )


def _common_prefix(a: PurePath, b: PurePath) -> tuple[str, ...]:
    out = []
    for x, y in zip(a.parts, b.parts, strict=False):
        if x != y:
            break
        out.append(x)
    return tuple(out)
