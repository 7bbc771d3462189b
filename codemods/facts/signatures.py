"""The types of the contract's runner methods, as the old code states them.

The merged contract's generic runner base declares ``prepare_model_input(self,
<request>)`` and ``execute_model(self, model_input, <kv_caches>)``. The legacy
runners already annotate both parameters and the result of ``execute_model``
(``seq_group_metadata_list: Optional[List[SequenceGroupMetadata]]``,
``kv_caches: List[torch.Tensor]``, ``-> Optional[SamplerOutput]``); the base takes
those types instead of ``Any``:

- a parameter gets the type every runner states, else ``Any`` (where runners
  differ, even only by an ``Optional[...]``, no one type serves both the runners'
  overrides and the callers typed against the base);
- the result gets the union of what the runners return (``Optional[...]`` when any
  returns ``Optional``), so each runner's result is a subtype of the base's;
- a type whose names the runners import from different places, or that names
  something the runner module defines itself, is ``Any``: the base module imports
  nothing at run time, only under ``TYPE_CHECKING``, from where a runner does.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable
from dataclasses import dataclass, field

from runnercheck.analysis.model import ClassFacts, FunctionFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.shapes import tuple_elements

#: names the base module imports from ``typing`` itself when an annotation uses them
TYPING_NAMES = frozenset(
    {"Any", "Dict", "List", "Optional", "Set", "Tuple", "Type", "Union", "Sequence", "Mapping"}
)


_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Import:
    """``import <module>`` (``name`` None) or ``from <module> import <name>``."""

    module: str
    name: str | None
    level: int = 0

    def statement(self) -> str:
        dots = "." * self.level
        if self.name is None:
            return f"import {self.module}"
        return f"from {dots}{self.module} import {self.name}"


@dataclass(frozen=True)
class RunnerSignature:
    """What the generic runner base declares; ``"Any"`` where the runners give no
    one type."""

    request: str = "Any"
    kv_caches: str = "Any"
    returns: str = "Any"
    imports: tuple[Import, ...] = ()
    typing: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class _Stated:
    text: str
    imports: tuple[Import, ...]
    typing: frozenset[str]


def _resolve(annotation: str, module: ModuleFacts, allow_builtins: bool = False) -> _Stated | None:
    """The annotation with the imports it needs, or None when a name in it is neither
    imported nor a typing name (nor, with ``allow_builtins``, a builtin the module does
    not rebind)."""
    try:
        tree = ast.parse(annotation, mode="eval")
    except SyntaxError:
        return None
    imports: list[Import] = []
    typing: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Name):
            continue
        source = module.import_sources.get(node.id)
        if source is not None and source[:2] == ("typing", node.id) and node.id in TYPING_NAMES:
            typing.add(node.id)
        elif source is not None:
            mod, name, level = source
            if name is None and mod.split(".")[0] != node.id:
                return None  # ``import a.b as c``: keep it simple
            imports.append(Import(mod if name is not None else node.id, name, level))
        elif node.id in TYPING_NAMES:
            typing.add(node.id)
        elif not (
            allow_builtins and node.id in _BUILTINS and node.id not in module.top_level_names
        ):
            return None
    # ``typing.Optional`` written in full needs ``import typing``, already covered above
    return _Stated(ast.unparse(tree), tuple(dict.fromkeys(imports)), frozenset(typing))


def annotation_imports(
    annotation: str, module: ModuleFacts
) -> tuple[str, tuple[Import, ...], frozenset[str]] | None:
    """An annotation written in ``module`` as another module of its directory would
    write it: its normalised text, the imports it needs and the ``typing`` names it
    uses; None when a name in it is defined in ``module`` itself."""
    stated = _resolve(annotation, module, allow_builtins=True)
    if stated is None:
        return None
    return stated.text, stated.imports, stated.typing


def _unwrap_optional(text: str) -> tuple[str, bool]:
    node = ast.parse(text, mode="eval").body
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Optional"
    ):
        return ast.unparse(node.slice), True
    return text, False


def _parameter(stated: list[_Stated | None]) -> _Stated | None:
    """The one type every runner states; None when any differs (a narrower base
    would break a caller typed against the base that passes what a wider runner
    accepts, and a wider one would break the narrower runner's override)."""
    if not stated or any(s is None for s in stated):
        return None
    texts = {s.text for s in stated if s is not None}
    return stated[0] if len(texts) == 1 else None


def _result(stated: list[_Stated | None]) -> _Stated | None:
    if not stated or any(s is None for s in stated):
        return None
    known = [s for s in stated if s is not None]
    parts: dict[str, None] = {}
    optional = False
    for s in known:
        inner, was_optional = _unwrap_optional(s.text)
        optional = optional or was_optional
        parts.setdefault(inner, None)
    typing = frozenset().union(*(s.typing for s in known)) - {"Optional"}
    text = next(iter(parts)) if len(parts) == 1 else f"Union[{', '.join(parts)}]"
    if len(parts) > 1:
        typing |= {"Union"}
    if optional:
        text, typing = f"Optional[{text}]", typing | {"Optional"}
    imports = tuple(dict.fromkeys(i for s in known for i in s.imports))
    return _Stated(text, imports, typing)


def _execute(project: Project, cls: ClassFacts) -> tuple[FunctionFacts, ModuleFacts] | None:
    """The legacy execute method a runner has (its own or inherited)."""
    name = project.contract.execute_method
    for owner in project.mro(cls):
        method = owner.methods.get(name)
        if method is not None and method.request_reads is not None:
            return method, project.modules[owner.path]
    return None


def runner_signature(project: Project, runners: Iterable[ClassFacts]) -> RunnerSignature:
    """The generic runner base's parameter and result types for these runners."""
    requests: list[_Stated | None] = []
    kv_caches: list[_Stated | None] = []
    returns: list[_Stated | None] = []
    for cls in runners:
        found = _execute(project, cls)
        if found is None:
            return RunnerSignature()
        method, module = found
        annotations = method.param_annotations

        def stated(text: str | None, module: ModuleFacts = module) -> _Stated | None:
            return _resolve(text, module) if text else None

        requests.append(stated(annotations[0] if annotations else None))
        kv_caches.append(stated(annotations[1] if len(annotations) > 1 else None))
        returns.append(stated(method.return_annotation))
    chosen = [_parameter(requests), _parameter(kv_caches), _result(returns)]
    imports: dict[Import, None] = {}
    typing: set[str] = set()
    for s in chosen:
        if s is not None:
            imports.update(dict.fromkeys(s.imports))
            typing |= s.typing
    # two runners importing one name from different places: that name means two types
    by_name: dict[str, set[Import]] = {}
    for imp in imports:
        by_name.setdefault(imp.name or imp.module, set()).add(imp)
    if any(len(v) > 1 for v in by_name.values()):
        return RunnerSignature()
    texts = [s.text if s is not None else "Any" for s in chosen]
    return RunnerSignature(
        texts[0],
        texts[1],
        texts[2],
        tuple(sorted(imports, key=Import.statement)),
        frozenset(typing),
    )


def inherited_local_types(
    project: Project, cls: ClassFacts, unpacked: Iterable[tuple[str, str, int, int]]
) -> dict[str, str]:
    """Types of locals unpacked from ``self.<method>(...)`` where the method is found
    along the MRO, in another module too: the element of its ``-> Tuple[...]`` or of
    the NamedTuple it returns. Only types whose every name the class's own module
    can write (it binds them, or they are typing names) are kept."""
    module = project.modules.get(cls.path)
    if module is None:
        return {}
    out: dict[str, str] = {}
    for local, method, index, count in unpacked:
        ref = project.resolve_method(cls, method)
        if ref is None or not ref.func.return_annotation:
            continue
        elements = _elements(project, ref.func.return_annotation, ref.owner.path)
        if elements is None or len(elements) != count:
            continue
        text = elements[index]
        try:
            names = {
                n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)
            }
        except SyntaxError:
            continue
        if all(n in module.top_level_names or n in TYPING_NAMES or n in _BUILTINS for n in names):
            out.setdefault(local, text)
    return out


def _elements(project: Project, annotation: str, path: str) -> list[str] | None:
    try:
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return None
    elements = tuple_elements(node)
    if elements is not None:
        return elements
    if isinstance(node, (ast.Name, ast.Attribute)):
        target = project.resolve_class(ast.unparse(node), path)
        if target is not None and any(b.endswith("NamedTuple") for b in target.bases):
            return list(target.annotation_texts.values())
    return None
