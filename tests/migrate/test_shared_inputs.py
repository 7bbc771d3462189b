"""Near-identical generated inputs share one base: the ``twin_inputs`` variant
(:mod:`tests.migrate.variants`), whose GPU runner and the embedding runner that
subclasses it prepare inputs that differ in one field each, migrates to one base input
holding the common fields and methods and one subclass per runner adding its own, and
the inputs still make the round trip through the broadcast dict."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from runnercheck.demo.engine import run_engine
from tests.migrate import variants

VARIANT = "twin_inputs"
RUNNERS = ("model_runner.py", "embedding_model_runner.py")
INPUTS = {"ModelRunnerInput", "EmbeddingModelRunnerInput"}


def _classes(tree: dict[str, str]) -> dict[str, ast.ClassDef]:
    out: dict[str, ast.ClassDef] = {}
    for name in RUNNERS:
        for node in ast.parse(tree[name]).body:
            if isinstance(node, ast.ClassDef):
                out[node.name] = node
    return out


def _fields(cdef: ast.ClassDef) -> list[str]:
    return [
        s.target.id
        for s in cdef.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    ]


def _base_names(cdef: ast.ClassDef) -> list[str]:
    return [ast.unparse(b) for b in cdef.bases]


def test_near_identical_inputs_get_one_base_with_the_common_fields() -> None:
    tree = variants.after(VARIANT)
    classes = _classes(tree)
    bases = {name: _base_names(classes[name]) for name in INPUTS}
    shared = {b for names in bases.values() for b in names}
    assert len(shared) == 1, bases  # one base, both inputs subclass it
    (base,) = shared
    assert base in classes and base not in INPUTS
    assert _base_names(classes[base]) == ["ModelRunnerInputBase"]
    common = _fields(classes[base])
    assert set(common) == {
        "input_tokens",
        "input_positions",
        "attn_metadata",
        "lora_requests",
        "lora_mapping",
        "multi_modal_kwargs",
    }
    # each subclass adds its own field only
    assert _fields(classes["ModelRunnerInput"]) == ["sampling_metadata"]
    assert _fields(classes["EmbeddingModelRunnerInput"]) == ["pooling_metadata"]
    # the base is defined once, where the embedding runner already imports from
    assert sum(f"class {base}(" in tree[name] for name in RUNNERS) == 1
    assert f"class {base}(" in tree["model_runner.py"]
    # the backend guard is written once, in the base
    guards = sum(tree[name].count("if attn_backend is None:") for name in RUNNERS)
    assert guards == 1


def test_a_subclass_calls_its_base_for_the_common_keys() -> None:
    tree = variants.after(VARIANT)
    classes = _classes(tree)
    sampled = ast.unparse(classes["ModelRunnerInput"])
    assert "super().as_broadcastable_tensor_dict()" in sampled
    assert "super().from_broadcasted_tensor_dict(" in sampled
    # the pooling input broadcasts nothing of its own: the base's dict is its dict
    pooled = classes["EmbeddingModelRunnerInput"]
    methods = {f.name for f in pooled.body if isinstance(f, ast.FunctionDef)}
    assert methods == {"from_broadcasted_tensor_dict"}
    for name in INPUTS:
        assert '"input_tokens"' not in ast.unparse(classes[name]), name


def _import_after(tmp_path: Path) -> dict[str, ModuleType]:
    package = variants.write(variants.after(VARIANT), tmp_path / "twin_after")
    sys.path.insert(0, str(tmp_path))
    try:
        return {name: importlib.import_module(f"twin_after.{name[:-3]}") for name in RUNNERS}
    finally:
        sys.path.remove(str(tmp_path))
        for key in [k for k in sys.modules if k.split(".")[0] == "twin_after"]:
            del sys.modules[key]
        del package


def test_both_subclasses_make_the_round_trip(tmp_path: Path) -> None:
    from runnercheck.demo.engine.attention import get_attn_backend
    from runnercheck.demo.engine.pooling import PoolingMetadata
    from runnercheck.demo.engine.sampling import SamplingMetadata

    modules = _import_after(tmp_path)
    backend = get_attn_backend()
    attn = backend.make_metadata(
        num_prefills=1,
        num_prefill_tokens=3,
        num_decode_tokens=0,
        slot_mapping=torch.arange(3),
        max_seq_len=3,
        seq_lens=[3],
    )
    common = dict(
        input_tokens=torch.tensor([5, 6, 7]),
        input_positions=torch.arange(3),
        attn_metadata=attn,
        lora_requests=set(),
        lora_mapping=None,
        multi_modal_kwargs={},
    )
    sampled_cls = modules["model_runner.py"].ModelRunnerInput
    sampled = sampled_cls(
        **common,
        sampling_metadata=SamplingMetadata(
            seq_groups=None, selected_token_indices=torch.tensor([2]), num_prompts=1
        ),
    )
    data = sampled.as_broadcastable_tensor_dict()
    assert "selected_token_indices" in data and "input_tokens" in data
    again = sampled_cls.from_broadcasted_tensor_dict(dict(data), attn_backend=backend)
    assert type(again) is sampled_cls
    assert torch.equal(again.input_tokens, sampled.input_tokens)
    assert torch.equal(again.input_positions, sampled.input_positions)
    assert torch.equal(
        again.sampling_metadata.selected_token_indices,
        sampled.sampling_metadata.selected_token_indices,
    )
    assert again.attn_metadata.num_prefill_tokens == 3
    assert torch.equal(again.attn_metadata.slot_mapping, attn.slot_mapping)

    pooled_cls = modules["embedding_model_runner.py"].EmbeddingModelRunnerInput
    pooled = pooled_cls(
        **common,
        pooling_metadata=PoolingMetadata(seq_groups=None, seq_data=None, prompt_lens=[3]),
    )
    data = pooled.as_broadcastable_tensor_dict()
    assert "selected_token_indices" not in data
    again_pooled = pooled_cls.from_broadcasted_tensor_dict(dict(data), attn_backend=backend)
    assert type(again_pooled) is pooled_cls
    assert torch.equal(again_pooled.input_tokens, pooled.input_tokens)
    assert again_pooled.pooling_metadata.prompt_lens is None  # driver-only, as before
    with pytest.raises(ValueError, match="attn_backend"):
        pooled_cls.from_broadcasted_tensor_dict(dict(data))


@pytest.mark.slow
def test_the_embedding_runner_of_the_variant_gives_the_legacy_embeddings_at_tp_2(
    tmp_path: Path,
) -> None:
    """(The sampling runner's tokens: ``tests/migrate/test_shapes.py``.)"""
    before = variants.write(variants.before(VARIANT), tmp_path / "before")
    after = variants.write(variants.after(VARIANT), tmp_path / "after")
    legacy = run_engine(None, tp=2, steps=6, seed=3, engine_dir=str(before), embedding=True)
    merged = run_engine(None, tp=2, steps=6, seed=3, engine_dir=str(after), embedding=True)
    assert legacy["broadcasts_per_step"] >= 2
    assert merged["broadcasts_per_step"] == 1
    assert legacy["embeddings_sha256"] is not None
    assert merged["embeddings_sha256"] == legacy["embeddings_sha256"]


def test_the_rebuilding_method_is_written_once_in_the_runner_base_they_share() -> None:
    tree = variants.after(VARIANT)
    classes = _classes(tree)
    method = "make_model_input_from_broadcasted_tensor_dict"
    defined = [
        name
        for name, cdef in classes.items()
        if any(isinstance(f, ast.FunctionDef) and f.name == method for f in cdef.body)
    ]
    # the generic base both runners derive from (the GPU runner's split) holds it
    assert len(defined) == 1, defined
    (holder,) = defined
    for runner in ("ModelRunner", "EmbeddingModelRunner"):
        assert _base_names(classes[runner])[0].startswith(f"{holder}["), runner
    # each runner names the input class it rebuilds
    assert "_model_input_cls = ModelRunnerInput" in tree["model_runner.py"]
    assert "_model_input_cls = EmbeddingModelRunnerInput" in tree["embedding_model_runner.py"]


#: a method of the embedding runner that runs its parent's step: the runner stays a
#: subclass of the GPU runner (no generic base is split off for the two to share)
PARENT_STEP = '''    def sampled_execute(
        self,
        seq_group_metadata_list: Optional[List[SequenceGroupMetadata]],
        kv_caches: Optional[List[torch.Tensor]],
    ) -> Any:
        """The GPU runner's step on the same requests (sampling instead of pooling)."""
        return super().execute_model(seq_group_metadata_list, kv_caches)

'''


def test_runners_that_share_no_base_keep_their_method_and_a_note_says_why(
    tmp_path: Path, migrate_cli
) -> None:
    work = variants.write(variants.before(VARIANT), tmp_path / "engine")
    runner = work / "embedding_model_runner.py"
    text = runner.read_text()
    marker = "    # Pools instead of sampling"
    assert text.count(marker) == 1
    runner.write_text(text.replace(marker, PARENT_STEP + marker))
    result = migrate_cli(str(work))
    assert result.code == 0, result.out + result.err
    method = "def make_model_input_from_broadcasted_tensor_dict("
    assert runner.read_text().count(method) == 1
    assert (work / "model_runner.py").read_text().count(method) == 1
    assert "_model_input_cls" not in runner.read_text()
    (note,) = [line for line in result.out.splitlines() if "share no runner base" in line]
    new_lines = runner.read_text().splitlines()
    path, line = note.split(":")[:2]
    assert path.endswith("embedding_model_runner.py")
    assert new_lines[int(line) - 1].startswith("class EmbeddingModelRunner(")
    assert "EmbeddingModelRunner, ModelRunner each keep their own" in note
