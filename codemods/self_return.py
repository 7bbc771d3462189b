"""``self-return``: ``from_broadcasted_tensor_dict`` returns the class it is called on.

A classmethod annotated to return its own fixed class (``-> "ModelInputForGPU"``)
forces ``cast()`` in every subclass. This codemod annotates it with ``Self``
when the module already imports it, else with a cls-bound TypeVar
(``cls: Type[TX]`` ... ``-> TX``), and turns ``ClassName(...)`` in its body
into ``cls(...)`` so a subclass really gets an instance of itself.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from codemods.framework import registry
from codemods.toolkit import cstutil, imports
from runnercheck.contract import VLLM, Contract

NAME = registry.SELF_RETURN.name


def _returns_class(func: cst.FunctionDef, cls_name: str) -> bool:
    if func.returns is None:
        return False
    ann = func.returns.annotation
    if isinstance(ann, cst.Name):
        return ann.value == cls_name
    text = (
        cstutil.string_value(ann)
        if isinstance(ann, (cst.SimpleString, cst.ConcatenatedString))
        else None
    )
    return text == cls_name


def _is_classmethod(func: cst.FunctionDef) -> bool:
    return any(cstutil.dotted(d.decorator) == "classmethod" for d in func.decorators)


def _self_imported(module: cst.Module) -> bool:
    for statement in module.body:
        small = cstutil.single_small(statement)
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            mod = cstutil.dotted(small.module) if small.module is not None else None
            if mod in {"typing", "typing_extensions"} and any(
                cstutil.code(a.name) == "Self" and a.asname is None for a in small.names
            ):
                return True
    return False


class _ClassCalls(cst.CSTTransformer):
    def __init__(self, name: str) -> None:
        self.name = name

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        if isinstance(updated_node.func, cst.Name) and updated_node.func.value == self.name:
            return updated_node.with_changes(func=cst.Name("cls"))
        return updated_node


def rewrite_module(module: cst.Module, contract: Contract = VLLM) -> tuple[cst.Module, list[str]]:
    """The module with every fixed-class ``from_broadcasted_tensor_dict`` fixed,
    and the names of the classes changed."""
    use_self = _self_imported(module)
    taken = imports.imported_names(module) | {
        s.name.value for s in module.body if isinstance(s, (cst.ClassDef, cst.FunctionDef))
    }
    changed: list[str] = []
    body: list[cst.BaseStatement] = []
    for statement in module.body:
        if not isinstance(statement, cst.ClassDef):
            body.append(statement)
            continue
        name = statement.name.value
        items: list[cst.BaseStatement] = []
        typevar = f"T{name}"
        touched = False
        for item in cstutil.body_of(statement.body):
            if (
                isinstance(item, cst.FunctionDef)
                and item.name.value == contract.from_dict_method
                and _is_classmethod(item)
                and _returns_class(item, name)
                and item.params.params
            ):
                if not use_self and typevar in taken:
                    items.append(item)
                    continue
                target = "Self" if use_self else typevar
                params = list(item.params.params)
                first = params[0]
                params[0] = first.with_changes(
                    annotation=None
                    if use_self
                    else cst.Annotation(annotation=cst.parse_expression(f"Type[{typevar}]"))
                )
                one_line = "\n" not in cstutil.code(item.params)
                item = item.with_changes(
                    params=item.params.with_changes(params=params),
                    returns=cst.Annotation(annotation=cst.Name(target)),
                    body=item.body.visit(_ClassCalls(name)),
                )
                if one_line and cstutil.def_line_length(item, 4) > 79:
                    item = cstutil.one_param_per_line(item)
                touched = True
            items.append(item)
        if not touched:
            body.append(statement)
            continue
        changed.append(name)
        new_class = statement.with_changes(body=statement.body.with_changes(body=items))
        if not use_self:
            tv = cstutil.parse_statements(cstutil.typevar_line(typevar, name))[0]
            tv = cstutil.with_leading(tv, statement.leading_lines)
            new_class = new_class.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
            body.append(tv)
            taken.add(typevar)
        body.append(new_class)
    if not changed:
        return module, []
    new = module.with_changes(body=body)
    if not use_self:
        new = imports.add_imports(new, (), [("typing", ["Type", "TypeVar"])])
    return new, changed


def __getattr__(name: str) -> Any:
    """``SelfReturnCommand`` (see :func:`codemods.framework.registry.command_class`)."""
    return registry.command_class(__name__, name)
