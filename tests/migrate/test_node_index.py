"""``codemods.toolkit.node_index``: one walk of a subtree answers every later question about it
or any node inside it, exactly as a LibCST visit of that node would."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
import pytest

from codemods.toolkit import cstutil, node_index
from runnercheck.demo.engine import engine_source_dir

TRICKY = (
    "@decorator(\n"
    "    1)\n"
    "class A(Base, metaclass=M):  # trailing\n"
    "    x: int = 1\n"
    "    def f(self, a, /, b=(1 +\r\n"
    "            2), *args, c, **kw) -> None:\r\n"
    "        y = [z for z in (a,) if z] ; w = \\\n"
    "            y\n"
    "        global g\n"
    "        import os.path as p, sys\n"
    "        from . import (q as r)\n"
    "        del y[0], w\n"
    "        lambda v=1: v\n"
    "        async def h():\n"
    "            async with m as (n, *o):\n"
    "                await n\n"
    "        while (t := next(it)):\n"
    "            match t:\n"
    "                case {'k': [1, *rest]} if rest:\n"
    "                    pass\n"
    "        return f'{a!r:>{b}}'\n"
    "try:\n"
    "    pass\n"
    "except* (E) as e:\n"
    "    raise\n"
    "finally:\n"
    "    ((yield))"
)


def _sources() -> list[tuple[str, str]]:
    engine = sorted(engine_source_dir("legacy").rglob("*.py"))
    return [("tricky", TRICKY), *((p.name, p.read_text()) for p in engine if p.stat().st_size)]


def _visited(root: cst.CSTNode, trivia: bool = False) -> list[cst.CSTNode]:
    """The nodes a LibCST visit of ``root`` meets, in its order (whitespace, comments
    and punctuation under it only with ``trivia``: an index does not list them)."""
    met: list[cst.CSTNode] = []

    class Recorder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if trivia or node is root or type(node) not in node_index.TRIVIA:
                met.append(node)
            return True

    root.visit(Recorder())
    return met


def _ids(nodes: list[cst.CSTNode]) -> list[int]:
    return [id(n) for n in nodes]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    node_index.forget()
    yield
    node_index.forget()


@pytest.mark.slow
@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_every_subtree_lists_what_a_visit_of_it_meets(name: str, text: str) -> None:
    module = cst.parse_module(text)
    visited = _visited(module)
    assert _ids(node_index.nodes(module)) == _ids(visited)
    for node in visited:  # every node inside, served by the module's index
        assert _ids(node_index.nodes(node)) == _ids(_visited(node)), node
    assert len(node_index._WHERE) == len(visited)  # one walk: nothing indexed again


def test_subtrees_indexed_first_are_copied_into_the_index_of_their_ancestor() -> None:
    module = cst.parse_module(TRICKY)
    cdef = module.body[0]
    assert isinstance(cdef, cst.ClassDef)
    statements = list(cstutil.body_of(cdef.body))
    for statement in reversed(statements):  # the inner ones first, in any order
        node_index.nodes(statement)
    assert _ids(node_index.nodes(module)) == _ids(_visited(module))
    for statement in statements:
        assert _ids(node_index.nodes(statement)) == _ids(_visited(statement))


def test_within_follows_the_tree() -> None:
    module = cst.parse_module(TRICKY)
    cdef = module.body[0]
    assert isinstance(cdef, cst.ClassDef)
    f = cstutil.body_of(cdef.body)[1]
    x = cstutil.body_of(cdef.body)[0]
    inner = cstutil.find_all(f, lambda n: isinstance(n, cst.Await))[0]
    assert cstutil.within(f, inner) and cstutil.within(cdef, inner)
    assert cstutil.within(f, f)
    assert not cstutil.within(x, inner)
    assert not cstutil.within(f, cdef)
    assert not cstutil.within(f, cst.Name("n"))  # a node of no indexed tree


def test_a_node_shared_by_two_places_is_found_in_both() -> None:
    """A tree built from shared parts (``with_changes`` reuses nodes) meets one node
    object twice: each place lists it, and ``within`` finds it under either parent."""
    shared = cst.parse_expression("a + b")
    first = cst.Expr(value=cst.Call(func=cst.Name("f"), args=[cst.Arg(shared)]))
    second = cst.Expr(value=cst.Call(func=cst.Name("g"), args=[cst.Arg(shared)]))
    line = cst.SimpleStatementLine(body=[first, second])
    assert _ids(node_index.nodes(line)) == _ids(_visited(line))
    assert cstutil.within(first, shared) and cstutil.within(second, shared)
    assert _ids(node_index.nodes(second)) == _ids(_visited(second))


def test_a_rewritten_tree_shares_the_index_of_the_parts_it_kept() -> None:
    module = cst.parse_module(TRICKY)
    node_index.nodes(module)
    cdef = module.body[0]
    assert isinstance(cdef, cst.ClassDef)
    kept = cstutil.body_of(cdef.body)[1]
    renamed = cdef.with_changes(name=cst.Name("B"))
    new = module.with_changes(body=[renamed, *module.body[1:]])
    assert _ids(node_index.nodes(new)) == _ids(_visited(new))
    # the old tree still answers for itself, and the kept method lies in both
    assert _ids(node_index.nodes(cdef)) == _ids(_visited(cdef))
    assert cstutil.within(cdef, kept) and cstutil.within(renamed, kept)
    assert not cstutil.within(renamed, cdef.name)


def test_the_indexes_are_dropped_past_their_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_index, "KEPT_NODES", 50)
    module = cst.parse_module(TRICKY)
    node_index.nodes(module)
    other = cst.parse_module("x = 1\n")
    assert _ids(node_index.nodes(other)) == _ids(_visited(other))
    assert len(node_index._WHERE) == len(_visited(other))  # the module's were dropped
    assert _ids(node_index.nodes(module)) == _ids(_visited(module))


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_name_uses_of_every_node_is_what_a_visit_finds(name: str, text: str) -> None:
    module = cst.parse_module(text)
    for node in _visited(module):
        by_visit = cstutil._NameUses()
        node.visit(by_visit)
        loads, stores = cstutil.name_uses(node)
        assert _ids(loads) == _ids(by_visit.loads), node
        assert _ids(stores) == _ids(by_visit.stores), node
        loads.append(cst.Name("changed"))  # a caller's copy: the next answer is the same
        assert _ids(cstutil.name_uses(node)[0]) == _ids(by_visit.loads)


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_holding_is_every_node_on_the_way_to_the_targets(name: str, text: str) -> None:
    module = cst.parse_module(text)
    visited = _visited(module)

    def naive(node: cst.CSTNode, wanted: set[int], held: set[int]) -> bool:
        found = id(node) in wanted
        for child in node.children:
            found = naive(child, wanted, held) or found
        if found:
            held.add(id(node))
        return found

    for step in (7, 23):
        wanted = {id(n) for n in visited[5::step]}
        expected: set[int] = set()
        naive(module, wanted, expected)
        assert cstutil.holding(module, wanted) == expected
        for statement in module.body:  # a subtree of the index, and no target at all
            inner: set[int] = set()
            naive(statement, wanted, inner)
            assert cstutil.holding(statement, wanted) == inner
    assert cstutil.holding(module, set()) == set()


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_substitution_changes_the_names_alone_and_keeps_the_rest(name: str, text: str) -> None:
    """``substitute_loads`` and ``rename`` print as a full visit replacing the same
    names prints, and keep every subtree without one of them as it was."""
    module = cst.parse_module(text)

    class Everywhere(cst.CSTTransformer):
        def __init__(self, targets: set[int], renames: bool) -> None:
            self.targets, self.renames = targets, renames

        def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
            if id(original) not in self.targets:
                return updated
            return original.with_changes(value="zz") if self.renames else cst.Name("zz")

    checked = 0
    for statement in module.body:
        loads, stores = cstutil.name_uses(statement)
        for names, renames in ((loads, False), ([*loads, *stores], True)):
            for value in sorted({n.value for n in names})[:4]:
                targets = {id(n) for n in names if n.value == value}
                expected = statement.visit(Everywhere(targets, renames))
                if renames:
                    new = cstutil.rename(statement, value, "zz")
                else:
                    new = cstutil.substitute_loads(statement, {value: lambda: cst.Name("zz")})
                assert module.code_for_node(new) == module.code_for_node(expected)
                kept = {id(n) for n in _visited(new, trivia=True)}
                on_way = cstutil.holding(statement, targets)
                replaced = [n for n in names if id(n) in targets]
                untouched = [  # (what was under a replaced name went with it)
                    n
                    for n in _visited(statement, trivia=True)
                    if id(n) not in on_way and not any(cstutil.within(r, n) for r in replaced)
                ]
                assert untouched and all(id(n) in kept for n in untouched)
                checked += 1
    assert checked > 3 or not cstutil.name_uses(module)[0]


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_owners_are_the_innermost_located_statements_a_visit_meets(name: str, text: str) -> None:
    from codemods.merge_broadcasts.driver_paths import Located, locate, owners

    class Reference(cst.CSTVisitor):
        def __init__(self, by_id: dict[int, Located]) -> None:
            self.by_id, self.stack, self.owner = by_id, list[Located](), dict[int, Located]()

        def on_visit(self, node: cst.CSTNode) -> bool:
            if id(node) in self.by_id:
                self.stack.append(self.by_id[id(node)])
            if self.stack and type(node) not in node_index.TRIVIA:  # (not indexed)
                self.owner[id(node)] = self.stack[-1]
            return True

        def on_leave(self, original_node: cst.CSTNode) -> None:
            if id(original_node) in self.by_id:
                self.stack.pop()

    module = cst.parse_module(text)
    functions = cstutil.find_all(module, lambda n: isinstance(n, cst.FunctionDef))
    for func in functions:
        assert isinstance(func, cst.FunctionDef)
        if cstutil.contains(func, lambda n: isinstance(n, cst.Match)):
            continue  # (locate does not enter a match statement)
        located = locate(func, "is_driver_worker")
        reference = Reference({id(item.statement): item for item in located})
        func.body.visit(reference)
        assert owners(func, located) == reference.owner
    assert functions or name == "__init__.py"


#: Kinds a search asks for: concrete classes, abstract bases, several at once.
KINDS: list[type[cst.CSTNode] | tuple[type[cst.CSTNode], ...]] = [
    cst.Call,
    cst.Name,
    cst.Attribute,
    cst.SimpleStatementLine,
    cst.BaseExpression,
    cst.BaseCompoundStatement,
    cst.BaseSmallStatement,
    cst.BaseString,
    (cst.Assign, cst.AnnAssign, cst.AugAssign),
    (cst.Return, cst.Raise, cst.Yield, cst.Await),
    (cst.BaseSuite, cst.Comma),
    cst.CSTNode,
]


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_a_search_by_kind_keeps_what_isinstance_keeps(name: str, text: str) -> None:
    module = cst.parse_module(text)
    every = _visited(module)
    for kinds in KINDS:
        expected = [n for n in every if isinstance(n, kinds)]
        assert cstutil.find_all(module, kinds) == expected, kinds
        assert cstutil.contains(module, kinds) == bool(expected)
        calls = [n for n in expected if isinstance(n, cst.Call)]
        assert cstutil.find_all(module, kinds, lambda n: isinstance(n, cst.Call)) == calls
        assert cstutil.contains(module, kinds, lambda n: isinstance(n, cst.Call)) == bool(calls)


def test_a_node_class_defined_after_the_first_search_is_told_by_isinstance() -> None:
    cstutil.find_all(cst.parse_module("x = 1\n"), cst.Name)  # the classes known are read

    class Shouting(cst.Name):  # a class of no parse: defined after the first search
        pass

    module = cst.parse_module("y = x\n")
    odd = Shouting("X")
    changed = module.deep_replace(cstutil.find_all(module, cst.Name)[1], odd)
    assert isinstance(changed, cst.Module)
    found = cstutil.find_all(changed, cst.Name)
    assert odd in found and len(found) == 2
    assert cstutil.find_all(changed, cst.Attribute) == []


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_trivia_holds_trivia_only_and_within_still_finds_it(name: str, text: str) -> None:
    """What an index leaves out (whitespace, comments, punctuation) holds nothing else,
    so no other node is lost with it; ``within`` answers for it by a walk."""
    module = cst.parse_module(text)
    everything = _visited(module, trivia=True)
    trivia = [n for n in everything if type(n) in node_index.TRIVIA]
    assert len(trivia) > len(everything) / 3
    for node in trivia:
        assert all(type(n) in node_index.TRIVIA for n in _visited(node, trivia=True)[1:]), node
    statements = [n for n in everything if isinstance(n, cst.SimpleStatementLine)]
    for statement in statements[:20]:
        mine = [n for n in _visited(statement, trivia=True) if type(n) in node_index.TRIVIA]
        assert mine and all(cstutil.within(statement, n) for n in mine)
        others = [n for n in statements if n is not statement]
        assert not any(cstutil.within(other, mine[0]) for other in others[:5])
    assert statements or name == "__init__.py"
