"""How a function's dicts are read (:mod:`runnercheck.analysis.dicts`, through the
real file reader): keys put, merged (``update``, ``**``, ``|=``, ``dict(...)``),
popped or deleted, read with or without a default, handed to helpers, and the
``target(**d)`` constructors."""

from __future__ import annotations

from runnercheck.analysis.model import DictFacts, FunctionFacts
from tests.analysis.sources import facts_of

SOURCE = """\
from vllm.distributed import broadcast_tensor_dict


def build(model_input, extra):
    tensor_dict = {"tokens": model_input.tokens}
    tensor_dict.update({"positions": model_input.positions}, lens=extra)
    tensor_dict.update(other)
    tensor_dict |= {"merged": 1}
    tensor_dict.setdefault("kind", "decode")
    tensor_dict[name] = 1
    tensor_dict = dict(tensor_dict, more=2, **rest)
    _add(tensor_dict, model_input.attn)
    return tensor_dict


def receive(tensor_dict):
    attn = tensor_dict.pop("attn")
    lora = tensor_dict.pop("lora", None)
    del tensor_dict["gone"]
    tokens = tensor_dict["tokens"]
    maybe = tensor_dict.get("maybe")
    tensor_dict.pop(key)
    return ModelInput(**tensor_dict)


def send(model_input):
    broadcast_tensor_dict({"n": model_input.n}, src=0)


def returns_literal(self_like):
    return {"a": self_like.a, **self_like.base()}
"""


def function(name: str) -> FunctionFacts:
    return facts_of(SOURCE).functions[name]


def the_dict(name: str, var: str) -> DictFacts:
    return function(name).dicts[var]


def test_keys_put_merged_and_set_by_default() -> None:
    built = the_dict("build", "tensor_dict")
    # ``d = dict(d, more=2)`` hands ``d`` to a call: read as a helper (which the key
    # flow cannot follow, so the dict is open), not as keys
    assert set(built.keys) == {"tokens", "positions", "lens", "merged", "kind"}
    assert built.keys["tokens"].fields == () and built.keys["tokens"].line == 5
    assert built.keys["lens"].params == (1,)  # the value is the second parameter
    assert built.dynamic  # ``tensor_dict[name]``: a key that cannot be told
    assert built.merges == ["other"]
    assert [(h.callee, h.arg_index) for h in built.helpers] == [("dict", 0), ("_add", 0)]
    assert function("build").returns == ("tensor_dict",)


def test_pops_with_and_without_a_default_deletes_and_reads() -> None:
    received = the_dict("receive", "tensor_dict")
    assert received.param_index == 0
    assert set(received.pops) == {"attn", "lora", "gone"}
    assert received.dynamic_pop  # ``pop(key)``
    # a KeyError when missing: pop and del without a default, and ``[...]``
    assert set(received.required) == {"attn", "gone", "tokens"}
    assert received.reads >= {"tokens", "maybe"}
    assert "maybe" not in received.required and "lora" not in received.required
    (construct,) = received.constructs
    assert (construct.target, construct.line) == ("ModelInput", 23)


def test_a_literal_dict_sent_by_the_broadcast_is_a_dict_of_its_own() -> None:
    (sent,) = function("send").dicts.values()
    assert sent.name.startswith("<arg@27:")
    assert set(sent.keys) == {"n"} and sent.keys["n"].params == (0,)
    assert [h.callee for h in sent.helpers] == ["broadcast_tensor_dict"]


def test_a_returned_literal_with_a_double_star_source() -> None:
    func = function("returns_literal")
    (name,) = func.returns
    assert name == "<return@31>"
    returned = func.dicts[name]
    assert set(returned.keys) == {"a"} and returned.sources == ["self_like.base"]
