"""``super-dict``: a subclass dict that re-lists its parent's keys calls ``super()``.

vLLM 0.5.1's ``ModelInputForGPUWithSamplingMetadata.as_broadcastable_tensor_dict``
copies its parent's dict literal and helper calls, then adds its own; the copy
drifts as soon as the parent changes. When the child's dict literal holds every
key of the parent's with the same value, and the child repeats the parent's
later statements first, the child becomes::

    tensor_dict = super().as_broadcastable_tensor_dict()
    tensor_dict.update({<the child's own keys>})     # only if it has any
    <the child's own statements>
    return tensor_dict

A child that re-lists only part of the parent's keys is a drifted copy: calling
``super()`` would change what it broadcasts, so it is reported, not rewritten.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from codemods import cstutil as cu
from codemods import inputs
from codemods.command import ContractCommand
from runnercheck.contract import VLLM, Contract

NAME = "super-dict"


@dataclass
class Skipped:
    cls: str
    code: str
    message: str


def _rename(text: str, old: str, new: str) -> str:
    """``ast.dump`` of a statement with the dict variable renamed."""
    tree = ast.parse(text.strip())
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == old:
            node.id = new
    return ast.dump(tree)


def _split(
    func: cst.FunctionDef,
) -> (
    tuple[
        cst.BaseStatement | None,
        cst.BaseStatement,
        cst.Dict,
        str,
        list[cst.BaseStatement],
        cst.BaseStatement,
    ]
    | None
):
    """(docstring, literal statement, literal, variable, middle statements, return)."""
    body = list(cu.body_of(func.body))
    doc = None
    if body:
        small = cu.single_small(body[0])
        if isinstance(small, cst.Expr) and isinstance(
            small.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            doc, body = body[0], body[1:]
    if len(body) < 2:
        return None
    first = cu.single_small(body[0])
    last = cu.single_small(body[-1])
    if not (isinstance(last, cst.Return) and isinstance(last.value, cst.Name)):
        return None
    target = value = None
    if isinstance(first, cst.Assign) and len(first.targets) == 1:
        target, value = first.targets[0].target, first.value
    elif isinstance(first, cst.AnnAssign):
        target, value = first.target, first.value
    if not (isinstance(target, cst.Name) and isinstance(value, cst.Dict)):
        return None
    if target.value != last.value.value:
        return None
    return doc, body[0], value, target.value, body[1:-1], body[-1]


def rewrite_module(
    module: cst.Module, lookup: inputs.ClassLookup, contract: Contract = VLLM
) -> tuple[cst.Module, list[str], list[Skipped]]:
    name = contract.as_dict_method
    changed: list[str] = []
    skipped: list[Skipped] = []
    body: list[cst.BaseStatement] = []
    for statement in module.body:
        if not isinstance(statement, cst.ClassDef) or len(statement.bases) != 1:
            body.append(statement)
            continue
        func = inputs.method(statement, name)
        parts = _split(func) if func is not None else None
        if func is None or parts is None or inputs.calls_super(func, name):
            body.append(statement)
            continue
        found = lookup(cu.code(statement.bases[0].value))
        parent = inputs.parent_from_ast(found[0], name) if found is not None else None
        if parent is None or parent.literal is None:
            body.append(statement)
            continue
        doc, literal_stmt, literal, var, middle, ret = parts
        child: dict[str, str] | None = {}
        elements: dict[str, cst.DictElement] = {}
        for element in literal.elements:
            key = cu.string_value(element.key) if isinstance(element, cst.DictElement) else None
            if key is None or child is None:
                child = None
                break
            assert isinstance(element, cst.DictElement)
            child[key] = ast.dump(ast.parse(cu.code(element.value).strip(), mode="eval").body)
            elements[key] = element
        if child is None:
            body.append(statement)
            continue
        cls_name = statement.name.value
        shared = [k for k in parent.literal if k in child]
        if not shared:
            body.append(statement)
            continue
        if len(shared) != len(parent.literal):
            missing = sorted(set(parent.literal) - set(child))
            skipped.append(
                Skipped(
                    cls_name,
                    "MIG203",
                    f"{cls_name} re-lists {len(shared)} of {parent.name}'s "
                    f"{len(parent.literal)} keys (not {', '.join(missing)})",
                )
            )
            body.append(statement)
            continue
        own_keys = [k for k in child if k not in parent.literal or child[k] != parent.literal[k]]
        middle_dumps = [_rename(cu.code(s), var, parent.var) for s in middle]
        if middle_dumps[: len(parent.mutations)] != parent.mutations:
            skipped.append(
                Skipped(
                    cls_name,
                    "MIG202",
                    f"{cls_name} does not repeat {parent.name}'s statements after "
                    "the dict; calling super() would reorder them",
                )
            )
            body.append(statement)
            continue
        if own_keys and parent.mutations:
            skipped.append(
                Skipped(
                    cls_name,
                    "MIG202",
                    f"{cls_name} adds keys before {parent.name}'s own updates run; "
                    "calling super() would change which value wins",
                )
            )
            body.append(statement)
            continue
        rest = middle[len(parent.mutations) :]
        first = cst.parse_statement(f"{var} = super().{name}()\n")
        first = first.with_changes(leading_lines=literal_stmt.leading_lines)  # type: ignore[attr-defined]
        new_body: list[cst.BaseStatement] = [doc] if doc is not None else []
        new_body.append(first)
        if own_keys:
            order = list(child)
            kept_literal = cu.keep_elements(literal, [order.index(k) for k in own_keys])
            update = cst.parse_statement(f"{var}.update({{}})\n")
            small = cu.single_small(update)
            assert isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
            call = small.value.with_changes(
                args=[small.value.args[0].with_changes(value=kept_literal)]
            )
            assert isinstance(update, cst.SimpleStatementLine)
            new_body.append(update.with_changes(body=[small.with_changes(value=call)]))
        new_body.extend(rest)
        new_body.append(ret)
        new_func = func.with_changes(body=func.body.with_changes(body=new_body))
        items = [new_func if item is func else item for item in cu.body_of(statement.body)]
        body.append(statement.with_changes(body=statement.body.with_changes(body=items)))
        changed.append(cls_name)
    if not changed:
        return module, [], skipped
    return module.with_changes(body=body), changed, skipped


class SuperDictCommand(ContractCommand):
    """A subclass's broadcast dict that re-lists its parent's keys calls ``super()``."""

    DESCRIPTION = (
        "Replace a subclass's copy of its parent's as_broadcastable_tensor_dict "
        "with super() plus its own keys (parent in the same file)."
    )

    def rewrite(self, tree: cst.Module) -> cst.Module:
        lookup = inputs.module_lookup(ast.parse(tree.code))
        new, _changed, skipped = rewrite_module(tree, lookup, self.contract)
        self.warn_skipped(skipped)
        return new
