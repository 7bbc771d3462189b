"""Reading one file: :func:`extract_source` turns its text into a :class:`ModuleFacts`
(see :mod:`runnercheck.analysis.model` for what the facts hold). Nothing here imports
or executes the code it reads."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

from runnercheck.analysis.bindings import BindingReader
from runnercheck.analysis.dicts import DictReader
from runnercheck.analysis.model import (
    CallSite,
    ClassFacts,
    Condition,
    FieldFacts,
    FunctionFacts,
    LiteralDictFacts,
    ModuleFacts,
    Role,
    SyntaxErrorFacts,
    flatten_calls,
)
from runnercheck.analysis.recognise import is_driver_only_marker
from runnercheck.analysis.refusals import refused_attrs
from runnercheck.analysis.steps import StepReader
from runnercheck.analysis.syntax import (
    decorator_names,
    dotted,
    is_stub_body,
    last_name,
    literal_text,
    loaded_names,
    module_level,
    names_in,
    param_defaults,
    read_import,
    read_import_source,
    str_const,
    suppressions,
    top_level_names,
    unparse,
    walk,
)
from runnercheck.contract import VLLM, Contract, is_driver_only_comment
from runnercheck.deep import parse_failure

_DICT_ANNOTATION = re.compile(r"\b(Dict|dict|Mapping|MutableMapping)\b")
#: The words :data:`_DICT_ANNOTATION` finds: an ASCII identifier holds one as a word
#: only by being it (every character of it is a word character).
_DICT_WORDS = frozenset({"Dict", "dict", "Mapping", "MutableMapping"})
_IDENTIFIERS = (ast.keyword, ast.arg)


def _names_dict(annotation: ast.expr) -> bool:
    """Whether the annotation's text names a dict type as a word (``Dict[str, Any]``,
    ``"Mapping[str, int]"``): each word of its source is a name, an attribute, a
    keyword's or a parameter's name, or lies in a constant, so those are searched
    (as fast as reading the text back, without building it)."""
    for node in walk(annotation):
        kind = node.__class__
        if kind is ast.Name:
            text = node.id  # type: ignore[attr-defined]
        elif kind is ast.Attribute:
            text = node.attr  # type: ignore[attr-defined]
        elif kind is ast.Constant:
            if _DICT_ANNOTATION.search(repr(node.value)):  # type: ignore[attr-defined]
                return True
            continue
        elif kind in _IDENTIFIERS:
            text = node.arg or ""  # type: ignore[attr-defined]
        else:
            continue
        if text in _DICT_WORDS if text.isascii() else _DICT_ANNOTATION.search(text):
            return True
    return False


class FunctionReader(DictReader, StepReader, BindingReader):
    """Builds the :class:`FunctionFacts` of one function."""

    def __init__(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        qualname: str,
        path: str,
        imports: dict[str, str],
        contract: Contract,
        in_class: bool,
    ) -> None:
        self.node = node
        self.path = path
        self.in_class = in_class
        self.imports = imports
        self.contract = contract
        args = node.args
        positional_args = [*args.posonlyargs, *args.args]
        positional = [a.arg for a in positional_args]
        self.params = {name: i for i, name in enumerate(positional)}
        self.dict_params = {
            a.arg
            for a in positional_args
            if "dict" in a.arg.lower() or (a.annotation is not None and _names_dict(a.annotation))
        }
        decorators = decorator_names(node.decorator_list)
        last = {last_name(d) for d in decorators}
        self.facts = FunctionFacts(
            name=node.name,
            qualname=qualname,
            path=path,
            line=node.lineno,
            col=node.col_offset + 1,
            end_line=node.end_lineno or node.lineno,
            params=tuple(positional),
            decorators=decorators,
            is_classmethod="classmethod" in last,
            is_staticmethod="staticmethod" in last,
            is_property="property" in last or "cached_property" in last,
            is_abstract="abstractmethod" in last
            or "abstractproperty" in last
            or "abstractclassmethod" in last,
            is_stub=is_stub_body(node.body),
        )
        self.self_name: str | None = None
        if in_class and positional and not self.facts.is_staticmethod:
            if not self.facts.is_classmethod:
                self.self_name = positional[0]
            # ``self``/``cls`` is not a parameter whose value flows anywhere
            self.params.pop(positional[0], None)
        self.bad_locals: dict[str, str] = {}
        self.calls: list[CallSite] = []
        self.noted: set[int] = set()
        self.nodes: list[ast.AST] = []
        self.nested: list[ast.AST] = []
        self.param_names = frozenset(self.params)
        self.role: Role | None = None
        self.conditions: tuple[Condition, ...] = ()
        self.call_conditions: dict[tuple[int, int], tuple[Condition, ...]] = {}
        self.call_roles: dict[tuple[int, int], Role] = {}
        self.node_roles: dict[int, Role] = {}
        self.node_guards: dict[int, tuple[tuple[ast.expr, ...], bool]] = {}

    def read_roles(self) -> None:
        """Only walk the body as :meth:`read` does: :attr:`nodes` with the ranks that
        run each (:attr:`node_roles`), the ranks and the conditions around each call
        (:attr:`call_roles`, :attr:`call_conditions`). ``migrate``'s value reader
        (:mod:`codemods.facts.values`) starts from them, or from those of a reader that
        has read the method (the same walk: what it records depends on neither the
        imports nor anything :meth:`read` reads after it, and nothing after it
        changes what it recorded)."""
        self._steps(self.node.body)

    def read(self) -> FunctionFacts:
        self.facts.param_defaults = param_defaults(self.node.args)
        self.facts.refuses = refused_attrs(self.node.body)
        self.facts.steps = self._steps(self.node.body)
        self.read_self_constants()
        self._read_dicts()
        self._read_bindings()
        returns = self.node.returns
        if returns is not None:
            self.facts.return_annotation = str_const(returns) or unparse(returns)
        if self.node.name == self.contract.as_dict_method:
            self.facts.literal_dict = literal_dict(self.node.body)
        self.facts.constant_return = constant_return(self.node.body)
        return self.facts


def constant_return(body: list[ast.stmt]) -> str | None:
    """``repr`` of ``CONST`` when the body is only ``return CONST`` (after a docstring)."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) == 1 and isinstance(body[0], ast.Return):
        value = body[0].value
        if isinstance(value, ast.Constant):
            return repr(value.value)
    return None


def literal_dict(body: list[ast.stmt]) -> LiteralDictFacts | None:
    """``d = {...}; <statements>; return d`` (after an optional docstring), or None."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) < 2:
        return None
    first, last = body[0], body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)):
        return None
    if isinstance(first, ast.Assign) and len(first.targets) == 1:
        target, value = first.targets[0], first.value
    elif isinstance(first, ast.AnnAssign) and first.value is not None:
        target, value = first.target, first.value
    else:
        return None
    if not (isinstance(target, ast.Name) and isinstance(value, ast.Dict)):
        return None
    var = target.id
    if last.value.id != var:
        return None
    items: list[tuple[str, str]] | None = []
    for key, item in zip(value.keys, value.values, strict=True):
        text = str_const(key)
        if text is None or items is None:
            items = None
            break
        items.append((text, ast.dump(item)))
    return LiteralDictFacts(
        var=var,
        items=tuple(items) if items is not None else None,
        mutations=tuple(_renamed_dump(stmt, var) for stmt in body[1:-1]),
    )


def _renamed_dump(stmt: ast.stmt, var: str) -> str:
    """``ast.dump`` of a statement with the name ``var`` read as ``_``."""
    dumped = ast.dump(stmt)
    return dumped.replace(f"Name(id='{var}',", "Name(id='_',")


def _field_facts(stmt: ast.AnnAssign, marker_key: str, lines: list[str]) -> FieldFacts | None:
    if not isinstance(stmt.target, ast.Name):
        return None
    annotation = unparse(stmt.annotation)
    if "ClassVar" in annotation or "InitVar" in annotation:
        return None
    driver_only = is_driver_only_comment(lines, stmt.lineno)
    init = True
    metadata_ref = None
    value = stmt.value
    if isinstance(value, ast.Call) and last_name(dotted(value.func)) == "field":
        for kw in value.keywords:
            if kw.arg == "metadata":
                if is_driver_only_marker(kw.value, marker_key):
                    driver_only = True
                elif isinstance(kw.value, (ast.Name, ast.Attribute)):
                    metadata_ref = dotted(kw.value)
            if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
                init = False
    return FieldFacts(
        name=stmt.target.id,
        line=stmt.lineno,
        col=stmt.col_offset + 1,
        annotation=annotation,
        has_default=value is not None,
        driver_only=driver_only,
        init=init,
        metadata_ref=metadata_ref,
        default=literal_text(value),
    )


def _method_shape(
    method: FunctionFacts,
    node: ast.FunctionDef,
    contract: Contract,
    tree: ast.Module,
    lines: list[str],
) -> None:
    """What ``migrate`` plans from, read in the same pass: the legacy split of a method
    that broadcasts, and the request reads of the execute method."""
    # only ``migrate`` asks: ``check`` never imports these readers
    from runnercheck.analysis.requests import non_driver_reads, request_reads
    from runnercheck.analysis.shapes import legacy_split

    if any(step.step_broadcast for step in flatten_calls(method.steps)):
        method.split = legacy_split(node, contract, tree)
    if node.name == contract.execute_method:
        method.request_reads = request_reads(node, lines)
        method.non_driver_names = non_driver_reads(node, contract.driver_flag)
        method.param_annotations = tuple(
            unparse(a.annotation) if a.annotation is not None else ""
            for a in [*node.args.posonlyargs, *node.args.args][1:]
        )


def _class_facts(
    node: ast.ClassDef,
    path: str,
    imports: dict[str, str],
    contract: Contract,
    tree: ast.Module,
    lines: list[str],
    shapes: bool = True,
    readers: dict[int, FunctionReader] | None = None,
) -> ClassFacts:
    bases: list[str] = []
    base_args: list[tuple[str, ...]] = []
    for base in node.bases:
        if isinstance(base, ast.Subscript):
            bases.append(dotted(base.value))
            base_args.append(names_in(base.slice))
        else:
            bases.append(dotted(base))
            base_args.append(())
    decorators = decorator_names(node.decorator_list)
    facts = ClassFacts(
        name=node.name,
        path=path,
        line=node.lineno,
        col=node.col_offset + 1,
        end_line=node.end_lineno or node.lineno,
        bases=tuple(bases),
        base_args=tuple(base_args),
        decorators=decorators,
        is_dataclass=any(last_name(d) == "dataclass" for d in decorators),
    )
    fields: list[FieldFacts] = []
    abstract: list[str] = []
    # a NamedTuple's field types, read only where a helper may return one
    named_tuple = any(last_name(b) == "NamedTuple" for b in bases)
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign):
            if facts.is_dataclass:
                field_facts = _field_facts(stmt, contract.driver_only_key, lines)
                if field_facts is not None:
                    fields.append(field_facts)
            if isinstance(stmt.target, ast.Name):
                if named_tuple:
                    facts.annotation_texts[stmt.target.id] = unparse(stmt.annotation)
                if stmt.value is not None:
                    facts.class_attrs[stmt.target.id] = names_in(stmt.value)
                    literal = literal_text(stmt.value)
                    if literal is not None and not facts.is_dataclass:
                        facts.class_constants[stmt.target.id] = literal
                elif not facts.is_dataclass:
                    facts.annotations[stmt.target.id] = names_in(stmt.annotation)
        elif isinstance(stmt, ast.Assign):
            literal = literal_text(stmt.value)
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    facts.class_attrs[target.id] = names_in(stmt.value)
                    if literal is not None:
                        facts.class_constants[target.id] = literal
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            reader = FunctionReader(
                stmt, f"{node.name}.{stmt.name}", path, imports, contract, in_class=True
            )
            method = reader.read()
            if readers is not None:
                readers[id(stmt)] = reader
            if shapes and isinstance(stmt, ast.FunctionDef):
                _method_shape(method, stmt, contract, tree, lines)
            facts.methods[stmt.name] = method
            if method.is_abstract:
                abstract.append(stmt.name)
            reader.self_attrs(facts.self_attrs)
    facts.fields = tuple(fields)
    facts.abstract_methods = tuple(abstract)
    return facts


def extract_tree(
    tree: ast.Module,
    path: str,
    source: str = "",
    contract: Contract = VLLM,
    names: bool = False,
    loaded: bool | None = None,
    known: Mapping[int, ClassFacts | FunctionFacts] | None = None,
    shapes: bool | None = None,
    readers: dict[int, FunctionReader] | None = None,
) -> ModuleFacts:
    """Facts of an already parsed module. ``names`` (what ``migrate`` asks for): also
    every name it loads (unless ``loaded`` is False: ``migrate`` reads them only for the
    files it rewrites), and the shapes ``migrate`` plans from (the legacy split, the
    request reads of the execute method; unless ``shapes`` is False: :func:`read_shapes`
    reads them later, for the classes group planning asks about); ``check`` reads
    neither. ``known``: facts already read of classes and functions at module level, by
    the ``id`` of their node, taken as they are (the caller answers for them being what
    reading gives). ``readers``: filled with the reader of each method it reads of a
    class at module level, by the ``id`` of its node (the walk of its body, which
    ``migrate``'s value reader starts from: :meth:`FunctionReader.read_roles`)."""
    with_shapes = names if shapes is None else shapes
    facts = ModuleFacts(path=path, suppressions=suppressions(source) if source else {})
    # (the shapes of known facts are whatever their reader read)
    facts.shapes_read = with_shapes and not known
    lines = source.splitlines()
    statements = module_level(tree.body)
    for stmt in statements:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            read_import(stmt, facts.imports)
            read_import_source(stmt, facts.import_sources)
    facts.top_level_names = top_level_names(tree.body)
    if names if loaded is None else loaded:
        facts.loaded_names = loaded_names(tree)
    markers: set[str] = set()
    for stmt in statements:
        if isinstance(stmt, ast.Assign) and is_driver_only_marker(
            stmt.value, contract.driver_only_key
        ):
            markers.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
        elif (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and is_driver_only_marker(stmt.value, contract.driver_only_key)
        ):
            markers.add(stmt.target.id)
    facts.driver_only_constants = frozenset(markers)
    facts.typevars = frozenset(
        target.id
        for stmt in statements
        if isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and last_name(dotted(stmt.value.func)) == "TypeVar"
        for target in stmt.targets
        if isinstance(target, ast.Name)
    )
    known = known or {}
    for stmt in statements:
        if isinstance(stmt, ast.ClassDef):
            found = known.get(id(stmt))
            facts.classes[stmt.name] = (
                found
                if isinstance(found, ClassFacts)
                else _class_facts(
                    stmt,
                    path,
                    facts.imports,
                    contract,
                    tree,
                    lines,
                    shapes=with_shapes,
                    readers=readers,
                )
            )
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found = known.get(id(stmt))
            facts.functions[stmt.name] = (
                found
                if isinstance(found, FunctionFacts)
                else FunctionReader(
                    stmt, stmt.name, path, facts.imports, contract, in_class=False
                ).read()
            )
    return facts


def read_shapes(
    facts: ModuleFacts, tree: ast.Module, source: str, contract: Contract = VLLM
) -> None:
    """Reads into ``facts``, the facts of ``tree`` read without them, the shapes
    ``migrate`` plans from, as :func:`extract_tree` with ``names`` reads them (for the
    class and method that each name stands for: the last one defined)."""
    if facts.shapes_read:
        return
    lines = source.splitlines()
    last: dict[str, ast.ClassDef] = {}
    for stmt in module_level(tree.body):
        if isinstance(stmt, ast.ClassDef):
            last[stmt.name] = stmt
    for name, node in last.items():
        cls = facts.classes.get(name)
        if cls is None:
            continue
        defined: dict[str, ast.stmt] = {}
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                defined[stmt.name] = stmt
        for method_name, stmt in defined.items():
            method = cls.methods.get(method_name)
            if method is not None and isinstance(stmt, ast.FunctionDef):
                _method_shape(method, stmt, contract, tree, lines)
    facts.shapes_read = True


def extract_source(
    source: str | bytes, path: str, contract: Contract = VLLM, names: bool = False
) -> ModuleFacts:
    """Facts of one file's text; a file that does not parse gets ``syntax_error`` set."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
        return ModuleFacts(
            path=path,
            syntax_error=SyntaxErrorFacts(line, max(col, 1), exc.msg),
            suppressions=suppressions(text),
        )
    except ValueError as exc:  # e.g. null bytes
        return ModuleFacts(path=path, syntax_error=SyntaxErrorFacts(1, 1, str(exc)))
    except (RecursionError, MemoryError) as exc:  # nesting deeper than Python itself accepts
        return ModuleFacts(path=path, syntax_error=SyntaxErrorFacts(1, 1, parse_failure(exc)))
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    return extract_tree(tree, path, text, contract, names)


def extract_file(
    path: str | Path, contract: Contract = VLLM, display_path: str | None = None
) -> ModuleFacts:
    """Facts of one file on disk (``display_path`` is the path recorded in the facts)."""
    data = Path(path).read_bytes()
    return extract_source(data, display_path or str(path), contract)
