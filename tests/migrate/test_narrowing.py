"""Reads of an Optional value the legacy code relied on being set get an assert, so
plain mypy finds no new error in the rewritten code; guarded reads are left alone."""

from __future__ import annotations

import textwrap

import libcst as cst

from codemods.merge_broadcasts.narrowing import (
    narrow_reads,
    optional_attributes,
    value_parameters,
)
from codemods.toolkit import cstutil


def narrowed(source: str, *values: str) -> str:
    module = cst.parse_module(textwrap.dedent(source))
    func = module.body[0]
    assert isinstance(func, cst.FunctionDef)
    return module.with_changes(body=[narrow_reads(func, values)]).code


def test_an_unchecked_dereference_is_asserted_once_before_it() -> None:
    out = narrowed(
        """\
        def execute_model(self, model_input, kv_caches):
            x = 1
            # decode only
            prefill_meta = model_input.attn_metadata.prefill_metadata
            decode_meta = model_input.attn_metadata.decode_metadata
        """,
        "model_input.attn_metadata",
    )
    assert out == textwrap.dedent(
        """\
        def execute_model(self, model_input, kv_caches):
            x = 1
            # decode only
            assert model_input.attn_metadata is not None
            prefill_meta = model_input.attn_metadata.prefill_metadata
            decode_meta = model_input.attn_metadata.decode_metadata
        """
    )


def test_a_guarded_read_and_a_nested_one_stay_as_they_are_or_get_a_local_assert() -> None:
    source = """\
        def execute_model(self, model_input, kv_caches):
            if model_input.lora_mapping is not None:
                self.set(model_input.lora_mapping.index)
            if self.flag:
                y = model_input.attn_metadata.slot_mapping
            return model_input.attn_metadata
        """
    out = narrowed(source, "model_input.lora_mapping", "model_input.attn_metadata")
    assert "assert model_input.lora_mapping" not in out
    assert out.count("assert model_input.attn_metadata is not None") == 1
    assert "    if self.flag:\n        assert model_input.attn_metadata is not None\n" in out


def test_optional_attributes_are_read_from_the_class() -> None:
    cdef = cst.parse_statement(
        "class W:\n"
        "    def __init__(self):\n"
        "        self.gpu_cache: Optional[List[Tensor]] = None\n"
        "        self.other: List[int] = []\n"
        "        self.third: int | None = None\n"
    )
    assert isinstance(cdef, cst.ClassDef)
    assert optional_attributes(cdef) == {"gpu_cache", "third"}


def test_an_optional_passed_where_a_method_takes_a_value_is_asserted_there() -> None:
    cdef = cst.parse_statement(
        "class R:\n"
        "    def set_active_loras(self, requests: Set[int], mapping: LoRAMapping) -> None: ...\n"
        "    def log(self, mapping: Optional[LoRAMapping], *, tag: str = '') -> None: ...\n"
        "    def add(self, mapping, count: int = None) -> None: ...\n"
    )
    assert isinstance(cdef, cst.ClassDef)
    params = value_parameters([cdef])
    assert params == {
        "set_active_loras": frozenset({0, "requests", 1, "mapping"}),
        "log": frozenset({"tag"}),
        "add": frozenset(),
    }
    source = textwrap.dedent(
        """\
        def execute_model(self, model_input, kv_caches):
            self.log(model_input.lora_mapping)
            self.add(model_input.lora_mapping)
            if self.lora_config:
                self.set_active_loras(model_input.lora_requests, model_input.lora_mapping)
            self.set_active_loras(set(), mapping=model_input.lora_mapping)
        """
    )
    module = cst.parse_module(source)
    func = module.body[0]
    assert isinstance(func, cst.FunctionDef)
    out = module.with_changes(body=[narrow_reads(func, ["model_input.lora_mapping"], params)]).code
    # passed where the value may be None: left alone; where a value is taken: asserted,
    # inside the `if` the legacy code relied on, and again at the top level after it
    assert out == source.replace(
        "    if self.lora_config:\n",
        "    if self.lora_config:\n        assert model_input.lora_mapping is not None\n",
    ).replace(
        "    self.set_active_loras(set(),",
        "    assert model_input.lora_mapping is not None\n    self.set_active_loras(set(),",
    )
    # without the method's parameters nothing is asserted
    assert narrowed(source, "model_input.lora_mapping") == source


def test_only_what_holds_blocks_is_rebuilt() -> None:
    """The asserts go into nested blocks of every kind (``elif``, ``for``, ``try`` and
    its handlers inside ``while`` and ``with``, a nested ``def``), and everything else
    stays the object it was: the headers' expressions, and the simple statements no
    assert was put above."""
    source = textwrap.dedent(
        """\
        def execute_model(self, model_input, kv_caches):
            n = compute(model_input, kv_caches)
            if self.a:
                pass
            elif self.b(kv_caches):
                y = model_input.attn_metadata.slot_mapping
            else:
                for item in kv_caches:
                    z = model_input.attn_metadata.block_tables
                while self.c:
                    with self.lock(kv_caches) as held:
                        try:
                            w = model_input.attn_metadata.seq_lens
                        except ValueError:
                            v = model_input.attn_metadata.context_lens
                        finally:
                            def inner():
                                return model_input.attn_metadata.prefill_metadata
            return n
        """
    )
    module = cst.parse_module(source)
    func = module.body[0]
    assert isinstance(func, cst.FunctionDef)
    new = narrow_reads(func, ["model_input.attn_metadata"])
    lines = module.with_changes(body=[new]).code.splitlines()
    asserted = [n for n, text in enumerate(lines) if "assert model_input.attn_metadata" in text]
    heads = ("elif", "for item", "try:", "except", "def inner")
    assert [lines[n - 1].strip().split(" ")[0] for n in asserted] == [
        h.split(" ")[0] for h in heads
    ], lines
    old = {id(n) for n in cstutil.find_all(func, cst.CSTNode)}
    in_asserts = {
        id(n) for a in cstutil.find_all(new, cst.Assert) for n in cstutil.find_all(a, cst.CSTNode)
    }
    expressions = [n for n in cstutil.find_all(new, cst.BaseExpression) if id(n) not in in_asserts]
    assert len(expressions) > 30 and all(id(n) in old for n in expressions)
    statements = [
        s
        for block in cstutil.find_all(new, cst.IndentedBlock)
        for before, s in zip([None, *block.body], block.body, strict=False)  # type: ignore[attr-defined]
        if isinstance(s, cst.SimpleStatementLine)
        and not isinstance(cstutil.single_small(before or s), cst.Assert)
        and not isinstance(cstutil.single_small(s), cst.Assert)
    ]
    assert len(statements) == 3 and all(id(s) in old for s in statements)
