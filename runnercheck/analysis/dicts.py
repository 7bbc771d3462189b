"""How a function builds, merges, pops and reads dicts: the :class:`DictFacts` part of
a function's facts (keys produced, ``update``/``**`` merges, helpers that receive the
dict, ``pop``/``del``, reads and ``target(**d)`` constructors)."""

from __future__ import annotations

import ast

from runnercheck.analysis.model import (
    CallSite,
    Condition,
    ConstructFacts,
    DictFacts,
    FunctionFacts,
    HelperCall,
    KeyFacts,
    ReadFacts,
    Role,
)
from runnercheck.analysis.recognise import bad_value
from runnercheck.analysis.syntax import (
    arg_text,
    col_of,
    dotted,
    last_name,
    line_of,
    params_read,
    read_import,
    self_fields,
    str_const,
    walk,
)
from runnercheck.contract import Contract


def call_site(
    node: ast.Call,
    nested: bool = False,
    conditions: tuple[Condition, ...] = (),
    role: Role | None = None,
) -> CallSite:
    keywords: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()
    star_kwargs = False
    if node.keywords:  # (one pass over them: most calls have none)
        names: list[str] = []
        texts: list[tuple[str, str]] = []
        for kw in node.keywords:
            if kw.arg is None:
                star_kwargs = True
            else:
                names.append(kw.arg)
                texts.append((kw.arg, arg_text(kw.value)))
        keywords, kwargs = tuple(names), tuple(texts)
    return CallSite(
        node.lineno,
        node.col_offset + 1,
        dotted(node.func),
        len(node.args),
        keywords,
        star_kwargs,
        nested,
        conditions,
        role,
        tuple([arg_text(a) for a in node.args]) if node.args else (),
        kwargs,
    )


#: Methods that change a container in place.
_MUTATORS = frozenset(
    {"append", "extend", "insert", "clear", "update", "pop", "popitem", "remove", "add"}
)


def _mutated_param_attr(func: ast.expr, params: dict[str, int]) -> tuple[str, str] | None:
    """``param.attr.append`` (a mutator called on a parameter's attribute) -> (param, attr)."""
    if (
        isinstance(func, ast.Attribute)
        and func.attr in _MUTATORS
        and isinstance(func.value, ast.Attribute)
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id in params
    ):
        return func.value.value.id, func.value.attr
    return None


class DictReader:
    """The dict-reading half of a function reader (see :mod:`runnercheck.analysis.extract`)."""

    facts: FunctionFacts
    params: dict[str, int]
    dict_params: set[str]
    self_name: str | None
    imports: dict[str, str]
    contract: Contract
    path: str
    bad_locals: dict[str, str]
    calls: list[CallSite]
    call_conditions: dict[tuple[int, int], tuple[Condition, ...]]
    call_roles: dict[tuple[int, int], Role]
    noted: set[int]
    nodes: list[ast.AST]
    #: Nested functions, classes and lambdas of the body (their calls run later, if ever).
    nested: list[ast.AST]
    node_guards: dict[int, tuple[tuple[ast.expr, ...], bool]]

    def _dict(self, name: str) -> DictFacts:
        facts = self.facts.dicts.get(name)
        if facts is None:
            facts = DictFacts(name=name, param_index=self.params.get(name))
            self.facts.dicts[name] = facts
        return facts

    def _require(self, facts: DictFacts, key: str, node: ast.AST) -> None:
        """``node`` reads ``key`` with no default: a KeyError when the key is missing,
        unless a test around it names the key or a ``try`` catches."""
        if key in facts.required:
            return
        guard = self.node_guards.get(id(node))
        if guard is not None:
            tests, catching = guard
            if catching or any(
                isinstance(sub, ast.Constant) and sub.value == key
                for test in tests
                for sub in walk(test)
            ):
                return
        facts.required[key] = ReadFacts(line_of(node), col_of(node))

    def _key(self, key: str, key_node: ast.AST, value: ast.expr) -> KeyFacts:
        bad = bad_value(value, self.self_name, self.imports)
        if bad is None and isinstance(value, ast.Name):
            bad = self.bad_locals.get(value.id)
        return KeyFacts(
            key=key,
            path=self.path,
            line=line_of(key_node),
            col=col_of(key_node),
            fields=self_fields(value, self.self_name),
            params=params_read(value, self.params),
            bad_value=bad,
        )

    def _is_all_fields(self, node: ast.expr) -> bool:
        if self.self_name is None:
            return False
        for sub in walk(node):
            if isinstance(sub, ast.Call):
                name = last_name(dotted(sub.func))
                if (
                    name in ("asdict", "vars", "fields", "getattr", "astuple")
                    and sub.args
                    and isinstance(sub.args[0], ast.Name)
                    and sub.args[0].id == self.self_name
                ):
                    return True
            if (
                isinstance(sub, ast.Attribute)
                and sub.attr == "__dict__"
                and isinstance(sub.value, ast.Name)
                and sub.value.id == self.self_name
            ):
                return True
        return False

    def _add_value(self, facts: DictFacts, value: ast.expr) -> None:
        """Merge a dict-valued expression into ``facts``."""
        if isinstance(value, ast.Dict):
            for key_node, item in zip(value.keys, value.values, strict=True):
                if key_node is None:  # ``**other``
                    self._add_value(facts, item)
                    continue
                key = str_const(key_node)
                if key is None:
                    facts.dynamic = True
                    facts.flow_params.update(params_read(item, self.params))
                    facts.dynamic_fields.update(self_fields(item, self.self_name))
                    continue
                kf = self._key(key, key_node, item)
                facts.keys[key] = kf
                facts.flow_params.update(kf.params)
            return
        if isinstance(value, ast.Name):
            if value.id in self.params:
                facts.flow_params.add(self.params[value.id])
            if value.id != facts.name:
                facts.merges.append(value.id)
            return
        if isinstance(value, ast.Call):
            callee = dotted(value.func)
            if callee == "dict":
                for arg in value.args:
                    self._add_value(facts, arg)
                for kw in value.keywords:
                    if kw.arg is None:
                        self._add_value(facts, kw.value)
                    else:
                        kf = self._key(kw.arg, kw, kw.value)
                        facts.keys[kw.arg] = kf
                        facts.flow_params.update(kf.params)
                return
            if self._is_all_fields(value):
                facts.all_fields = True
                return
            facts.sources.append(callee)
            facts.dynamic_fields.update(self_fields(value, self.self_name))
            facts.flow_params.update(params_read(value, self.params))
            return
        if isinstance(value, ast.DictComp):
            if self._is_all_fields(value):
                facts.all_fields = True
                return
            facts.dynamic = True
            facts.flow_params.update(params_read(value, self.params))
            facts.dynamic_fields.update(self_fields(value, self.self_name))
            return
        if self._is_all_fields(value):
            facts.all_fields = True
            return
        facts.dynamic = True
        facts.flow_params.update(params_read(value, self.params))
        facts.dynamic_fields.update(self_fields(value, self.self_name))

    @staticmethod
    def _dictish(value: ast.expr) -> bool:
        if isinstance(value, (ast.Dict, ast.DictComp)):
            return True
        if isinstance(value, ast.Call):
            callee = dotted(value.func)
            name = last_name(callee)
            return (
                callee == "dict"
                or "dict" in name
                or name in ("asdict", "vars", "copy")
                or name.startswith("as_")
            )
        return False

    def _note_write(self, param: str, attr: str) -> None:
        written = self.facts.param_writes.get(param, ())
        if attr not in written:
            self.facts.param_writes[param] = (*written, attr)

    def _read_assign(self, target: ast.expr, value: ast.expr) -> None:
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id in self.params
        ):
            self._note_write(target.value.id, target.attr)
        if isinstance(target, ast.Name):
            if isinstance(value, ast.Call):
                self.facts.assigned_calls[target.id] = dotted(value.func)
            bad = bad_value(value, self.self_name, self.imports)
            if bad is not None:
                self.bad_locals[target.id] = bad
            if self._dictish(value) or target.id in self.facts.dicts:
                facts = self._dict(target.id)
                if isinstance(value, ast.Call):
                    # ``d = helper(backend, d)``: the helper is applied to ``d``.
                    self._note_call(value)
                    self.noted.add(id(value))
                    if any(isinstance(a, ast.Name) and a.id == target.id for a in value.args):
                        return
                self._add_value(facts, value)
            return
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            facts = self._dict(target.value.id)
            key = str_const(target.slice)
            if key is None:
                facts.dynamic = True
                facts.flow_params.update(params_read(value, self.params))
                facts.dynamic_fields.update(self_fields(value, self.self_name))
            else:
                kf = self._key(key, target.slice, value)
                facts.keys[key] = kf
                facts.flow_params.update(kf.params)

    def _note_call(self, call: ast.Call) -> None:
        """Dict operations expressed as calls: update/pop/get/setdefault, helpers, ``f(**d)``."""
        callee = dotted(call.func)
        name = last_name(callee)
        recv_node = call.func.value if isinstance(call.func, ast.Attribute) else None
        if isinstance(recv_node, ast.Name) and name in (
            "update",
            "pop",
            "get",
            "setdefault",
            "__setitem__",
        ):
            facts = self._dict(recv_node.id)
            if name == "update":
                for arg in call.args:
                    self._add_value(facts, arg)
                for kw in call.keywords:
                    if kw.arg is None:
                        self._add_value(facts, kw.value)
                    else:
                        kf = self._key(kw.arg, kw, kw.value)
                        facts.keys[kw.arg] = kf
                        facts.flow_params.update(kf.params)
            elif name == "setdefault" and call.args:
                key = str_const(call.args[0])
                if key is None:
                    facts.dynamic = True
                elif len(call.args) > 1:
                    facts.keys.setdefault(key, self._key(key, call.args[0], call.args[1]))
            elif name == "pop" and call.args:
                key = str_const(call.args[0])
                if key is None:
                    facts.dynamic_pop = True
                else:
                    facts.pops.setdefault(key, call.lineno)
                    if len(call.args) == 1 and not call.keywords:
                        self._require(facts, key, call)
            elif name == "get" and call.args:
                key = str_const(call.args[0])
                if key is not None:
                    facts.reads.add(key)
        # ``target(**d)``
        for kw in call.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Name):
                self._dict(kw.value.id).constructs.append(
                    ConstructFacts(target=callee, line=call.lineno, col=call.col_offset + 1)
                )
        # a dict passed as a positional argument to a helper (or to the broadcast)
        reads: list[tuple[tuple[str, ...], tuple[int, ...]]] = []

        def helper_call(index: int) -> HelperCall:
            if not reads:  # computed once, only for calls that receive a dict
                reads.extend(
                    (self_fields(a, self.self_name), params_read(a, self.params)) for a in call.args
                )
            return HelperCall(
                callee,
                call.lineno,
                call.col_offset + 1,
                index,
                tuple(r[0] for r in reads),
                tuple(r[1] for r in reads),
                tuple(
                    dotted(a) if isinstance(a, (ast.Name, ast.Attribute)) else "" for a in call.args
                ),
            )

        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Name) and (
                arg.id in self.facts.dicts or arg.id in self.dict_params or "dict" in arg.id
            ):
                if name in ("update", "pop", "get", "len", "isinstance", "bool", "list"):
                    continue
                self._dict(arg.id).helpers.append(helper_call(index))
            elif isinstance(arg, ast.Dict) and name == self.contract.broadcast_function:
                pseudo = self._dict(f"<arg@{call.lineno}:{call.col_offset + 1}>")
                self._add_value(pseudo, arg)
                pseudo.helpers.append(helper_call(index))

    def _read_dicts(self) -> None:
        returns: list[str] = []
        for node in self.nodes:  # (calls first: the most of them)
            if isinstance(node, ast.Call):
                where = (node.lineno, node.col_offset + 1)
                self.calls.append(
                    call_site(
                        node,
                        conditions=self.call_conditions.get(where, ()),
                        role=self.call_roles.get(where),
                    )
                )
                mutated = _mutated_param_attr(node.func, self.params)
                if mutated is not None:
                    self._note_write(*mutated)
                if id(node) not in self.noted:
                    self._note_call(node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self._read_assign(target, node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                self._read_assign(node.target, node.value)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                if node.target.id in self.facts.dicts and isinstance(node.op, ast.BitOr):
                    self._add_value(self._dict(node.target.id), node.value)
            elif isinstance(node, ast.Delete):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                        key = str_const(target.slice)
                        facts = self._dict(target.value.id)
                        if key is None:
                            facts.dynamic_pop = True
                        else:
                            facts.pops.setdefault(key, node.lineno)
                            self._require(facts, key, node)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                if isinstance(node.value, ast.Name):
                    name = node.value.id
                    key = str_const(node.slice)
                    if key is not None and (name in self.facts.dicts or name in self.dict_params):
                        facts = self._dict(name)
                        facts.reads.add(key)
                        self._require(facts, key, node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                read_import(node, self.imports)  # lazy imports count for callee resolution
            elif isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if isinstance(value, ast.Name):
                    returns.append(value.id)
                    known = value.id in self.facts.dicts or value.id in self.params
                    facts = self._dict(value.id)
                    if not known:  # a name bound by a call not named as a dict, or else
                        callee = self.facts.assigned_calls.get(value.id)
                        if callee is not None:
                            facts.sources.append(callee)  # followed, or left open
                        else:
                            facts.dynamic = True
                elif isinstance(value, (ast.Dict, ast.DictComp)) or (
                    isinstance(value, ast.Call) and dotted(value.func) == "dict"
                ):
                    pseudo = f"<return@{node.lineno}>"
                    self._add_value(self._dict(pseudo), value)
                    returns.append(pseudo)
                elif isinstance(value, ast.Call) and self._dictish(value):
                    pseudo = f"<return@{node.lineno}>"
                    self._add_value(self._dict(pseudo), value)
                    returns.append(pseudo)
        for nested in self.nested:
            self.calls += [
                call_site(sub, nested=True) for sub in walk(nested) if isinstance(sub, ast.Call)
            ]
        self.facts.returns = tuple(dict.fromkeys(returns))
        self.facts.calls = tuple(self.calls)
