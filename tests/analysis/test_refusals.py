"""What a class refuses to be built with (:mod:`runnercheck.analysis.refusals`): the
attributes its constructor chain, or a helper it hands ``self`` to, raises on when set
(code under a test of such a value never runs on any rank)."""

from __future__ import annotations

import ast

import pytest

from runnercheck.analysis.refusals import class_refusals, refused_attrs
from tests.analysis.sources import class_named, project_of


def body(text: str) -> list[ast.stmt]:
    return ast.parse(text).body


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ("if p.x is not None:\n    raise ValueError\n", {"p": ("x",)}),
        ("if p.x or q.y:\n    raise ValueError\n", {"p": ("x",), "q": ("y",)}),
        ("if p.x:\n    raise ValueError\n", {"p": ("x",)}),
        ("assert p.x is None\n", {"p": ("x",)}),
        ("assert not p.x\n", {"p": ("x",)}),
        # not a refusal: the body does not end in a raise, both must hold, or the
        # assertion holds when the value is set
        ("if p.x:\n    log()\n", {}),
        ("if p.x and p.y:\n    raise ValueError\n", {}),
        ("assert p.x\n", {}),
        ("assert p.x is not None\n", {}),
        ("if p is not None:\n    raise ValueError\n", {}),  # a name, not an attribute
    ],
)
def test_refused_attrs(text: str, refused: dict[str, tuple[str, ...]]) -> None:
    assert refused_attrs(body(text)) == refused


def test_a_class_refuses_what_its_constructor_chain_and_its_helpers_refuse() -> None:
    p = project_of(
        {
            "acme/runner.py": """\
            def assert_supported(runner):
                if runner.lora_config is not None:
                    raise NotImplementedError("LoRA")

            def unrelated(config):
                assert config.other is None

            class Base:
                def __init__(self, config):
                    assert not self.prompt_adapter_config

            class EncoderDecoderRunner(Base):
                def __init__(self, config):
                    super().__init__(config)
                    assert_supported(self)
                    unrelated(config)

            class Unchained(Base):
                def __init__(self, config):
                    pass
            """
        }
    )
    runner = class_named(p, "EncoderDecoderRunner")
    assert class_refusals(p.hierarchy, runner) == {"lora_config", "prompt_adapter_config"}
    # without ``super().__init__`` the base's constructor never runs
    assert class_refusals(p.hierarchy, class_named(p, "Unchained")) == frozenset()
    assert class_refusals(p.hierarchy, class_named(p, "Base")) == {"prompt_adapter_config"}
