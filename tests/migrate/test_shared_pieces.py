"""Input classes of one directory share, as helpers of the generated base module, the
dict entries that read one field's attributes and the from-dict statements that pop
keys into one field, when they hold them equal (temporaries aside); pieces that
differ stay in each class."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from codemods.merge_broadcasts.shared_pieces import bound_runs, field_entries
from runnercheck.check import check_paths
from tests.migrate.conftest import FIXTURES, copy_tree

#: what the fixture's GPU runner receives, and builds the sampling metadata from
RECEIVED = (
    '            selected_token_indices = metadata_dict.pop("selected_token_indices")\n'
    "            # What is left builds the attention metadata.\n"
    "            attn_metadata = self.attn_backend.make_metadata(**metadata_dict)\n"
    "            sampling_metadata = SamplingMetadata(\n"
    "                seq_groups=None,\n"
    "                selected_token_indices=selected_token_indices,\n"
    "            )\n"
)


def _engine_with_a_copied_runner(root: Path, received: str) -> Path:
    """The toy engine plus a copy of its GPU runner (``AccelModelRunner``, receiving
    with ``received``) and of its worker driving that copy."""
    work = copy_tree(FIXTURES / "engine" / "before", root / "engine")
    runner = (work / "model_runner.py").read_text()
    assert RECEIVED in runner
    (work / "accel_model_runner.py").write_text(
        runner.replace("class ModelRunner:", "class AccelModelRunner:").replace(RECEIVED, received)
    )
    worker = (work / "worker.py").read_text()
    picks = (
        "        RunnerClass = PoolingModelRunner if config.pooling else ModelRunner\n"
        "        self.model_runner = RunnerClass(config, is_driver_worker=is_driver_worker)\n"
    )
    imports = "from .model_runner import ModelRunner\nfrom .pooling_model_runner import PoolingModelRunner\n"
    assert picks in worker and imports in worker
    (work / "accel_worker.py").write_text(
        worker.replace(
            picks, "        self.model_runner = AccelModelRunner(config, is_driver_worker)\n"
        )
        .replace(imports, "from .accel_model_runner import AccelModelRunner\n")
        .replace("class Worker:", "class AccelWorker:")
    )
    return work


def test_the_copied_runner_calls_the_helpers_instead_of_repeating_the_pieces(
    tmp_path: Path, migrate_cli
) -> None:
    # the copy names its temporary differently and receives its own way: the pieces
    # are still the same once the temporaries are aligned
    received = (
        '            indices = metadata_dict.pop("selected_token_indices")\n'
        "            attn_metadata = self.attn_backend.make_metadata(**metadata_dict)\n"
        "            sampling_metadata = SamplingMetadata(\n"
        "                seq_groups=None, selected_token_indices=indices\n"
        "            )\n"
    )
    work = _engine_with_a_copied_runner(tmp_path, received)
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    base = (work / "model_runner_base.py").read_text()
    assert base.endswith(
        "\n\ndef _add_sampling_metadata_broadcastable_dict(\n"
        "    tensor_dict: Dict[str, Any],\n"
        '    sampling_metadata: "SamplingMetadata",\n'
        ") -> None:\n"
        '    tensor_dict["selected_token_indices"] = (\n'
        "        sampling_metadata.selected_token_indices\n"
        "    )\n"
        "\n\n"
        "def _init_sampling_metadata_from_tensor_dict(\n"
        "    tensor_dict: Dict[str, Any],\n"
        ') -> "SamplingMetadata":\n'
        "    from toy.sampling import SamplingMetadata\n"
        "\n"
        '    indices = tensor_dict.pop("selected_token_indices")\n'
        "    return SamplingMetadata(\n"
        "        seq_groups=None, selected_token_indices=indices\n"
        "    )\n"
    ), base  # as the first input (by path) holds it
    assert "    from toy.sampling import SamplingMetadata\n" in base.split("\ndef ")[0]
    for name, cls in (
        ("model_runner.py", "ModelRunnerInput"),
        ("accel_model_runner.py", "AccelModelRunnerInput"),
    ):
        body = (work / name).read_text().split(f"\nclass {cls}(")[1].split("\n\n\n")[0]
        as_dict = body.split("    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:\n")[1]
        assert as_dict.startswith(
            "        tensor_dict: Dict[str, Any] = {\n"
            '            "input_tokens": self.input_tokens,\n'
            "        }\n"
            "        _add_sampling_metadata_broadcastable_dict(\n"
            "            tensor_dict, self.sampling_metadata\n"
            "        )\n"
            "        _add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)\n"
            "        return tensor_dict\n"
        ), (name, as_dict)
        from_dict = body.split(f"    ) -> T{cls}:\n")[1]
        # the call stands where the first pop stood: before the attention metadata
        # takes what is left of the dict
        assert (
            '        input_tokens = tensor_dict.pop("input_tokens")\n'
            "        sampling_metadata = _init_sampling_metadata_from_tensor_dict(\n"
            "            tensor_dict\n"
            "        )\n"
        ) in from_dict, (name, from_dict)
        assert "SamplingMetadata(" not in from_dict and 'pop("selected' not in from_dict
    assert check_paths([work]).findings == []
    # a second run changes nothing
    again = migrate_cli("--check", str(work))
    assert again.code == 0, again.out


def test_pieces_that_differ_stay_in_each_class(tmp_path: Path, migrate_cli) -> None:
    # the copy builds the sampling metadata with one more argument: its run differs,
    # so both inputs keep their own statements; the dict entries still match
    received = RECEIVED.replace(
        "                seq_groups=None,\n",
        "                seq_groups=None,\n                num_prompts=0,\n",
    )
    work = _engine_with_a_copied_runner(tmp_path, received)
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    base = (work / "model_runner_base.py").read_text()
    assert "_init_sampling_metadata_from_tensor_dict" not in base
    assert "\ndef _add_sampling_metadata_broadcastable_dict(" in base
    accel = (work / "accel_model_runner.py").read_text()
    assert "num_prompts=0," in accel and 'tensor_dict.pop("selected_token_indices")' in accel
    gpu = (work / "model_runner.py").read_text()
    assert "num_prompts" not in gpu and 'tensor_dict.pop("selected_token_indices")' in gpu


def _method(code: str) -> list[cst.BaseStatement]:
    func = cst.parse_statement(textwrap.dedent(code))
    assert isinstance(func, cst.FunctionDef)
    return list(cst.ensure_type(func.body, cst.IndentedBlock).body)


FROM_DICT = """\
    def from_dict(cls, tensor_dict, attn_backend=None):
        tokens = tensor_dict.pop("tokens")
        {name} = tensor_dict.pop("indices")
        {between}
        sampling = Sampling(indices={name}, flag=False)
        return cls(tokens=tokens, attn=attn, sampling=sampling)
"""


def test_a_run_is_the_same_whatever_its_temporaries_are_named() -> None:
    fields = {"tokens", "attn", "sampling"}
    between = "attn = attn_backend.make_metadata(**tensor_dict)"
    first = bound_runs(_method(FROM_DICT.format(name="indices", between=between)), fields)
    second = bound_runs(_method(FROM_DICT.format(name="sti", between=between)), fields)
    assert [(r.name, r.indices, r.inputs, r.globals) for r in first] == [
        ("sampling", (1, 3), ("tensor_dict",), frozenset({"Sampling"}))
    ]
    assert [r.signature for r in first] == [r.signature for r in second]
    other = FROM_DICT.format(name="indices", between=between).replace("False", "True")
    assert [r.signature for r in bound_runs(_method(other), fields)] != [r.signature for r in first]


def test_a_run_that_cannot_stand_at_its_first_statement_is_not_one() -> None:
    fields = {"tokens", "attn", "sampling"}
    # a later pop moved above what spreads the dict would take a key from it
    spread = FROM_DICT.format(
        name="indices", between="attn = attn_backend.make_metadata(**tensor_dict)"
    ).replace("flag=False", 'flag=tensor_dict.pop("flag")')
    assert bound_runs(_method(spread), fields) == []
    # past a pop of another key it may move
    other_key = FROM_DICT.format(name="indices", between='attn = tensor_dict.pop("attn")').replace(
        "flag=False", 'flag=tensor_dict.pop("flag")'
    )
    assert [r.indices for r in bound_runs(_method(other_key), fields)] == [(1, 3)]
    # a temporary another statement reads is not the run's own
    shared = FROM_DICT.format(name="indices", between="attn = make(indices)")
    assert bound_runs(_method(shared), fields) == []


def test_entries_of_one_field_are_grouped_in_their_order() -> None:
    literal = cst.parse_expression(
        "{\n"
        '    "tokens": self.tokens,\n'
        '    "indices": self.sampling.indices,\n'
        '    "both": self.sampling.a + self.attn.b,\n'
        "    # a comment keeps this one in place\n"
        '    "kept": self.sampling.kept,\n'
        '    "count": len(self.sampling.groups),\n'
        '    "sum": self.attn.a +\n'
        "        self.attn.b,\n"
        "}"
    )
    assert isinstance(literal, cst.Dict)
    found = [(e.field, e.indices, e.items) for e in field_entries(literal)]
    assert found == [
        (
            "sampling",
            (1, 4),
            (("indices", "sampling.indices"), ("count", "len(sampling.groups)")),
        ),
        ("attn", (5,), (("sum", "attn.a +\n        attn.b"),)),
    ]
    # a value over lines has a signature too (the helper then keeps it out)
    assert [e.signature[:5] for e in field_entries(literal)] == ["sampl", "attn:"]
