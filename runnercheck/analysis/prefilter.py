"""The one prefilter: which files can matter to the contract, decided on raw bytes.

A file is read with ``ast`` only if it mentions one of the contract's names (the
broadcast function, the contract methods, the base classes) or the driver-only
marker, or if it defines a class
whose base is a class found in a file read so far (a subclass that adds fields or
overrides a method, in another file). A file the prefilter leaves out cannot hold a
finding nor anything to migrate. ``runnercheck check`` and ``runnercheck migrate``
both use it; ``check`` follows only the subclasses of :func:`extensible_classes` (a
subclass of an attention backend that a runner's file names in an annotation adds
nothing to the contract).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import TypeVar

from runnercheck.analysis.hierarchy import Hierarchy
from runnercheck.analysis.model import ClassFacts, ModuleFacts, flatten_calls
from runnercheck.analysis.roles import Roles
from runnercheck.contract import DRIVER_ONLY_METADATA_VALUE, Contract

K = TypeVar("K", bound=Hashable)

_CLASS_BASES = re.compile(rb"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", re.MULTILINE)
_NAME = re.compile(rb"[A-Za-z_]\w*")


def needles(contract: Contract) -> tuple[bytes, ...]:
    """Byte strings one of which any file that can matter mentions."""
    names = {
        contract.broadcast_function,
        contract.as_dict_method,
        contract.from_dict_method,
        contract.prepare_input_method,
        contract.make_input_method,
        contract.worker_input,
        *contract.worker_bases,
        *contract.runner_bases,
        *contract.input_bases,
        # a module that defines the driver-only marker (a constant other modules import)
        DRIVER_ONLY_METADATA_VALUE,
        contract.driver_only_key,
    }
    return tuple(sorted(name.encode() for name in names if name))


def might_matter(data: bytes, wanted: tuple[bytes, ...]) -> bool:
    """Whether ``data`` holds one of ``wanted``; a file that holds none of the anchors
    (substrings the needles share) is scanned a handful of times, not once per needle."""
    for anchor, members in _anchored(wanted):
        if anchor in data and (members == (anchor,) or any(m in data for m in members)):
            return True
    return False


#: The shortest substring that stands for several needles.
_ANCHOR_MIN = 6


@functools.lru_cache(maxsize=8)
def _anchored(wanted: tuple[bytes, ...]) -> tuple[tuple[bytes, tuple[bytes, ...]], ...]:
    """``wanted`` as (anchor, needles) groups: every needle of a group contains its
    anchor. A needle that contains another needle is left out (the other one finds it)."""
    unique = list(dict.fromkeys(wanted))
    minimal = [n for n in unique if not any(o != n and o in n for o in unique)]
    groups: list[tuple[bytes, tuple[bytes, ...]]] = [(needle, (needle,)) for needle in minimal]
    merged = True
    while merged:
        merged = False
        for i, j in itertools.combinations(range(len(groups)), 2):
            common = _longest_common(groups[i][0], groups[j][0])
            if len(common) >= _ANCHOR_MIN:
                groups[i] = (common, groups[i][1] + groups[j][1])
                del groups[j]
                merged = True
                break
    return tuple(groups)


def _longest_common(a: bytes, b: bytes) -> bytes:
    """The longest substring of both (the first one found)."""
    best = b""
    for start in range(len(a)):
        for end in range(start + len(best) + 1, len(a) + 1):
            if a[start:end] not in b:
                break
            best = a[start:end]
    return best


def class_bases(data: bytes) -> frozenset[str]:
    """Names used as bases by the ``class X(...)`` lines of a file (a cheap byte scan)."""
    names: set[str] = set()
    for start, end in _class_lines(data):
        # a line ``class\tX(...)`` is not scanned: ``class`` must be followed by a space
        match = _CLASS_BASES.match(data, start) if data[end : end + 1] == b" " else None
        if match is not None:
            names.update(name.decode() for name in _NAME.findall(match.group(1)))
    return frozenset(names)


def _class_lines(data: bytes) -> Iterator[tuple[int, int]]:
    """(line start, end of ``class``) for each line of ``data`` that holds only spaces
    and tabs before its first ``class``: where a ``^[ \\t]*class`` pattern can match,
    found with byte searches instead of a regular expression tried at every line
    (several times slower). ``class`` in prose mostly follows a letter and costs one
    byte test; the search is for ``class`` alone, which a byte search finds faster
    than ``class `` (a space ends many windows of source text)."""
    index = data.find(b"class")
    while index != -1:
        if index == 0 or data[index - 1] in b" \t\n":
            start = data.rfind(b"\n", 0, index) + 1
            if not data[start:index].strip(b" \t"):
                yield start, index + 5
        index = data.find(b"class", index + 5)


def subclass_rounds(
    skipped: Mapping[K, frozenset[str]],
    read: Callable[[list[K]], Iterable[str]],
    known: Iterable[str],
) -> list[K]:
    """The skipped files (by key, with their :func:`class_bases`) that define a subclass
    of a known class, round after round: ``read(keys)`` reads those files and returns
    the class names they define, which may pull in more files. Returns every key read."""
    names = set(known)
    waiting = dict(skipped)
    taken: list[K] = []
    while True:
        again = [key for key, bases in waiting.items() if bases & names]
        if not again:
            return taken
        for key in again:
            del waiting[key]
        taken += again
        names.update(read(again))


#: Mentioned by every model-runner class and the workers that hold one (``ModelRunner``,
#: ``self.model_runner``): ``migrate`` also reads pairs that do not broadcast at all, to
#: say that it leaves them alone.
RUNNERS = b"unner"
#: A ``class`` line whose name can make a runner or a worker by name alone (the
#: analysis's roles: ``Runner`` in the name, a name ending in ``Worker``; a class that
#: is one by inheritance is found through its base, see :func:`subclass_rounds`).
_ROLE_CLASS = re.compile(rb"^[ \t]*class[ \t]+[^\s(:]*(?:Runner|Worker)", re.MULTILINE)


def names_a_role(data: bytes) -> bool:
    """Whether a file that mentions no contract name can still hold a model runner or
    a worker that drives one (``migrate`` says it leaves such pairs alone): it mentions
    a runner and defines a class named like a runner or a worker. A file that mentions
    a runner only in a comment, a string or an attribute path is not read."""
    return RUNNERS in data and any(
        _ROLE_CLASS.match(data, start) for start, _ in _class_lines(data)
    )


def select_sources(
    sources: Mapping[K, bytes], contract: Contract, runners: bool = False
) -> list[K]:
    """The keys of ``sources`` that can matter, in their order: those that mention the
    contract (or, with ``runners``, define a model runner or a worker by name, see
    :func:`names_a_role`), then subclasses of classes they define (the class names found
    by the byte scan of ``class`` lines)."""
    wanted = needles(contract)
    first = [
        key
        for key, data in sources.items()
        if might_matter(data, wanted) or (runners and names_a_role(data))
    ]
    taken = set(first)
    skipped = {key: class_bases(data) for key, data in sources.items() if key not in taken}
    known = {name for key in first for name in _class_names(sources[key])}
    more = subclass_rounds(
        skipped, lambda keys: (n for k in keys for n in _class_names(sources[k])), known
    )
    chosen = set(first) | set(more)
    return [key for key in sources if key in chosen]


_CLASS_NAME = re.compile(rb"^[ \t]*class[ \t]+(\w+)", re.MULTILINE)


def _class_names(data: bytes) -> set[str]:
    names = set()
    for start, _ in _class_lines(data):
        match = _CLASS_NAME.match(data, start)
        if match is not None:
            names.add(match.group(1).decode())
    return names


def extensible_classes(modules: Iterable[ModuleFacts], contract: Contract) -> set[str]:
    """Names of the classes of ``modules`` whose subclasses, in files that mention none
    of the contract's names, can still take part in the contract.

    A class takes part when it is a worker, a runner or an input (or one of their
    bases), defines a contract method, runs a collective, declares a driver-only field,
    or has a base the modules do not show (it may be anything); so does a class that
    derives from one of those, holds one or is held by one, the way the analysis
    follows what a class holds (``self.x = Runner(...)``, ``x: Runner``, ``self.x = x``
    for a parameter annotated with it; a parameter without a type may be anything).
    A subclass of any other class (an attention backend a runner's file names in an
    annotation, an enum) adds nothing a rule reads."""
    hierarchy = Hierarchy(modules, contract)
    roles = Roles(hierarchy)
    classes = hierarchy.all_classes()
    contract_names = {
        *contract.runner_bases,
        *contract.worker_bases,
        *contract.input_bases,
        contract.worker_input,
    }
    methods = {
        contract.as_dict_method,
        contract.from_dict_method,
        contract.make_input_method,
        contract.prepare_input_method,
        contract.execute_method,
        *contract.worker_methods,
        *contract.runner_methods,
    }

    def takes_part(cls: ClassFacts) -> bool:
        return (
            cls.name in contract_names
            or hierarchy.inherits(cls, contract_names)
            or roles.is_worker(cls)
            or roles.is_runner(cls)
            or not methods.isdisjoint(cls.methods)
            or any(isinstance(base, str) for base in hierarchy.direct_bases(cls))
            or any(f.driver_only for f in cls.fields)
            or any(
                call.collective is not None
                for method in cls.methods.values()
                for call in flatten_calls(method.steps)
            )
        )

    def holds(cls: ClassFacts) -> set[str] | None:
        """The names ``cls`` holds (``self.x = X(...)``, ``x: X``, ``self.x = x`` for a
        parameter ``x: X``); None for a parameter without a type (what is passed
        decides: anything)."""
        out: set[str] = set()
        for refs in (*cls.annotations.values(), *cls.class_attrs.values()):
            out.update(refs)
        for refs in cls.self_attrs.values():
            for ref in refs:
                out.add(ref)
                for method in cls.methods.values():
                    if ref in method.params:
                        types = method.param_types.get(ref, ())
                        if not types:
                            return None
                        out.update(types)
        return out

    held = {id(cls): holds(cls) for cls in classes}
    found = {id(cls) for cls in classes if takes_part(cls)}
    names = contract_names | {cls.name for cls in classes if id(cls) in found}
    grown = True
    while grown:
        grown = False
        # what a class that takes part holds takes part (its subclasses stand for it)
        wanted = {n for c in classes if id(c) in found for n in held[id(c)] or ()}
        for cls in classes:
            if id(cls) in found:
                continue
            refs = held[id(cls)]
            if (
                cls.name in wanted
                or refs is None
                or not names.isdisjoint(refs)
                or any(id(base) in found for base in hierarchy.mro(cls)[1:])
            ):
                found.add(id(cls))
                names.add(cls.name)
                grown = True
    return names
