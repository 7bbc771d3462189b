"""The classes whose defaults a rewrite must know, read as context.

A legacy non-driver branch that builds ``SamplingMetadata(..., perform_sampling=False)``
while the driver leaves ``perform_sampling`` to the class default can only be kept, and
verified, when that default is known. The prefilter leaves such a class's module out
(it names nothing of the contract), so the modules defining the classes a non-driver
branch builds with a literal boolean keyword are found through the imports (package
re-exports followed) and read for their facts. Nothing is imported; they are context
only and are never rewritten.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ModuleFacts
from runnercheck.contract import Contract
from runnercheck.files import MAX_ANALYSED_SIZE, ReadError, read_source
from runnercheck.workspace.finder import ModuleFinder

#: How many re-exports (``from .sampling_metadata import SamplingMetadata`` in a
#: package's ``__init__``) are followed to a class's definition.
MAX_HOPS = 4
_BOOLS = ("True", "False")


def flag_classes(module: ModuleFacts) -> set[str]:
    """Names of the classes a non-driver branch of ``module`` builds with a literal
    boolean keyword."""
    functions = [*module.functions.values()]
    functions += [f for c in module.classes.values() for f in c.methods.values()]
    out: set[str] = set()
    for func in functions:
        for call in func.calls:
            name = call.callee.rsplit(".", 1)[-1]
            if (
                call.role == "non-driver"
                and name[:1].isupper()
                and any(v in _BOOLS for _k, v in call.kwargs)
            ):
                out.add(call.callee)
    return out


def read_definitions(
    facts: Mapping[Path, ModuleFacts], contract: Contract, limit: int
) -> dict[Path, tuple[bytes, ModuleFacts]]:
    """The modules, not among ``facts``, that define the classes a non-driver branch
    of ``facts`` builds with a literal flag: path -> (bytes, facts)."""
    finder = ModuleFinder()
    found: dict[Path, tuple[bytes, ModuleFacts]] = {}
    for path, module in facts.items():
        for callee in sorted(flag_classes(module)):
            head, _, name = callee.rpartition(".")
            origin = module.imports.get(head or name)
            if origin is None:
                continue
            if head:
                origin = f"{origin}.{name}"
            where, current = str(path), origin
            for _ in range(MAX_HOPS):
                target = finder.find(os.path.dirname(os.path.abspath(where)), current)
                if target is None:
                    break
                target_path = (
                    Path(os.path.relpath(target)) if not path.is_absolute() else Path(target)
                )
                known = facts.get(target_path) or found.get(target_path, (b"", None))[1]
                if known is None:
                    try:
                        data = read_source(target, limit)
                    except ReadError:
                        break
                    if len(data) > MAX_ANALYSED_SIZE:
                        break
                    try:
                        known = extract_source(data, str(target_path), contract)
                    except Exception:  # context only: a module we cannot read adds nothing
                        break
                    if known.syntax_error is not None:
                        break
                    found[target_path] = (data, known)
                if name in known.classes or name not in known.imports:
                    break
                where, current = str(target_path), known.imports[name]
    return found
