"""One base for the near-identical input classes of a group.

The runners of a group often prepare inputs that differ in a field or two (vLLM 0.5.0's
``ModelRunner`` and ``EmbeddingModelRunner``: sampling against pooling metadata). Read
from the generated classes themselves, the fields every class declares alike, the
dict entries and statements of ``as_broadcastable_tensor_dict`` that read only those
fields, and the statements of ``from_broadcasted_tensor_dict`` that rebuild them go into
one base dataclass; each class keeps its own fields and, where it has any, methods that
call the base's through ``super()`` (the keys of the base first, then its own). The
base goes into the file of the runner the others already subclass (or share a file
with), so no import is added that was not there; a group whose runners have no such
runner keeps one class per runner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from codemods.merge_broadcasts.runner_model import ATTN_BACKEND, RunnerPlan
from codemods.toolkit import cstutil
from runnercheck.contract import Contract

DICT = "tensor_dict"
#: the keyword arguments a base's ``from_broadcasted_tensor_dict`` hands to ``cls``
FIELDS = "fields"


@dataclass
class _Parsed:
    """A generated input class, in the pieces the sharing compares."""

    plan: RunnerPlan
    typevar: cst.BaseStatement
    cdef: cst.ClassDef
    doc: str
    #: field name -> its statement's text (with the comment above it), in order
    fields: dict[str, str]
    defaulted: set[str]
    #: ``as_broadcastable_tensor_dict``: the literal's entries (key text, value text,
    #: the ``self`` fields the value reads), then the statements after it
    entries: list[tuple[str, str, set[str]]]
    mutations: list[tuple[str, set[str]]]
    #: ``from_broadcasted_tensor_dict``: its statements (text without the comments
    #: above, node), the guard aside, and the keyword arguments of the returned
    #: ``cls(...)``
    statements: list[tuple[str, cst.BaseStatement]]
    #: a statement's text (as in ``statements``) -> its text with its comments
    commented: dict[str, str]
    guarded: bool
    kwargs: list[tuple[str, str, set[str]]]


@dataclass
class SharedInputs:
    """The base and the rewritten classes: ``classes`` maps ``id(plan)`` to the
    statements (TypeVar, class) that replace that plan's generated ones; ``base`` goes
    before ``host``'s."""

    name: str
    #: the base's TypeVar, which the methods of the classes on it take too
    typevar: str
    host: RunnerPlan
    base: list[cst.BaseStatement]
    classes: dict[int, list[cst.BaseStatement]] = field(default_factory=dict)
    members: list[RunnerPlan] = field(default_factory=list)


def _text(node: cst.CSTNode, indent: int, comments: bool = True) -> str:
    """The node's text (the comments above it kept unless ``comments`` is false, blank
    lines not) at ``indent``."""
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        above = cstutil.comments(cstutil.leading(node)) if comments else []
        node = cstutil.with_leading(node, above)
    pad = " " * indent
    lines = cstutil.code(node).rstrip("\n").split("\n")
    return "".join(f"{pad}{line}\n" if line.strip() else "\n" for line in lines)


def _self_fields(node: cst.CSTNode) -> set[str]:
    return {
        a.attr.value
        for a in cstutil.find_all(node, cst.Attribute, cstutil.is_self_attr)
        if isinstance(a, cst.Attribute)
    }


def _method(cdef: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for item in cstutil.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef) and item.name.value == name:
            return item
    return None


def _is_guard(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.If) and cstutil.code(statement.test) == f"{ATTN_BACKEND} is None"
    )


def _parse(
    plan: RunnerPlan, generated: list[cst.BaseStatement], contract: Contract
) -> _Parsed | None:
    typevar, cdef = generated[0], generated[1]
    if not isinstance(cdef, cst.ClassDef):
        return None
    doc = ""
    fields: dict[str, str] = {}
    defaulted: set[str] = set()
    for item in cstutil.body_of(cdef.body):
        small = cstutil.single_small(item)
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString):
            doc = _text(item, 4)
        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            fields[small.target.value] = _text(item, 4)
            if small.value is not None:
                defaulted.add(small.target.value)
    as_dict = _method(cdef, contract.as_dict_method)
    from_dict = _method(cdef, contract.from_dict_method)
    if as_dict is None or from_dict is None:
        return None
    body = list(cstutil.body_of(as_dict.body))
    first = cstutil.single_small(body[0]) if body else None
    if (
        len(body) < 2
        or not isinstance(first, cst.AnnAssign)
        or cstutil.code(first.target) != DICT
        or not isinstance(first.value, cst.Dict)
        or cstutil.code(body[-1]).strip() != f"return {DICT}"
    ):
        return None
    entries: list[tuple[str, str, set[str]]] = []
    for element in first.value.elements:
        if not isinstance(element, cst.DictElement):
            return None
        entries.append(
            (cstutil.code(element.key), cstutil.code(element.value), _self_fields(element.value))
        )
    mutations = [(_text(s, 8), _self_fields(s)) for s in body[1:-1]]
    statements = list(cstutil.body_of(from_dict.body))
    guarded = bool(statements) and _is_guard(statements[0])
    if guarded:
        statements = statements[1:]
    if not statements:
        return None
    ret = cstutil.single_small(statements[-1])
    if not (
        isinstance(ret, cst.Return)
        and isinstance(ret.value, cst.Call)
        and cstutil.code(ret.value.func) == "cls"
    ):
        return None
    kwargs: list[tuple[str, str, set[str]]] = []
    for arg in ret.value.args:
        if arg.keyword is None:
            return None
        kwargs.append((arg.keyword.value, cstutil.code(arg.value), cstutil.loaded(arg.value)))
    return _Parsed(
        plan=plan,
        typevar=typevar,
        cdef=cdef,
        doc=doc,
        fields=fields,
        defaulted=defaulted,
        entries=entries,
        mutations=mutations,
        statements=[(_text(s, 8, comments=False), s) for s in statements[:-1]],
        commented={_text(s, 8, comments=False): _text(s, 8) for s in statements[:-1]},
        guarded=guarded,
        kwargs=kwargs,
    )


def _keyed(node: cst.CSTNode) -> bool:
    """``tensor_dict.pop("key")`` (or ``.get``) with a literal key."""
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and cstutil.code(node.func.value) == DICT
        and node.func.attr.value in ("pop", "get")
        and bool(node.args)
        and cstutil.string_value(node.args[0].value) is not None
    )


def _wholesale(statement: cst.BaseStatement) -> bool:
    """The statement reads the dict other than by popping (or getting) a literal key."""
    reads = sum(1 for n in cstutil.name_uses(statement)[0] if n.value == DICT)
    return reads != len(cstutil.find_all(statement, cst.Call, _keyed))


def _host(plans: list[RunnerPlan]) -> RunnerPlan | None:
    """The runner every other one subclasses or shares a file with (its file is
    imported by theirs already)."""
    for host in plans:
        if all(
            p is host
            or p.path == host.path
            or p.rebase is host
            or any(
                (cstutil.dotted(b.value) or "").split(".")[-1] == host.name for b in p.cdef.bases
            )
            for p in plans
        ):
            return host
    return None


def _camel_words(name: str) -> list[str]:
    return re.findall(r"[A-Z]+(?![a-z])|[A-Z][a-z0-9]*|[a-z0-9]+", name)


def _base_name(names: list[str], taken: set[str]) -> str | None:
    words = [_camel_words(n) for n in names]
    suffix: list[str] = []
    while (
        all(len(w) > len(suffix) for w in words) and len({w[-1 - len(suffix)] for w in words}) == 1
    ):
        suffix.insert(0, words[0][-1 - len(suffix)])
    stem = "".join(suffix) or "ModelInput"
    for candidate in (f"Common{stem}", f"Shared{stem}"):
        if candidate not in taken:
            return candidate
    return None


def _split_from_dict(
    parsed: list[_Parsed], common_fields: list[str]
) -> tuple[set[str], set[str]] | None:
    """The statement texts of ``from_broadcasted_tensor_dict`` the base runs, and the
    kwargs it passes (common fields); None when the statements do not split so."""
    shared = set.intersection(*({t for t, _ in p.statements} for p in parsed))
    while True:
        kept: set[str] | None = None
        for p in parsed:
            local = {DICT, ATTN_BACKEND} | cstutil.bound_in(s for _, s in p.statements)
            bound: set[str] = set()
            mine: set[str] = set()
            for text, statement in p.statements:
                reads = cstutil.loaded(statement) & local
                if text in shared and reads <= bound | {DICT, ATTN_BACKEND}:
                    mine.add(text)
                    bound |= cstutil.bound(statement)
            kept = mine if kept is None else kept & mine
        assert kept is not None
        if kept == shared:
            break
        shared = kept
    for p in parsed:
        bound = cstutil.bound_in(s for t, s in p.statements if t in shared)
        own_bound = cstutil.bound_in(s for t, s in p.statements if t not in shared)
        if bound & own_bound:
            return None
        wholesale_seen = False
        for text, statement in p.statements:
            if text in shared:
                wholesale_seen = wholesale_seen or _wholesale(statement)
                continue
            if cstutil.loaded(statement) & bound:
                return None  # an own value built from a common one
            if DICT in cstutil.loaded(statement) and (wholesale_seen or _wholesale(statement)):
                return None  # it would read the dict before (or after) the base's keys
        for name, _, reads in p.kwargs:
            if name in common_fields:
                if reads & own_bound:
                    return None
            elif reads & bound:
                return None
    kwargs = {(n, v) for n, v, _ in parsed[0].kwargs if n in common_fields}
    for p in parsed[1:]:
        if {(n, v) for n, v, _ in p.kwargs if n in common_fields} != kwargs:
            return None
    return shared, {n for n, _ in kwargs}


def share_inputs(
    generated: list[tuple[RunnerPlan, list[cst.BaseStatement]]],
    input_base: str,
    contract: Contract,
    taken: set[str],
    limit: int = 79,
) -> SharedInputs | None:
    """The base of the group's generated input classes and the classes rewritten on it,
    or None where fewer than two classes are near-identical (at least two fields in
    common, and at least half of each class's fields)."""
    if len(generated) < 2:
        return None
    parsed = [p for p in (_parse(plan, g, contract) for plan, g in generated) if p is not None]
    if len(parsed) != len(generated):
        return None
    host = _host([p.plan for p in parsed])
    if host is None:
        return None
    first = parsed[0]
    common = [
        name
        for name, text in first.fields.items()
        if all(p.fields.get(name) == text for p in parsed[1:])
    ]
    own_required = any(
        name not in common and name not in p.defaulted for p in parsed for name in p.fields
    )
    if own_required:  # a dataclass field with a default may not precede one without
        common = [n for n in common if n not in first.defaulted]
    if len(common) < 2 or any(2 * len(common) < len(p.fields) for p in parsed):
        return None
    split = _split_from_dict(parsed, common)
    if split is None:
        return None
    shared_statements, shared_kwargs = split
    fields = set(common)
    entries = [
        e for e in first.entries if e[2] and e[2] <= fields and all(e in p.entries for p in parsed)
    ]
    mutations = [
        m
        for m in first.mutations
        if m[1] and m[1] <= fields and all(m in p.mutations for p in parsed)
    ]
    name = _base_name([p.plan.input_name for p in parsed], taken)
    if name is None:
        return None
    typevar = f"T{name}"
    if typevar in taken:
        return None
    base_uses_backend = any(
        ATTN_BACKEND in cstutil.loaded(s) for t, s in first.statements if t in shared_statements
    )
    out = SharedInputs(
        name=name,
        typevar=typevar,
        host=host,
        base=_base_class(
            name,
            typevar,
            input_base,
            contract,
            parsed,
            common,
            entries,
            mutations,
            shared_statements,
            shared_kwargs,
            base_uses_backend,
            limit,
        ),
        members=[p.plan for p in parsed],
    )
    for p in parsed:
        out.classes[id(p.plan)] = _subclass(
            p,
            name,
            typevar,
            contract,
            common,
            entries,
            mutations,
            shared_statements,
            shared_kwargs,
            limit,
        )
    return out


def _literal(entries: list[tuple[str, str, set[str]]], indent: int, limit: int) -> str:
    """The dict of ``entries``, one a line; a value that does not fit beside its key
    on the next line (as the generated inputs write them)."""
    if not entries:
        return "{}"
    pad = " " * indent
    lines = []
    for k, v, _ in entries:
        line = f"{pad}    {k}: {v},"
        if len(line) > limit and "\n" not in v:
            line = f"{pad}    {k}:\n{pad}        {v},"
        lines.append(line + "\n")
    return f"{{\n{''.join(lines)}{pad}}}"


def _from_dict_head(contract: Contract, typevar: str) -> str:
    return (
        "    @classmethod\n"
        f"    def {contract.from_dict_method}(\n"
        f"        cls: Type[{typevar}],\n"
        f"        {DICT}: Dict[str, Any],\n"
        f"        {ATTN_BACKEND}: Any = None,\n"
        f"        **{FIELDS}: Any,\n"
        f"    ) -> {typevar}:\n"
    )


_GUARD = (
    f"        if {ATTN_BACKEND} is None:\n"
    f'            raise ValueError(f"{{cls.__name__}} needs the runner\'s {ATTN_BACKEND}")\n'
)


def _base_class(
    name: str,
    typevar: str,
    input_base: str,
    contract: Contract,
    parsed: list[_Parsed],
    common: list[str],
    entries: list[tuple[str, str, set[str]]],
    mutations: list[tuple[str, set[str]]],
    shared_statements: set[str],
    shared_kwargs: set[str],
    guarded: bool,
    limit: int,
) -> list[cst.BaseStatement]:
    first = parsed[0]
    names = [f"``{p.plan.input_name}``" for p in parsed]
    listed = ", ".join(names[:-1]) + f" and {names[-1]}"
    doc = cstutil.docstring(
        f"What {listed} share.", 4, short="The fields and methods its subclasses share."
    )
    kwargs = [f"{n}={v}" for n, v, _ in first.kwargs if n in shared_kwargs] + [f"**{FIELDS}"]
    call = cstutil.call_text("cls", kwargs, 15).replace("\n", "\n        ")
    text = (
        f"{cstutil.typevar_line(typevar, name)}"
        "\n\n"
        "@dataclasses.dataclass(frozen=True)\n"
        f"class {name}({input_base}):\n"
        f"{doc}\n" + "".join(first.fields[n] for n in common) + "\n"
        f"    def {contract.as_dict_method}(self) -> Dict[str, Any]:\n"
        f"        {DICT}: Dict[str, Any] = {_literal(entries, 8, limit)}\n"
        + "".join(text for text, _ in mutations)
        + f"        return {DICT}\n\n"
        + _from_dict_head(contract, typevar)
        + (_GUARD if guarded else "")
        + "".join(
            _with_comments(parsed, text)
            for text, _ in first.statements
            if text in shared_statements
        )
        + f"        return {call}\n"
    )
    return cstutil.parse_statements(text)


def _with_comments(parsed: list[_Parsed], text: str) -> str:
    """A shared statement with the comments one of the classes has above it (the
    first class's where several have some)."""
    for p in parsed:
        if p.commented[text] != text:
            return p.commented[text]
    return text


def _subclass(
    p: _Parsed,
    base: str,
    typevar: str,
    contract: Contract,
    common: list[str],
    entries: list[tuple[str, str, set[str]]],
    mutations: list[tuple[str, set[str]]],
    shared_statements: set[str],
    shared_kwargs: set[str],
    limit: int,
) -> list[cst.BaseStatement]:
    own_fields = [text for n, text in p.fields.items() if n not in common]
    own_entries = [e for e in p.entries if e not in entries]
    own_mutations = [m for m in p.mutations if m not in mutations]
    own_statements = [(t, s) for t, s in p.statements if t not in shared_statements]
    own_kwargs = [f"{n}={v}" for n, v, _ in p.kwargs if n not in shared_kwargs]
    parts = [p.doc, "\n" if own_fields else "", *own_fields]
    if own_entries or own_mutations:
        parts.append(
            "\n"
            f"    def {contract.as_dict_method}(self) -> Dict[str, Any]:\n"
            f"        {DICT} = super().{contract.as_dict_method}()\n"
        )
        if own_entries:
            parts.append(f"        {DICT}.update({_literal(own_entries, 8, limit)})\n")
        parts.extend(text for text, _ in own_mutations)
        parts.append(f"        return {DICT}\n")
    if own_statements or own_kwargs:
        uses_backend = any(ATTN_BACKEND in cstutil.loaded(s) for _, s in own_statements)
        args = [DICT, ATTN_BACKEND, *own_kwargs, f"**{FIELDS}"]
        call = cstutil.call_text(f"super().{contract.from_dict_method}", args, 15)
        parts.append(
            "\n"
            + _from_dict_head(contract, typevar)
            + (_GUARD if uses_backend else "")
            + "".join(p.commented[t] for t, _ in own_statements)
            + "        return "
            + call.replace("\n", "\n        ")
            + "\n"
        )
    body = "".join(parts) or "    pass\n"
    text = f"@dataclasses.dataclass(frozen=True)\nclass {p.plan.input_name}({base}):\n{body}"
    # (its methods take the base's TypeVar: bound to the base, it stands for the class
    # they are called on, this one included)
    return [cstutil.parse_statements(text)[0]]
