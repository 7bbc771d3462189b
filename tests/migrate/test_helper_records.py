"""A helper returning a NamedTuple is read as fields; a field takes its value's own
type over a contradicting return annotation; an Optional field passed where a runner
method takes a value is asserted set (on a copy of the engine fixture)."""

from __future__ import annotations

from pathlib import Path

from codemods.framework.pipeline import MERGE, migrate
from tests.migrate.conftest import FIXTURES, copy_tree

RECORD = """

class Prepared(NamedTuple):
    tokens: torch.Tensor
    attn_metadata: AttentionMetadata
    seq_lens: List[int]
    slot_mapping: torch.Tensor
    num_prefills: int
"""


def _engine(tmp_path: Path, edits: list[tuple[str, str]]) -> Path:
    work = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    path = work / "model_runner.py"
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path.write_text(text)
    return work


#: the helper returns the NamedTuple ``Prepared`` instead of a plain tuple
RETURNS_RECORD = [
    ("from typing import Any,", "from typing import NamedTuple, Any,"),
    ("\n\nclass ModelRunner:", RECORD + "\n\nclass ModelRunner:"),
    (
        ") -> Tuple[torch.Tensor, AttentionMetadata, List[int], torch.Tensor, int]:",
        ") -> Prepared:",
    ),
]


def _prepare_body(text: str, cls: str) -> str:
    body = text.split(f"\nclass {cls}(")[1]
    return body.split("def prepare_model_input(")[1].split("\n    def ")[0]


def test_a_named_tuple_helper_is_read_as_fields_and_kept_with_a_note(tmp_path: Path) -> None:
    work = _engine(
        tmp_path,
        [
            *RETURNS_RECORD,
            (
                "return tokens, attn_metadata, seq_lens, slot_mapping, num_prefills",
                "return Prepared(tokens, attn_metadata, seq_lens, slot_mapping, num_prefills)",
            ),
        ],
    )
    result = migrate([work], select=(MERGE,))
    assert not result.refusals
    runner = work / "model_runner.py"
    new = result.changes[runner].new.decode()
    for cls, uses in (
        ("ModelRunner", "seq_groups, model_input.seq_lens"),
        ("PoolingModelRunner", "attn_metadata=model_input.attn_metadata"),
    ):
        path = runner if cls == "ModelRunner" else work / "pooling_model_runner.py"
        body = _prepare_body(result.changes[path].new.decode(), cls)
        assert "model_input = self._prepare_tensors(seq_groups)" in body, body
        assert uses in body, body
        assert "input_tokens=model_input.tokens" in body, body
        # nothing unpacked into `_`
        assert "_," not in body and "*_" not in body and "_)" not in body, body
    assert "class Prepared(NamedTuple):" in new
    notes = [
        (Path(p), line, text)
        for group in result.groups
        for r in group.runners
        for p, line, text in r.notes
        if "Prepared" in text
    ]
    assert len(notes) == 1, notes
    path, line, text = notes[0]
    assert path == runner
    assert new.splitlines()[line - 1] == "class Prepared(NamedTuple):"
    assert "`slot_mapping`, `num_prefills`" in text


def test_a_name_bound_again_keeps_the_unpacking(tmp_path: Path) -> None:
    work = _engine(
        tmp_path,
        [
            *RETURNS_RECORD,
            (
                "            sampling_metadata = SamplingMetadata.prepare(seq_groups, seq_lens)",
                "            seq_lens = seq_lens[:]\n"
                "            sampling_metadata = SamplingMetadata.prepare(seq_groups, seq_lens)",
            ),
        ],
    )
    result = migrate([work], select=(MERGE,))
    body = _prepare_body(result.changes[work / "model_runner.py"].new.decode(), "ModelRunner")
    assert "model_input" not in body and ") = self._prepare_tensors(seq_groups)" in body, body
    # the other runner, which binds nothing again, still reads it as fields
    pooling = result.changes[work / "pooling_model_runner.py"].new.decode()
    assert "model_input = self._prepare_tensors(seq_groups)" in pooling


def test_the_value_type_holds_and_an_optional_passed_as_a_value_is_asserted(
    tmp_path: Path,
) -> None:
    work = _engine(
        tmp_path,
        [
            # the old annotation says List[int]; the value is the helper's torch.Tensor;
            # it says Optional where every builder sets a SamplingMetadata
            (
                ") -> Tuple[torch.Tensor, AttentionMetadata, SamplingMetadata]:",
                ") -> Tuple[List[int], AttentionMetadata, Optional[SamplingMetadata]]:",
            ),
            (
                "            attn_metadata = self.attn_backend.make_metadata(**metadata_dict)\n",
                "            if metadata_dict:\n"
                "                attn_metadata = self.attn_backend.make_metadata(**metadata_dict)\n"
                "            else:\n"
                "                attn_metadata = None\n",
            ),
            (
                "        # Run the model on every rank.\n",
                "        if self.config.check:\n"
                "            self.check(attn_metadata)\n"
                "        # Run the model on every rank.\n",
            ),
            (
                "    def profile_run(",
                "    def check(self, attn_metadata: AttentionMetadata) -> None:\n"
                "        pass\n\n"
                "    def profile_run(",
            ),
        ],
    )
    result = migrate([work], select=(MERGE,))
    assert not result.refusals
    new = result.changes[work / "model_runner.py"].new.decode()
    assert "    input_tokens: torch.Tensor\n" in new
    assert "    attn_metadata: Optional[AttentionMetadata]\n" in new
    assert "    sampling_metadata: SamplingMetadata\n" in new
    assert (
        "        if self.config.check:\n"
        "            assert model_input.attn_metadata is not None\n"
        "            self.check(model_input.attn_metadata)\n"
    ) in new
