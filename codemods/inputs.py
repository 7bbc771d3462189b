"""What the single-class codemods need to know about input dataclasses: their
fields, the keys their broadcast dict carries, and their parent's (possibly in
another file, read from the ``ast`` trees of the run)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from codemods import cstutil as cu
from runnercheck.contract import DRIVER_ONLY_METADATA_KEY, DRIVER_ONLY_METADATA_VALUE, Contract


@dataclass
class ParentDict:
    """A parent class's ``as_broadcastable_tensor_dict`` as ``ast`` (for comparisons)."""

    name: str
    #: the ``self.<attr>`` names the method reads
    reads: set[str]
    #: the method body, or None when it is not ``d = {...}; <mutations>; return d``
    literal: dict[str, str] | None
    mutations: list[str]
    var: str
    #: the method reads every field at once (``dataclasses.fields(self)``, ``asdict``)
    all_fields: bool
    #: the method calls ``super().<name>()``
    calls_super: bool
    #: the class's base names (to follow ``super()`` further up)
    bases: list[str]


#: Looks up a base class (by the name used in a module) and returns its
#: ``ast`` class and the lookup to use from the base's own module, or None.
ClassLookup = Callable[[str], "tuple[ast.ClassDef, ClassLookup] | None"]


def module_lookup(tree: ast.Module) -> ClassLookup:
    """Classes of one module only (what a single-file codemod can see)."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def lookup(name: str) -> tuple[ast.ClassDef, ClassLookup] | None:
        found = classes.get(name)
        return (found, lookup) if found is not None else None

    return lookup


def inherited_reads(
    bases: list[str],
    lookup: ClassLookup,
    name: str,
    neutral: frozenset[str] = frozenset(),
    depth: int = 0,
) -> tuple[set[str], bool] | None:
    """``self.<attr>`` read by the nearest ``<name>`` up the bases (following its own
    ``super()`` calls), and whether it reads every field; None when a base that
    matters is unknown."""
    if depth > 20:
        return None
    for base in bases:
        if (
            base in {"object", "ABC", "Generic"}
            or base.startswith("Generic[")
            or (base.rpartition(".")[2] in neutral)
        ):
            continue
        found = lookup(base)
        if found is None:
            return None
        cls, next_lookup = found
        facts = parent_from_ast(cls, name)
        if facts is None:
            further = inherited_reads(
                [ast.unparse(b) for b in cls.bases], next_lookup, name, neutral, depth + 1
            )
            if further is None:
                return None
            if further[0] or further[1]:
                return further
            continue
        reads, everything = set(facts.reads), facts.all_fields
        if facts.calls_super:
            further = inherited_reads(facts.bases, next_lookup, name, neutral, depth + 1)
            if further is None:
                return None
            reads |= further[0]
            everything = everything or further[1]
        return reads, everything
    return set(), False


def is_dataclass(cdef: cst.ClassDef) -> bool:
    for decorator in cdef.decorators:
        target = decorator.decorator
        if isinstance(target, cst.Call):
            target = target.func
        if cu.dotted(target) in {"dataclass", "dataclasses.dataclass"}:
            return True
    return False


def method(cdef: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for item in cu.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef) and item.name.value == name:
            return item
    return None


def self_reads(node: cst.CSTNode) -> set[str]:
    return {
        n.attr.value  # type: ignore[attr-defined]
        for n in cu.find_all(node, lambda n: cu.is_self_attr(n))
    }


def reads_all_fields(node: cst.CSTNode) -> bool:
    text = cu.code(node)
    return "fields(self)" in text or "asdict(self)" in text or "self.__dict__" in text


def calls_super(node: cst.CSTNode, name: str) -> bool:
    return f"super().{name}(" in cu.code(node)


def parent_from_ast(cls: ast.ClassDef, name: str) -> ParentDict | None:
    """The facts of ``cls.<name>`` read from an ``ast`` class (any file)."""
    func = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == name), None)
    if func is None:
        return None
    reads = {
        n.attr
        for n in ast.walk(func)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }
    text = ast.unparse(func)
    all_fields = "fields(self)" in text or "asdict(self)" in text or "self.__dict__" in text
    literal: dict[str, str] | None = None
    mutations: list[str] = []
    var = ""
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if (
        len(body) >= 2
        and isinstance(body[0], (ast.Assign, ast.AnnAssign))
        and isinstance(body[-1], ast.Return)
        and isinstance(body[-1].value, ast.Name)
    ):
        first = body[0]
        target = first.targets[0] if isinstance(first, ast.Assign) else first.target
        value = first.value
        if (
            isinstance(target, ast.Name)
            and isinstance(value, ast.Dict)
            and body[-1].value.id == target.id
        ):
            var = target.id
            literal = {}
            for key, val in zip(value.keys, value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    literal = None
                    break
                literal[key.value] = ast.dump(val)
            mutations = [ast.dump(ast.Module(body=[s], type_ignores=[])) for s in body[1:-1]]
    supers = f"super().{name}(" in text
    bases = [ast.unparse(b) for b in cls.bases]
    return ParentDict(cls.name, reads, literal, mutations, var, all_fields, supers, bases)


def driver_only_marked(value: cst.BaseExpression | None) -> bool:
    """``field(..., metadata={"runnercheck": "driver-only", ...})``."""
    if not isinstance(value, cst.Call) or cu.call_name(value) != "field":
        return False
    for arg in value.args:
        if (
            arg.keyword is not None
            and arg.keyword.value == "metadata"
            and isinstance(arg.value, cst.Dict)
        ):
            for element in arg.value.elements:
                if (
                    isinstance(element, cst.DictElement)
                    and cu.string_value(element.key) == DRIVER_ONLY_METADATA_KEY
                    and cu.string_value(element.value) == DRIVER_ONLY_METADATA_VALUE
                ):
                    return True
    return False


def fields(cdef: cst.ClassDef) -> list[tuple[cst.SimpleStatementLine, cst.AnnAssign]]:
    out = []
    for item in cu.body_of(cdef.body):
        small = cu.single_small(item)
        if (
            isinstance(item, cst.SimpleStatementLine)
            and isinstance(small, cst.AnnAssign)
            and isinstance(small.target, cst.Name)
        ):
            ann = cu.code(small.annotation.annotation)
            if ann.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")):
                continue
            out.append((item, small))
    return out


def contract_base_names(contract: Contract) -> set[str]:
    return {*contract.input_bases, "object", "ABC"}
