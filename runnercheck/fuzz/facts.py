"""What the static analysis knows about the input classes ``fuzz`` round-trips.

``check``'s facts of the source files around a target (read with ``ast``, never
imported) tell, for each input class, which of its fields its dict leaves out and
whether that is harmless: a field that no runner building the class reads on the path
every rank runs (or a callable, or a class only single-rank workers rebuild) stays on
the driver, as RC103 says in a note; so does one whose declaration's comment says it
is not broadcast and is the driver's. Those fields are not reported when the round
trip loses them. A field that holds another input class (vLLM's multi-step input holds
the single-step one) is judged with that class's own facts. A field the analysis
cannot prove driver-only (no runner in the analysed files builds the class, or a
runner reads it on every rank) is still reported, with the reason; and the classes of
a path target are the ones the analysis finds (dataclasses with both contract
methods), with the composed steps its workers run (the input classes rebuilt from one
merged dict, in order).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import re
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.prefilter import might_matter, needles
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract
from runnercheck.files import DEFAULT_MAX_FILE_SIZE, ReadError, read_source

#: Files read around one target at most (a module alone in a large directory, such as
#: site-packages, is read with nothing around it past this).
MAX_FILES = 400


@dataclass(frozen=True)
class FieldFact:
    """Why a field that the class's dict leaves out is (``proven``) or may not be
    driver-only."""

    proven: bool
    reason: str


@dataclass(frozen=True)
class InputClass:
    """An input class the analysis found: where, and its fields the dict leaves out."""

    module: str
    name: str
    path: str
    line: int
    left_out: dict[str, FieldFact] = field(default_factory=dict)
    #: Fields the dict sends in part, through a helper that puts some of their values
    #: under keys of their own (vLLM's sampling metadata: only
    #: ``selected_token_indices``), with the dict's keys: receivers rebuild such a field
    #: from those keys alone, so what it holds besides them stays on the driver.
    partly_sent: dict[str, frozenset[str]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.module}:{self.name}"


@dataclass
class StaticFacts:
    """The input classes of the analysed files, by ``module:Class``."""

    classes: dict[str, InputClass] = field(default_factory=dict)
    #: The composed steps the workers run: the ``module:Class`` of each input class
    #: the receiving ranks rebuild from one merged dict, in that order.
    steps: list[tuple[str, ...]] = field(default_factory=list)

    def of(self, cls: type) -> InputClass | None:
        return self.classes.get(f"{cls.__module__}:{cls.__qualname__}")

    def driver_only(self, cls: type, name: str) -> bool:
        """The analysis proves the field stays on the driver."""
        found = self.of(cls)
        fact = found.left_out.get(name) if found is not None else None
        return fact is not None and fact.proven

    def nested(self, cls: type, name: str) -> type | None:
        """The input class (one the analysis found) that field ``name`` of ``cls`` is
        annotated with, alone or inside an Optional (vLLM's multi-step input holds the
        single-step input as ``frozen_model_input``); None for any other field. Such a
        field is judged with that class's own facts."""
        if self.of(cls) is None or not dataclasses.is_dataclass(cls):
            return None
        from runnercheck.fuzz.strategies import field_annotations

        try:
            annotation = field_annotations(cls).get(name)
        except Exception:  # an annotation that does not resolve: not an input class
            return None
        candidates = typing.get_args(annotation) or (annotation,)
        found = [c for c in candidates if isinstance(c, type) and self.of(c) is not None]
        return found[0] if len(found) == 1 else None

    def rebuilt_in_part(self, cls: type, path: str) -> bool:
        """``path`` (``field.inner...``) lies in a field the dict sends in part, and is
        not among the keys it sends: receivers never get it, by design. A path into a
        field that holds another input class is judged with that class's facts."""
        found = self.of(cls)
        outer, dot, rest = path.partition(".")
        if found is None or not dot:
            return False
        if outer in found.partly_sent:
            inner = rest.partition(".")[0].partition("[")[0]
            return inner not in found.partly_sent[outer]
        inner_cls = self.nested(cls, outer)
        return inner_cls is not None and self.rebuilt_in_part(inner_cls, rest)

    def unproven(self, cls: type, name: str) -> str | None:
        """Why a field the dict leaves out may not be driver-only (None: it is sent, or
        the class is unknown to the analysis)."""
        found = self.of(cls)
        fact = found.left_out.get(name) if found is not None else None
        return fact.reason if fact is not None and not fact.proven else None

    def unproven_at(self, cls: type, path: str) -> tuple[type, str] | None:
        """For a field path (``frozen_model_input.token_types``): the input class that
        declares its last field (inside the input classes the path goes through) and
        why that field may not be driver-only; None when the analysis says nothing."""
        outer, dot, rest = path.partition(".")
        name = outer.partition("[")[0]
        if not dot:
            reason = self.unproven(cls, name)
            return (cls, reason) if reason is not None else None
        inner_cls = self.nested(cls, outer)
        return self.unproven_at(inner_cls, rest) if inner_cls is not None else None


def module_name_for(path: Path) -> tuple[str, Path]:
    """The dotted module name of a ``.py`` file and the directory above its package."""
    path = path.resolve()
    parts = [path.stem] if path.name != "__init__.py" else []
    directory = path.parent
    while (directory / "__init__.py").is_file():
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts), directory


def source_files(directory: Path) -> list[Path]:
    """The ``.py`` files directly in ``directory`` (regular files, sorted)."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return []
    return [
        Path(e.path) for e in entries if e.name.endswith(".py") and e.is_file(follow_symlinks=False)
    ][:MAX_FILES]


def analyse(files: Iterable[Path], contract: Contract) -> StaticFacts:
    """The facts of ``files`` (those the prefilter says can matter)."""
    wanted = needles(contract)
    modules: list[ModuleFacts] = []
    names: dict[str, str] = {}
    for path in dict.fromkeys(p.resolve() for p in files):
        try:
            data = read_source(path, DEFAULT_MAX_FILE_SIZE)
        except (ReadError, OSError):
            continue
        if not might_matter(data, wanted):
            continue
        facts = extract_source(data, str(path), contract)
        if facts.syntax_error is None:
            modules.append(facts)
            names[str(path)] = module_name_for(path)[0]
    return facts_of(Project(modules, contract), names)


def facts_of(project: Project, module_names: dict[str, str]) -> StaticFacts:
    """Every concrete input class of the project's modules named in ``module_names``
    (path -> dotted name), with the fields its dict leaves out."""
    out = StaticFacts()
    for cls in project.all_classes():
        module = module_names.get(cls.path)
        if module is None or not cls.is_dataclass:
            continue
        if project.produced(cls) is None or project.is_abstract(cls):
            continue
        if project.resolve_method(cls, project.contract.from_dict_method) is None:
            continue
        found = InputClass(
            module, cls.name, cls.path, cls.line, left_out(project, cls), partly_sent(project, cls)
        )
        out.classes.setdefault(found.key, found)
    for step in project.merged.merged_steps():
        parts = tuple(
            f"{module_names[part.path]}:{part.name}"
            for part in step.parts
            if part.path in module_names
        )
        if (
            step.runner is not None
            and len(parts) == len(step.parts) > 1
            and all(part in out.classes for part in parts)
            and parts not in out.steps
        ):
            out.steps.append(parts)
    return out


def partly_sent(project: Project, cls: ClassFacts) -> dict[str, frozenset[str]]:
    """Fields whose values reach the dict only through a helper, not under their own
    key nor as a dump of all their fields (``attn_metadata.asdict_zerocopy()``), with
    the keys of the dict."""
    produced = project.produced(cls)
    if produced is None or produced.open or produced.all_fields:
        return {}
    dumped = {dump.partition(".")[0] for dump in produced.dumps}
    keys = frozenset(produced.keys)
    return {
        name: keys for name in produced.fields if name not in produced.keys and name not in dumped
    }


def left_out(project: Project, cls: ClassFacts) -> dict[str, FieldFact]:
    """The fields (inherited too) that the class's dict never carries and that are not
    declared driver-only, each with whether the analysis proves it stays on the driver
    (RC103's reasoning, applied to the class as built)."""
    produced = project.produced(cls)
    fields = project.dataclass_fields(cls)
    if produced is None or fields is None or produced.all_fields or produced.unknown_parent:
        return {}
    delivered = project.delivered_keys(cls)
    reads = project.every_rank_reads(cls)
    unreachable = project.unreachable_input(cls)
    out: dict[str, FieldFact] = {}
    for name, (owner, fld) in fields.items():
        if name in produced.keys or name in produced.fields or project.is_driver_only(owner, fld):
            continue
        if name in delivered or name in project.delivered_keys(owner):
            # the worker's merged dict carries it under another part's key (to the class
            # that declares the field, and so to this one, built from the same dict)
            out[name] = FieldFact(True, "another part of the worker's merged dict sends it")
        elif unreachable is not None:
            out[name] = FieldFact(True, unreachable)
        elif "Callable" in fld.annotation:
            out[name] = FieldFact(True, "a callable cannot be broadcast; it is the driver's own")
        elif (comment := declared_unsent(owner.path, fld.line)) is not None:
            out[name] = FieldFact(
                True,
                f"the comment above it says it is not broadcast and is the driver's "
                f"({Path(owner.path).name}:{comment}); the other ranks hold its default",
            )
        elif reads is None:
            out[name] = FieldFact(
                False,
                f"no runner in the files beside it builds {cls.name}: nothing proves it "
                "driver-only",
            )
        elif name not in reads:
            out[name] = FieldFact(
                True, "no runner that builds it reads the field on the path every rank runs"
            )
        else:
            runners = ", ".join(sorted({r.name for r in project.runners_of(cls)}))
            out[name] = FieldFact(
                False,
                f"a runner that builds it ({runners}) reads it on the path every rank runs "
                "(check: RC103)",
            )
    return out


#: A comment that says a field is not broadcast (``We do not broadcast it``,
#: ``never broadcast``, ``isn't broadcast``) ...
_NOT_BROADCAST = re.compile(r"(?:\bnot|\bnever|n't)\s+(?:be\s+|been\s+)?broadcast", re.IGNORECASE)
#: ... and that it is the driver's (``only used by the driver worker``).
_DRIVER = re.compile(r"\bdriver\b", re.IGNORECASE)


def declared_unsent(path: str, line: int) -> int | None:
    """The first line of the comment right above a field's line that declares it not
    broadcast and the driver's own (vLLM's ``# Used for speculative decoding. We do not
    broadcast it because it is only used by the driver worker.``), or None. The author
    says so where the field is declared, as a ``# Driver-only:`` comment would: the
    other ranks are meant to hold the field's default."""
    lines = _source_lines(path)
    index = line - 2
    first = None
    while 0 <= index < len(lines) and lines[index].lstrip().startswith("#"):
        first = index
        index -= 1
    if first is None:
        return None
    text = " ".join(lines[i].lstrip().lstrip("#").strip() for i in range(first, line - 1))
    if _NOT_BROADCAST.search(text) and _DRIVER.search(text):
        return first + 1
    return None


def _source_lines(path: str) -> tuple[str, ...]:
    """The lines of a source file (read once while it stays as it is)."""
    try:
        stat = os.stat(path)
    except OSError:
        return ()
    return _read_lines(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _read_lines(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    try:
        data = read_source(path, DEFAULT_MAX_FILE_SIZE)
    except (ReadError, OSError):
        return ()
    return tuple(data.decode("utf-8", "replace").splitlines())


def around(classes: Iterable[type], extra: Iterable[Path] = ()) -> list[Path]:
    """The files the analysis reads for ``classes``: every ``.py`` file beside each
    class's own file, and ``extra`` files."""
    directories: dict[Path, None] = {}
    for cls in classes:
        try:
            source = inspect.getsourcefile(cls)
        except (TypeError, OSError):
            continue
        if source:
            directories[Path(source).resolve().parent] = None
    files: list[Path] = list(extra)
    for directory in directories:
        files.extend(source_files(directory))
    return files
