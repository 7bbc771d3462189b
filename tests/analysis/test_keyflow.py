"""Key flow (:mod:`runnercheck.analysis.keyflow`): the keys a class's broadcast dict
holds (following ``super()``, ``**`` merges, ``self`` methods and module-level
helpers), the ``cls(**tensor_dict)`` receivers with the keys popped before them, and
the keys the receiving side reads with no default."""

from __future__ import annotations

from runnercheck.analysis.project import Project
from tests.analysis.sources import class_named, project_of

INPUTS = """\
from dataclasses import dataclass
from typing import Any, Dict, Optional


def _add_attn(tensor_dict, attn_metadata):
    tensor_dict["attn"] = attn_metadata.x


def _pop_lora(tensor_dict):
    tensor_dict.pop("lora_mapping")
    return tensor_dict


@dataclass(frozen=True)
class ModelInput:
    input_tokens: Optional[list] = None
    input_positions: Optional[list] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = {
            "input_tokens": self.input_tokens,
            "input_positions": self.input_positions,
        }
        return tensor_dict

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(**tensor_dict)


@dataclass(frozen=True)
class GPUInput(ModelInput):
    lora_mapping: Optional[list] = None
    attn_metadata: Any = None

    def as_broadcastable_tensor_dict(self):
        tensor_dict = super().as_broadcastable_tensor_dict()
        tensor_dict["lora_mapping"] = self.lora_mapping
        _add_attn(tensor_dict, self.attn_metadata)
        return tensor_dict

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        attn = tensor_dict.pop("attn")
        _pop_lora(tensor_dict)
        tokens = tensor_dict["input_tokens"]
        tensor_dict.get("maybe")
        tensor_dict.pop("other", None)
        return cls(**tensor_dict, attn_metadata=attn)


@dataclass(frozen=True)
class Merged(ModelInput):
    extra: int = 0

    def as_broadcastable_tensor_dict(self):
        return {**super().as_broadcastable_tensor_dict(), "extra": self.extra}
"""


def project() -> Project:
    return project_of({"acme/inputs.py": INPUTS})


def test_a_literal_dict_s_keys_and_the_fields_they_carry() -> None:
    p = project()
    produced = p.keys.produced(class_named(p, "ModelInput"))
    assert produced is not None
    assert list(produced.keys) == ["input_tokens", "input_positions"]
    assert produced.fields == {"input_tokens", "input_positions"}
    assert (produced.dynamic, produced.open, produced.calls_super) == (False, False, False)
    assert produced.keys["input_tokens"].line == 21


def test_super_and_a_module_level_helper_add_their_keys() -> None:
    p = project()
    produced = p.keys.produced(class_named(p, "GPUInput"))
    assert produced is not None and produced.calls_super
    assert set(produced.keys) == {"input_tokens", "input_positions", "lora_mapping", "attn"}
    # the helper's key carries the field handed to it
    assert "attn_metadata" in produced.fields
    assert not produced.open
    assert produced.method.owner.name == "GPUInput"


def test_a_double_star_merge_of_super_s_dict_adds_its_keys() -> None:
    p = project()
    produced = p.keys.produced(class_named(p, "Merged"))
    assert produced is not None and produced.calls_super
    assert set(produced.keys) == {"input_tokens", "input_positions", "extra"}
    assert not produced.open


def test_a_receiver_and_the_keys_popped_before_it_directly_or_by_a_helper() -> None:
    p = project()
    gpu = class_named(p, "GPUInput")
    (receiver,) = p.keys.receivers(gpu)
    assert receiver.target is gpu and receiver.target_name == "cls"
    assert receiver.line == 49
    # popped with or without a default: either way not handed to the constructor
    assert receiver.popped == {"attn", "lora_mapping", "other"}
    assert not receiver.dynamic_pop
    # the base receives on its own (``cls`` is whichever class it is called on)
    base = class_named(p, "ModelInput")
    (plain,) = p.keys.receivers(base)
    assert plain.target is base and plain.popped == set()


def test_the_keys_read_with_no_default_are_required_where_they_are_read() -> None:
    p = project()
    required = p.keys.required(class_named(p, "GPUInput"))
    assert required is not None
    # ``pop("attn")``, ``["input_tokens"]`` and the helper's ``pop("lora_mapping")``;
    # not ``get("maybe")`` nor ``pop("other", None)``
    assert set(required.reads) == {"attn", "input_tokens", "lora_mapping"}
    assert required.reads["lora_mapping"].function == "_pop_lora"
    assert (required.reads["attn"].function, required.reads["attn"].line) == (
        "GPUInput.from_broadcasted_tensor_dict",
        44,
    )
    assert not required.open
    assert p.keys.required(class_named(p, "Merged")) is not None  # inherited from the base


def test_required_follows_super_into_the_parent_s_reads() -> None:
    source = INPUTS.replace(
        "        return cls(**tensor_dict)\n",
        '        n = tensor_dict["input_tokens"]\n        return cls(**tensor_dict)\n',
        1,
    ).replace(
        '        return {**super().as_broadcastable_tensor_dict(), "extra": self.extra}\n',
        '        return {**super().as_broadcastable_tensor_dict(), "extra": self.extra}\n\n'
        "    @classmethod\n"
        "    def from_broadcasted_tensor_dict(cls, tensor_dict):\n"
        '        extra = tensor_dict.pop("extra")\n'
        "        return super().from_broadcasted_tensor_dict(tensor_dict)\n",
    )
    p = project_of({"acme/inputs.py": source})
    required = p.keys.required(class_named(p, "Merged"))
    assert required is not None
    assert {k: r.function for k, r in required.reads.items()} == {
        "extra": "Merged.from_broadcasted_tensor_dict",
        "input_tokens": "ModelInput.from_broadcasted_tensor_dict",
    }


def test_keys_that_cannot_be_told_leave_the_dict_open() -> None:
    p = project_of(
        {
            "acme/open.py": """\
            import dataclasses
            from dataclasses import dataclass
            from vllm.worker.model_runner_base import Unread

            @dataclass
            class Dumped:
                a: int = 0

                def as_broadcastable_tensor_dict(self):
                    return dataclasses.asdict(self)

            @dataclass
            class Child(Unread):
                b: int = 0

                def as_broadcastable_tensor_dict(self):
                    tensor_dict = super().as_broadcastable_tensor_dict()
                    tensor_dict["b"] = self.b
                    return tensor_dict
            """
        }
    )
    dumped = p.keys.produced(class_named(p, "Dumped"))
    # every field of the class, as ``asdict`` gives them: which keys is not written
    assert dumped is not None and dumped.all_fields and dumped.open
    child = class_named(p, "Child")
    produced = p.keys.produced(child)
    assert produced is not None
    assert produced.unknown_parent and produced.open and set(produced.keys) == {"b"}
    assert p.keys.reads_unknown_parent(child)


def test_a_class_without_the_method_produces_nothing() -> None:
    p = project_of({"acme/none.py": "class Plain:\n    x = 1\n"})
    plain = class_named(p, "Plain")
    assert p.keys.produced(plain) is None
    assert p.keys.receivers(plain) == []
    assert p.keys.required(plain) is None


def test_a_child_that_copies_its_parent_s_literal_dict() -> None:
    source = INPUTS.replace(
        "        tensor_dict = super().as_broadcastable_tensor_dict()\n"
        '        tensor_dict["lora_mapping"] = self.lora_mapping\n',
        "        tensor_dict = {\n"
        '            "input_tokens": self.input_tokens,\n'
        '            "lora_mapping": self.lora_mapping,\n'
        "        }\n",
    ).replace("        _add_attn(tensor_dict, self.attn_metadata)\n", "")
    p = project_of({"acme/inputs.py": source})
    copy = p.keys.dict_copy(class_named(p, "GPUInput"))
    assert copy is not None
    assert copy.parent == "ModelInput"
    assert copy.missing == ("input_positions",)  # a drifted copy
    assert copy.own_keys == ("lora_mapping",)
    # a child that calls super() copies nothing
    assert project().keys.dict_copy(class_named(project(), "GPUInput")) is None


def test_a_dict_built_by_a_helper_or_a_method_of_self_holds_the_helper_s_keys() -> None:
    p = project_of(
        {
            "acme/built.py": """\
            from dataclasses import dataclass

            def _base_dict(model_input):
                return {"input_tokens": model_input.input_tokens}

            @dataclass
            class Helped:
                input_tokens: list
                seq_lens: list

                def as_broadcastable_tensor_dict(self):
                    tensor_dict = _base_dict(self)
                    tensor_dict["lens"] = self.seq_lens
                    return tensor_dict

            @dataclass
            class ViaSelf(Helped):
                def _own_dict(self):
                    return {"own": 1}

                def as_broadcastable_tensor_dict(self):
                    tensor_dict = self._own_dict()
                    return tensor_dict

            @dataclass
            class Unfollowed(Helped):
                def as_broadcastable_tensor_dict(self):
                    tensor_dict = make_dict(self)
                    return tensor_dict
            """
        }
    )
    helped = p.keys.produced(class_named(p, "Helped"))
    assert helped is not None and set(helped.keys) == {"input_tokens", "lens"}
    assert not helped.open and helped.unknown_sources == []
    via_self = p.keys.produced(class_named(p, "ViaSelf"))
    assert via_self is not None and set(via_self.keys) == {"own"} and not via_self.open
    unfollowed = p.keys.produced(class_named(p, "Unfollowed"))
    assert unfollowed is not None and unfollowed.unknown_sources == ["make_dict"]
    assert unfollowed.open


def test_a_dict_from_a_call_of_any_name_is_followed_or_left_open() -> None:
    p = project_of(
        {
            "acme/named.py": """\
            from dataclasses import dataclass

            @dataclass
            class Input:
                a: int = 0

                def _to_send(self):
                    return {"a": self.a}

                def as_broadcastable_tensor_dict(self):
                    tensor_dict = self._to_send()
                    return tensor_dict
            """
        }
    )
    produced = p.keys.produced(class_named(p, "Input"))
    assert produced is not None
    assert set(produced.keys) == {"a"} or produced.open
