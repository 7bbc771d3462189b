"""The legacy driver/non-driver split of a method (:mod:`runnercheck.analysis.shapes`):
what ``migrate`` plans the merged input from."""

from __future__ import annotations

import ast

from runnercheck.analysis.shapes import AFTER_SPLIT, legacy_split
from runnercheck.contract import VLLM

PREPARE = """\
from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def prepare_input_tensors(self, seq_group_metadata_list):
        if self.is_driver_worker:
            input_tokens, input_positions = self._prepare(seq_group_metadata_list)
            lora_mapping = None
            metadata_dict = {
                "input_tokens": input_tokens,
                "input_positions": input_positions,
                "lora_mapping": lora_mapping,
            }
            broadcast_tensor_dict(metadata_dict, src=0)
        else:
            metadata_dict = broadcast_tensor_dict(src=0)
            input_tokens = metadata_dict.pop("input_tokens")
            input_positions = metadata_dict.pop("input_positions")
            lora_mapping = metadata_dict.pop("lora_mapping")
        sampling = make_sampling(input_tokens)
        return (input_tokens, input_positions, sampling)

    def execute_model(self, seq_group_metadata_list, kv_caches):
        input_tokens, input_positions, sampling = self.prepare_input_tensors(
            seq_group_metadata_list
        )
        hidden = self.model(input_tokens, input_positions, kv_caches)
        if not self.is_driver_worker:
            return None
        prompts = len(seq_group_metadata_list)
        return self.sample(hidden, sampling, prompts)
"""


def method(source: str, name: str) -> tuple[ast.FunctionDef, ast.Module]:
    tree = ast.parse(source)
    cls = tree.body[1]
    assert isinstance(cls, ast.ClassDef)
    found = next(f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == name)
    return found, tree


def test_the_split_its_tail_and_the_values_that_travel() -> None:
    func, tree = method(PREPARE, "prepare_input_tensors")
    shape = legacy_split(func, VLLM, tree)
    assert shape is not None and shape.problem is None
    assert shape.split_line == 6
    assert shape.returned == ("input_tokens", "input_positions", "sampling")
    assert (shape.tail_lines, shape.tail_bound, shape.tail_reads) == (
        (20,),
        ("sampling",),
        ("input_tokens",),
    )
    # sent under a key the other ranks bind to the same name: both sides hold it
    assert shape.travelling == ("lora_mapping",)
    assert shape.fields == ("input_tokens", "input_positions", "lora_mapping")
    assert shape.nullable == ("lora_mapping",)
    assert shape.unpacked == (
        ("input_tokens", "_prepare", 0, 2),
        ("input_positions", "_prepare", 1, 2),
    )


def test_a_value_the_other_ranks_bind_to_another_name_does_not_travel() -> None:
    source = PREPARE.replace(
        'lora_mapping = metadata_dict.pop("lora_mapping")',
        'mapping = metadata_dict.pop("lora_mapping")',
    )
    func, tree = method(source, "prepare_input_tensors")
    shape = legacy_split(func, VLLM, tree)
    assert shape is not None and shape.travelling == ()


def test_a_method_without_a_driver_split_has_no_shape() -> None:
    source = PREPARE.replace("        if not self.is_driver_worker:\n            return None\n", "")
    func, tree = method(source, "execute_model")
    assert legacy_split(func, VLLM, tree) is None


def test_a_collective_after_the_split_is_a_problem() -> None:
    source = PREPARE.replace(
        "        sampling = make_sampling(input_tokens)\n",
        "        sampling = make_sampling(input_tokens)\n"
        "        broadcast_tensor_dict({}, src=0)\n",
    )
    func, tree = method(source, "prepare_input_tensors")
    shape = legacy_split(func, VLLM, tree)
    assert shape is not None and shape.problem is not None
    assert (shape.problem.line, shape.problem.shape) == (21, AFTER_SPLIT)
