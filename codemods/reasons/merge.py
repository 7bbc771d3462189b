"""The reasons ``merge-broadcasts`` refuses a worker/runner group (MIG1xx), raised by
its planners (:mod:`codemods.merge_broadcasts`), each with a bad example (the legacy pair
broken in one way) and a good one that run as tests."""

from __future__ import annotations

from runnercheck.catalog import Rule, _variant

# ------------------------------------------------------ examples: migrate's reasons
# A legacy (vLLM 0.5.0) worker and runner that each broadcast once per step; migrate
# merges them into one broadcast. Each reason's bad example breaks this pair in one way.

_LEGACY_RUNNER = """\
# file: model_runner.py
from typing import Any, List, Optional, Tuple

import torch

from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def __init__(self, model: Any, is_driver_worker: bool = False) -> None:
        self.model = model
        self.is_driver_worker = is_driver_worker

    def prepare_input_tensors(
        self, seq_group_metadata_list: Optional[List[Any]]
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.is_driver_worker:
            assert seq_group_metadata_list is not None
            input_tokens = torch.tensor([s.token for s in seq_group_metadata_list])
            input_positions = torch.tensor([s.position for s in seq_group_metadata_list])
            metadata_dict = {"input_tokens": input_tokens, "input_positions": input_positions}
            broadcast_tensor_dict(metadata_dict, src=0)
        else:
            metadata_dict = broadcast_tensor_dict(src=0)
            input_tokens = metadata_dict.pop("input_tokens")
            input_positions = metadata_dict.pop("input_positions")
        return (input_tokens, input_positions)

    def execute_model(
        self, seq_group_metadata_list: Optional[List[Any]], kv_caches: List[torch.Tensor]
    ) -> Optional[torch.Tensor]:
        input_tokens, input_positions = self.prepare_input_tensors(seq_group_metadata_list)
        return self.model(input_tokens, input_positions, kv_caches)
"""
_LEGACY_WORKER = """\
# file: worker.py
from typing import Any, Dict, List, Optional

import torch

from vllm.distributed import broadcast_tensor_dict

from model_runner import ModelRunner


class Worker:
    def __init__(self, model: Any, is_driver_worker: bool = False) -> None:
        self.is_driver_worker = is_driver_worker
        self.model_runner = ModelRunner(model, is_driver_worker)
        self.gpu_cache: List[torch.Tensor] = []

    def execute_model(self, seq_group_metadata_list: Optional[List[Any]] = None) -> List[Any]:
        if self.is_driver_worker:
            assert seq_group_metadata_list is not None
            num_seq_groups = len(seq_group_metadata_list)
            data: Dict[str, Any] = {"num_seq_groups": num_seq_groups}
            broadcast_tensor_dict(data, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            num_seq_groups = data["num_seq_groups"]
        if num_seq_groups == 0:
            return []
        output = self.model_runner.execute_model(seq_group_metadata_list, self.gpu_cache)
        return [output]
"""
#: The pair as migrate accepts it (the fixed version of most bad examples below).
_LEGACY_PAIR = _LEGACY_RUNNER + _LEGACY_WORKER
_RUNNER_DICT = '            metadata_dict = {"input_tokens": input_tokens, "input_positions": input_positions}\n'
_RUNNER_RETURN = "        return (input_tokens, input_positions)\n"
_RECEIVE_POSITIONS = '            input_positions = metadata_dict.pop("input_positions")\n'

_MIG101_BAD = _variant(
    _LEGACY_PAIR,
    (
        _RUNNER_DICT + "            broadcast_tensor_dict(metadata_dict, src=0)\n",
        '            metadata_dict = {"input_tokens": input_tokens}\n'
        "            broadcast_tensor_dict(metadata_dict, src=0)\n"
        '            broadcast_tensor_dict({"input_positions": input_positions}, src=0)\n',
    ),
    (
        _RECEIVE_POSITIONS,
        '            input_positions = broadcast_tensor_dict(src=0)["input_positions"]\n',
    ),
)
_MIG102_BAD = _variant(
    _LEGACY_PAIR,
    (
        _RUNNER_DICT,
        "            metadata_dict = {\n"
        '                "input_tokens": input_tokens,\n'
        '                "input_positions": input_positions,\n'
        '                "num_seqs": len(seq_group_metadata_list),\n'
        "            }\n",
    ),
)
_MIG103_BAD = _variant(
    _LEGACY_WORKER,
    ("from model_runner import", "from vllm.worker.model_runner import"),
)
_MIG105_BAD = _variant(
    _LEGACY_PAIR, (_RUNNER_RETURN, "        return (input_tokens, input_positions.long())\n")
)
_MIG105_GOOD = _variant(
    _LEGACY_PAIR,
    (_RUNNER_RETURN, "        input_positions = input_positions.long()\n" + _RUNNER_RETURN),
)
_MIG106_BAD = _variant(
    _LEGACY_PAIR,
    (
        _RECEIVE_POSITIONS,
        '            input_positions = metadata_dict.pop("input_positions").to(self.device)\n',
    ),
)
_MIG107_BAD = _variant(
    _LEGACY_PAIR,
    ("-> Tuple[torch.Tensor, torch.Tensor]:", "-> Tuple[torch.Tensor, int]:"),
    (
        "            input_positions = torch.tensor([s.position for s in seq_group_metadata_list])\n",
        "            num_seq_groups = len(seq_group_metadata_list)\n",
    ),
    (
        _RUNNER_DICT,
        '            metadata_dict = {"input_tokens": input_tokens, "num_seq_groups": num_seq_groups}\n',
    ),
    (_RECEIVE_POSITIONS, '            num_seq_groups = metadata_dict.pop("num_seq_groups")\n'),
    (_RUNNER_RETURN, "        return (input_tokens, num_seq_groups)\n"),
    (
        "        input_tokens, input_positions = self.prepare_input_tensors(seq_group_metadata_list)\n"
        "        return self.model(input_tokens, input_positions, kv_caches)\n",
        "        input_tokens, num_seq_groups = self.prepare_input_tensors(seq_group_metadata_list)\n"
        "        return self.model(input_tokens, kv_caches)[:num_seq_groups]\n",
    ),
)
_MIG107_GOOD = _variant(
    _MIG107_BAD,
    (
        'input_tokens, "num_seq_groups": num_seq_groups}',
        'input_tokens, "num_seqs": num_seq_groups}',
    ),
    ('metadata_dict.pop("num_seq_groups")', 'metadata_dict.pop("num_seqs")'),
)
_MIG108_BAD = _variant(
    _LEGACY_PAIR,
    (
        "\n\nclass ModelRunner:",
        "\n#: What prepare_input_tensors returns.\n"
        "ModelRunnerInput = Tuple[torch.Tensor, torch.Tensor]\n\n\nclass ModelRunner:",
    ),
    ("    ) -> Tuple[torch.Tensor, torch.Tensor]:\n", "    ) -> ModelRunnerInput:\n"),
)
_MIG109_BAD = _variant(
    _LEGACY_PAIR,
    (
        "        return self.model(input_tokens, input_positions, kv_caches)\n",
        "        return self.model(input_tokens, input_positions, kv_caches)\n\n"
        "    def profile_run(self, seq_group_metadata_list: List[Any]) -> None:\n"
        "        self.prepare_input_tensors(seq_group_metadata_list)\n",
    ),
)
_CALLER_TEST = """\
# file: test_runner.py
from model_runner import ModelRunner


def test_prepare(runner: ModelRunner, seqs: list) -> None:
    input_tokens, input_positions = runner.prepare_input_tensors(seqs)
    assert input_tokens.shape == input_positions.shape
"""
_MIG112_BAD = _LEGACY_PAIR + _variant(
    _CALLER_TEST,
    (
        "    input_tokens, input_positions = runner.prepare_input_tensors(seqs)\n"
        "    assert input_tokens.shape == input_positions.shape\n",
        "    assert runner.prepare_input_tensors(seqs)[0] is not None\n",
    ),
)
#: (the caller is rewritten with the group: ``model_input = runner.prepare_model_input(seqs)``)
_MIG112_GOOD = _LEGACY_PAIR + _CALLER_TEST


RULES: tuple[Rule, ...] = (
    Rule(
        code="MIG101",
        name="extra-broadcast",
        tool="migrate",
        summary="A broadcast the planner does not recognise.",
        why="The merged shape has exactly one broadcast per step; a broadcast the planner cannot place (a second one in the runner, one outside the driver/non-driver split) would be lost or duplicated.",
        bad=_MIG101_BAD,
        good=_LEGACY_PAIR,
        fix="One broadcast in the driver branch of the `if self.is_driver_worker:` split and one receive at the top of the other branch; a further one only as `if <cond>: ...; broadcast(<value>)` on the driver and `if <cond>: <d> = broadcast(); ...` on the other ranks, with <cond> read from values the first broadcast carries.",
    ),
    Rule(
        code="MIG102",
        name="untraceable-key",
        tool="migrate",
        summary="A broadcast key whose value or use cannot be traced.",
        why="Every broadcast key must become a field of the new input class with a traceable value; a key whose value or use cannot be traced could change what non-driver ranks compute.",
        bad=_MIG102_BAD,
        good=_LEGACY_PAIR,
        fix="Build the broadcast dict as a literal whose values are the values the method returns (or values the tail after the split reads), and read the received dict only by literal key or through one `**dict` call.",
    ),
    Rule(
        code="MIG103",
        name="missing-runner",
        tool="migrate",
        summary="A runner the worker drives cannot be found.",
        why="The worker and every runner it drives are rewritten together; a runner outside the given paths would keep the old calling convention.",
        bad=_MIG103_BAD,
        good=_LEGACY_PAIR,
        fix="Give migrate the directory that holds every runner the worker drives.",
    ),
    Rule(
        code="MIG104",
        name="missing-worker",
        tool="migrate",
        summary="A runner broadcasts but no worker that drives it was found.",
        why="A runner that broadcasts but that no worker drives cannot be merged into a worker's broadcast.",
        bad=_LEGACY_RUNNER,
        good=_LEGACY_PAIR,
        fix="Give migrate the worker that drives the runner too.",
    ),
    Rule(
        code="MIG105",
        name="unrecognised-shape",
        tool="migrate",
        summary="A method does not have the driver/non-driver shape.",
        why="The rewrite moves the driver's and the non-driver's code into new methods; a method without the recognised driver/non-driver shape cannot be split safely.",
        bad=_MIG105_BAD,
        good=_MIG105_GOOD,
        fix="Write the method as `if self.is_driver_worker: <prepare; dict literal; broadcast> else: <receive; rebuild>`, then any statements every rank runs, then `return (a, b, ...)`.",
    ),
    Rule(
        code="MIG106",
        name="non-driver-state",
        tool="migrate",
        summary="The non-driver path reads runner state other than the attention backend.",
        why="Non-driver ranks rebuild the input from the broadcast dict alone; state the non-driver path reads from the runner would be missing there.",
        bad=_MIG106_BAD,
        good=_LEGACY_PAIR,
        fix="Send the value in the broadcast dict instead of reading it from `self` on the other ranks.",
    ),
    Rule(
        code="MIG107",
        name="key-collision",
        tool="migrate",
        summary="The worker and a runner broadcast the same key.",
        why="The worker's and the runner's keys travel in one dict after the merge; the same key from both would overwrite one value.",
        bad=_MIG107_BAD,
        good=_MIG107_GOOD,
        fix="Rename one of the two keys.",
    ),
    Rule(
        code="MIG108",
        name="name-taken",
        tool="migrate",
        summary="A name the merged shape needs is already used.",
        why="The merged shape adds classes, methods and a base module; a name already in use would be shadowed.",
        bad=_MIG108_BAD,
        good=_LEGACY_PAIR,
        fix="Rename the existing name (or delete the half-written merged API).",
    ),
    Rule(
        code="MIG109",
        name="unmigrated-caller",
        tool="migrate",
        summary="The runner calls its legacy input method outside `execute_model`.",
        why="The legacy input method becomes `prepare_model_input` (driver) and `make_model_input_from_broadcasted_tensor_dict` (other ranks), and only `execute_model` is rewritten to call them; any other caller (a profiling or warm-up run) would be left calling a method that no longer exists.",
        bad=_MIG109_BAD,
        good=_LEGACY_PAIR,
        fix="Call the legacy method only from `execute_model`.",
    ),
    Rule(
        code="MIG110",
        name="verify-failed",
        tool="migrate",
        summary="The rewritten sources did not re-parse, compile or re-analyse as migrated.",
        why="Nothing is written unless the rewritten sources compile and re-analyse as migrated, with no finding the old sources lacked.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG111",
        name="non-driver-value-changed",
        tool="migrate",
        summary="The rewrite would change what a non-driver rank holds at an entry point of the step.",
        why="At every entry point of the step (the worker's step, `profile_run`, a dummy run) and on each role, the values that reach the model call, the sampler and the cache operations must keep their source: a literal flag the old non-driver path gave an object (`SamplingMetadata(..., perform_sampling=False)`) stays that literal, and a value a rank received (`blocks_to_copy`) must not become a constant or a default. A non-driver that now prepares locally gets the driver's value instead, and may run the sampler on logits only rank 0 holds.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
        fix="`migrate` keeps a flag itself where the driver branch, or a helper of the runner it calls (vLLM 0.4's `_prepare_sample`), builds the object with the opposite literal or leaves it to a class default it can read (an `__init__` or dataclass field literal); otherwise (a default it cannot read, a factory, a helper of another class) give the flag in the driver branch (`SamplingMetadata(..., perform_sampling=True)`) and run `migrate` again, or keep that entry point on the old path.",
    ),
    Rule(
        code="MIG112",
        name="caller-not-rewritten",
        tool="migrate",
        summary="Code elsewhere in the project calls a runner method the migration removes, in a way it cannot rewrite.",
        why="The migration removes the legacy input method (`prepare_input_tensors`) and rewrites every call of it in the project as a rename refactor would (`model_input = runner.prepare_model_input(x)`, then each unpacked name from its field); a call whose result is not unpacked into names, unpacks another number of values, or keeps a value that is no field any more would fail at run time after the migration (a test that no longer runs).",
        bad=_MIG112_BAD,
        good=_MIG112_GOOD,
        fix="Unpack the call's result into names (`a, b, _ = runner.prepare_input_tensors(x)`) and run `migrate` again, or call `prepare_model_input` and read the input's fields by hand.",
    ),
    Rule(
        code="MIG199",
        name="internal-error",
        tool="migrate",
        summary="The planner failed on this group (a bug; please report it); the group was left alone.",
        why="A planner failure must not take other groups down: the group is left alone and the error is reported.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
)
