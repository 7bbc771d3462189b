"""What a function says about the classes its values hold: the annotations of its
parameters, and the calls that may construct a class from them (``cls(proposer, scorer)``
in a factory classmethod, ``Wrapper(inner)`` in a helper). The wrapper analysis
(:mod:`runnercheck.analysis.wrappers`) joins these across files to learn which workers
a wrapper worker holds."""

from __future__ import annotations

import ast

from runnercheck.analysis.model import ConstructionFacts, FunctionFacts
from runnercheck.analysis.steps import candidates
from runnercheck.analysis.syntax import dotted, last_name, names_in


def _may_construct(callee: str) -> bool:
    name = last_name(callee)
    return callee == "cls" or (bool(name) and name[0].isupper())


class BindingReader:
    """The binding half of a function reader (see :mod:`runnercheck.analysis.extract`)."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    facts: FunctionFacts
    nodes: list[ast.AST]

    def _read_bindings(self) -> None:
        args = self.node.args
        types: dict[str, tuple[str, ...]] = {}
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if arg.annotation is not None:
                types[arg.arg] = names_in(arg.annotation)
        self.facts.param_types = types
        # the calls that may construct a class with arguments (the others hold nothing)
        calls = [
            n
            for n in self.nodes
            if type(n) is ast.Call and (n.args or n.keywords) and _may_construct(dotted(n.func))
        ]
        if not calls:
            return
        env: dict[str, tuple[str, ...]] = dict(types)
        for node in self.nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found = candidates(node.value, env)
                        if isinstance(node, ast.AnnAssign):
                            found += names_in(node.annotation)
                        env[target.id] = tuple(dict.fromkeys(env.get(target.id, ()) + found))
        out: list[ConstructionFacts] = []
        for call in calls:
            assert isinstance(call, ast.Call)
            callee = dotted(call.func)
            positional = tuple(_held(a, env) for a in call.args)
            keywords = tuple(
                (kw.arg, _held(kw.value, env)) for kw in call.keywords if kw.arg is not None
            )
            if any(positional) or any(held for _, held in keywords):
                out.append(ConstructionFacts(callee, call.lineno, positional, keywords))
        self.facts.constructions = tuple(out)


#: How :attr:`ConstructionFacts.args` write an argument ``self.X``: ``"self.X"`` (the
#: classes of an attribute are known only when the project is joined).
SELF_ATTR = "self."


def _held(node: ast.expr, env: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Class names an argument may hold: a local or parameter of known classes, an
    instance built in place, or ``self.X`` (resolved later)."""
    if isinstance(node, ast.Name):
        return env.get(node.id, ())
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return (SELF_ATTR + node.attr,)
    if isinstance(node, ast.Call):
        return candidates(node, env)
    return ()
