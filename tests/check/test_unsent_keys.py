"""RC111 on the merged dict and the reads it counts: a key another part leaves in the
merged dict is sent; a read under a test that names the key, in a ``try`` or with a
default is no read that can fail."""

from __future__ import annotations

import pytest

from runnercheck.analysis.extract import extract_source
from runnercheck.check import check_sources
from tests.check.test_merged_delivery import SOURCE

#: The merged step of ``test_merged_delivery``, its built input rebuilt by popping each
#: key, ``virtual_engine`` included (which only WorkerInput sends).
_BUILT = "class ModelInputForAccelWithSampling"
_HEAD, _TAIL = SOURCE.split(_BUILT)
MERGED = (
    _HEAD
    + _BUILT
    + _TAIL.replace(
        "        return cls(**tensor_dict)\n",
        "        return cls(\n"
        '            input_tokens=tensor_dict.pop("input_tokens"),\n'
        '            sampling=tensor_dict.pop("sampling"),\n'
        '            virtual_engine=tensor_dict.pop("virtual_engine"),\n'
        "        )\n",
        1,
    )
)


def rc111(source: str) -> list[str]:
    result = check_sources({"accel.py": source})
    return [
        f"{f.line}: {f.message}" for f in [*result.findings, *result.notes] if f.code == "RC111"
    ]


def test_a_key_the_worker_input_leaves_in_the_merged_dict_is_sent_to_the_model_input() -> None:
    # WorkerInput reads virtual_engine without pop: it is still in the dict when the
    # model input pops it, on every non-driver rank
    assert rc111(MERGED.format(read='tensor_dict["virtual_engine"]')) == []


def test_the_same_read_fails_once_the_worker_input_pops_the_key() -> None:
    source = MERGED.format(read='tensor_dict.pop("virtual_engine")')
    lines = source.splitlines()
    built = next(i for i, line in enumerate(lines) if line.startswith(_BUILT))
    read = 1 + lines.index('            virtual_engine=tensor_dict.pop("virtual_engine"),', built)
    assert rc111(source) == [
        f"{read}: ModelInputForAccelWithSampling.from_broadcasted_tensor_dict reads key 'virtual_engine' "
        "with no default, but no path of "
        "ModelInputForAccelWithSampling.as_broadcastable_tensor_dict "
        "puts it: KeyError on every non-driver rank"
    ]


READS = """\
class Input:
    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        {body}
        return cls(**tensor_dict)
"""


@pytest.mark.parametrize(
    ("body", "required"),
    [
        ('x = tensor_dict["k"]', {"k"}),
        ('x = tensor_dict.pop("k")', {"k"}),
        ('del tensor_dict["k"]', {"k"}),
        ('x = tensor_dict.pop("k", None)', set()),
        ('x = tensor_dict.get("k")', set()),
        ('x = tensor_dict["k"] if "k" in tensor_dict else None', set()),
        ('x = "k" in tensor_dict and tensor_dict["k"]', set()),
        ('if "k" in tensor_dict:\n            x = tensor_dict.pop("k")', set()),
        (
            'if "k" not in tensor_dict:\n            return None\n        x = tensor_dict["k"]',
            set(),
        ),
        (
            'try:\n            x = tensor_dict["k"]\n        except KeyError:\n            x = None',
            set(),
        ),
        # a test about another key guards nothing
        ('if "j" in tensor_dict:\n            x = tensor_dict["k"]', {"k"}),
    ],
)
def test_reads_with_no_default_and_no_guard(body: str, required: set[str]) -> None:
    facts = extract_source(READS.format(body=body), "input.py")
    method = facts.classes["Input"].methods["from_broadcasted_tensor_dict"]
    received = next(d for d in method.dicts.values() if d.param_index == 1)
    assert set(received.required) == required


CHAIN = """\
class Base:
    def as_broadcastable_tensor_dict(self):
        return {{"input_tokens": self.input_tokens}}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls._build(tensor_dict)

    @classmethod
    def _build(cls, tensor_dict):
        return cls(input_tokens=tensor_dict.pop("input_tokens"), **tensor_dict)


class Child(Base):
    def as_broadcastable_tensor_dict(self):
        {child_dict}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        tensor_dict["extra"] = tensor_dict.pop("sampling")
        return super().from_broadcasted_tensor_dict(tensor_dict, attn_backend)
"""


def test_the_super_chain_and_class_helpers_on_both_sides() -> None:
    sent = 'return {**super().as_broadcastable_tensor_dict(), "sampling": self.sampling}'
    assert rc111(CHAIN.format(child_dict=sent)) == []
    found = rc111(CHAIN.format(child_dict='return {"sampling": self.sampling}'))
    assert found == [
        "11: Child.from_broadcasted_tensor_dict reads key 'input_tokens' with no default "
        "(in Base._build), but no path of Child.as_broadcastable_tensor_dict puts it: "
        "KeyError on every non-driver rank"
    ]
