"""Reads of an Optional value the legacy code relied on being set get an assert, so
plain mypy finds no new error in the rewritten code; guarded reads are left alone."""

from __future__ import annotations

import textwrap

import libcst as cst

from codemods.merge_broadcasts.narrowing import narrow_reads, optional_attributes


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
