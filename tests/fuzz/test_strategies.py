"""Strategies from annotations: what gets generated, and clear errors for what cannot."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

import pytest
import torch
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from runnercheck.config import config_from_mapping
from runnercheck.errors import ConfigError
from runnercheck.fuzz.strategies import (
    ALL_DTYPES,
    LAYOUTS,
    StrategyBuilder,
    StrategyError,
    TensorOptions,
    field_annotations,
    load_configured,
    make_tensor,
    register_strategy,
    tensors,
    unregister_strategy,
)
from tests.fuzz.fixtures.annotated import Color, Everything, Inner, NeedsStrategy, Opaque
from tests.fuzz.fixtures.good import LoRARequest

FAST = settings(max_examples=400, deadline=None, database=None)


def _find(strategy: Any, condition: Any) -> Any:
    return find(strategy, condition, settings=FAST)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_tensors_cover_every_dtype(dtype: torch.dtype) -> None:
    found = _find(tensors(), lambda t: t.dtype == dtype)
    assert found.dtype == dtype


def test_tensors_cover_shapes_layouts_and_special_values() -> None:
    assert _find(tensors(), lambda t: t.dim() == 0).shape == ()
    assert _find(tensors(), lambda t: t.numel() == 0 and t.dim() > 0).numel() == 0
    assert _find(tensors(), lambda t: t.numel() >= TensorOptions().large).numel() >= 1 << 14
    assert not _find(tensors(), lambda t: not t.is_contiguous()).is_contiguous()
    assert 0 in _find(tensors(), lambda t: t.dim() > 0 and 0 in t.stride()).stride()
    nan = _find(tensors(), lambda t: t.is_floating_point() and bool(torch.isnan(t).any()))
    assert torch.isnan(nan).any()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_make_tensor_layouts_keep_shape(layout: str) -> None:
    for shape in [(), (0,), (3,), (2, 3), (2, 0, 4)]:
        tensor = make_tensor(torch.float32, shape, layout, "random", 7)
        assert tuple(tensor.shape) == shape
    tensor = make_tensor(torch.float32, (2, 3), layout, "zeros", 0)
    if layout == "offset":
        assert tensor.is_contiguous() and tensor.storage_offset() > 0
    elif layout != "contiguous":
        assert not tensor.is_contiguous()


@dataclasses.dataclass
class Holder:
    direct: torch.Tensor
    listed: list[torch.Tensor]


def test_only_carried_dtypes_in_broadcast_positions() -> None:
    options = TensorOptions(dtypes=(torch.float32,), pickled_dtypes=(torch.int16,))

    strategy = StrategyBuilder(tensor_options=options).for_class(Holder)
    found = _find(strategy, lambda h: len(h.listed) > 0)
    assert found.direct.dtype == torch.float32
    assert {t.dtype for t in found.listed} == {torch.int16}


def test_annotations_resolve_type_checking_imports() -> None:
    annotations = field_annotations(Everything)
    assert annotations["lora"] == (LoRARequest | None)
    assert annotations["inner"] is Inner


def test_every_annotation_kind_is_generated() -> None:
    strategy = StrategyBuilder().for_class(Everything)
    checks = {
        "either is a str": lambda e: isinstance(e.either, str),
        "pipe is None": lambda e: e.pipe is None,
        "nested tensors": lambda e: (
            len(e.inners) > 0 and isinstance(e.inners[0].weights, torch.Tensor)
        ),
        "table with lists": lambda e: any(isinstance(v, list) for v in e.table.values()),
        "lora request": lambda e: isinstance(e.lora, LoRARequest),
        "blue": lambda e: e.color is Color.BLUE,
        "decode": lambda e: e.mode == "decode",
        "frozenset": lambda e: isinstance(e.frozen, frozenset) and len(e.frozen) > 0,
        "pair": lambda e: isinstance(e.pair, tuple) and isinstance(e.pair[1], str),
        "many": lambda e: isinstance(e.many, tuple) and len(e.many) > 1,
        "mapping of tensors": lambda e: any(
            isinstance(v, torch.Tensor) for v in e.mapping.values()
        ),
    }
    seen: set[str] = set()

    @settings(max_examples=300, database=None, phases=[Phase.generate])
    @given(strategy)
    def collect(example: Everything) -> None:
        seen.update(name for name, check in checks.items() if check(example))

    collect()
    assert seen == set(checks)


def test_mapping_keys_never_hold_the_broadcast_separator() -> None:
    strategy = StrategyBuilder().for_annotation(dict[str, int], "x")
    with pytest.raises(NoSuchExample):
        _find(strategy, lambda d: any("%" in k for k in d))


def test_fields_shrink_to_their_defaults() -> None:
    found = _find(StrategyBuilder().for_class(Everything), lambda e: True)
    assert found.scale == 1.0 and found.flag is False and found.blob == b""


@dataclasses.dataclass
class WithDefaults:
    count: int | None = 5
    names: list[str] = dataclasses.field(default_factory=lambda: ["x"])


def test_a_field_picks_its_default_or_any_branch_of_its_union() -> None:
    strategy = StrategyBuilder().for_class(WithDefaults)
    assert _find(strategy, lambda d: True) == WithDefaults(5, ["x"])
    assert _find(strategy, lambda d: d.count is None).count is None
    assert _find(strategy, lambda d: d.count not in (None, 5)).count == 0
    assert _find(strategy, lambda d: d.names != ["x"]).names == []
    first, second = _find(st.tuples(strategy, strategy), lambda pair: True)
    assert first.names is not second.names  # the factory is called for each instance


def test_tensor_sizes_reach_every_side_and_shrink_to_the_smallest() -> None:
    options = TensorOptions(max_side=2)
    found = _find(tensors(options=options), lambda t: t.dim() == 3 and t.shape[::2] == (2, 2))
    assert tuple(found.shape) == (2, 0, 2)
    assert (found.dtype, found.is_contiguous()) == (torch.int64, True)


def test_unresolvable_annotation_names_field_and_keys() -> None:
    with pytest.raises(StrategyError) as info:
        StrategyBuilder().for_class(NeedsStrategy)
    message = str(info.value)
    assert "NeedsStrategy.handle" in message and "'Opaque'" in message
    assert "register a strategy" in message and "fuzz_strategies" in message


def test_registered_strategies_by_type_name_and_field() -> None:
    register_strategy(Opaque, st.just(Opaque(3)))
    register_strategy("NeedsStrategy.missing", st.just("filled"))
    try:
        found = _find(StrategyBuilder().for_class(NeedsStrategy), lambda n: n.handle is not None)
    finally:
        unregister_strategy(Opaque)
        unregister_strategy("NeedsStrategy.missing")
    assert found.handle.handle == 3
    assert found.missing in (None, "filled")


def test_configured_strategies() -> None:
    config = config_from_mapping(
        {
            "fuzz_strategies": {
                "Opaque": "tests.fuzz.fixtures.annotated:opaque_handles",
                "NotDefinedAnywhere": "tests.fuzz.fixtures.annotated:opaque_handles",
            }
        },
        "pyproject.toml",
    )
    builder = StrategyBuilder(load_configured(config.fuzz_strategies))
    found = _find(builder.for_class(NeedsStrategy), lambda n: n.handle is not None)
    assert isinstance(found.handle, Opaque)


def test_bad_configured_strategy_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"fuzz_strategies\['Opaque'\]: cannot load"):
        load_configured({"Opaque": "tests.fuzz.fixtures.annotated:nothing_here"})
    with pytest.raises(ConfigError, match="is not 'module:function'"):
        load_configured({"Opaque": "no_colon"})
    with pytest.raises(ConfigError, match="does not give a strategy"):
        load_configured({"Opaque": "tests.fuzz.fixtures.annotated:Color"})


class Kind(enum.Enum):
    A = 1


@dataclasses.dataclass
class Checked:
    kind: Kind
    n: int

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("negative")


def test_constructor_failures_are_rejected() -> None:
    found = _find(StrategyBuilder().for_class(Checked), lambda c: c.n != 0)
    assert found.n > 0 and found.kind is Kind.A


def test_a_recursive_alias_imported_from_another_module_is_generated() -> None:
    """``Union[List["NestedValues"], ...]`` names itself where the class's module does
    not import it: the forward reference is the one alias of that name that names
    itself, and lists of it nest a few levels, then end."""
    from tests.fuzz.fixtures.nested_alias_input import BatchedInput

    strategy = StrategyBuilder().for_class(BatchedInput)

    def nested(value: Any) -> bool:
        return isinstance(value, list) and any(isinstance(v, list) and v for v in value)

    found = _find(strategy, lambda e: bool(e.batched) and any(map(nested, e.batched.values())))
    assert any(nested(v) for v in found.batched.values())


def test_a_dotted_forward_reference_in_an_imported_alias_is_generated() -> None:
    """``Union[List["DottedValues"], "torch.Tensor", ...]`` (vLLM 0.9's NestedTensors):
    ``"torch.Tensor"`` is the attribute of the loaded module ``torch``."""
    from tests.fuzz.fixtures.nested_alias_input import BatchedDottedInput

    strategy = StrategyBuilder().for_class(BatchedDottedInput)
    found = _find(
        strategy,
        lambda e: bool(e.batched) and any(isinstance(v, torch.Tensor) for v in e.batched.values()),
    )
    assert any(isinstance(v, torch.Tensor) for v in found.batched.values())


def test_a_callable_field_is_generated() -> None:
    from tests.fuzz.fixtures.nested_alias_input import WithCallback

    strategy = StrategyBuilder().for_class(WithCallback)
    assert callable(_find(strategy, lambda e: e.callback is not None).callback)
    assert all(map(callable, _find(strategy, lambda e: len(e.handlers) > 0).handlers))


def test_a_typed_dict_has_its_required_keys_and_sometimes_the_others() -> None:
    from tests.fuzz.fixtures.nested_alias_input import WithInputs

    strategy = StrategyBuilder().for_class(WithInputs)
    found = _find(strategy, lambda e: e.inputs is not None and "prompt" in e.inputs)
    assert isinstance(found.inputs["prompt_token_ids"], list)
    lean = _find(strategy, lambda e: e.inputs is not None and "prompt" not in e.inputs)
    assert set(lean.inputs) == {"prompt_token_ids"}


def test_a_record_on_a_stubbed_base_gets_its_annotated_fields() -> None:
    from tests.fuzz.fixtures.nested_alias_input import Request, WithRequest

    strategy = StrategyBuilder().for_class(WithRequest)
    found = _find(strategy, lambda e: e.request is not None and e.request.number > 1)
    assert isinstance(found.request, Request) and isinstance(found.request.name, str)
    assert hash(found.request) == hash(found.request.name)


def test_a_generator_field_is_a_seeded_generator() -> None:
    @dataclasses.dataclass(frozen=True)
    class WithGenerator:
        generator: torch.Generator | None = None

    found = _find(StrategyBuilder().for_class(WithGenerator), lambda e: e.generator is not None)
    assert isinstance(found.generator, torch.Generator)
