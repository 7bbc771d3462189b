"""``fuzz --stub-imports``: a class whose module imports packages that are not installed
is fuzzed with those packages stubbed, and the stubbing is said on stderr."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from runnercheck.cli import main
from runnercheck.fuzz.importing import (
    StubModule,
    allow_importer,
    guard,
    import_module,
    stubbed,
)

HEAVY = textwrap.dedent(
    """
    from dataclasses import dataclass
    from typing import Any, Dict, Optional

    import torch
    import rc_absent_engine
    from rc_absent_engine.attention import AttentionMetadata
    from rc_absent_engine.utils import make_tensor_with_pad


    @rc_absent_engine.register_input
    @dataclass(frozen=True)
    class HeavyInput:
        input_tokens: Optional[torch.Tensor] = None
        num_steps: int = 1
        backend: Optional["AttentionMetadata"] = None

        def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
            return {"input_tokens": self.input_tokens, "num_steps": self.num_steps}

        @classmethod
        def from_broadcasted_tensor_dict(
            cls, tensor_dict: Dict[str, Any], attn_backend: Any = None
        ) -> "HeavyInput":
            return cls(**tensor_dict)
    """
)


def _write(tmp_path: Path, module: str, package: str) -> None:
    (tmp_path / f"{module}.py").write_text(HEAVY.replace("rc_absent_engine", package))
    (tmp_path / "pyproject.toml").write_text(
        "[tool.runnercheck]\n"
        'fuzz_strategies = {"HeavyInput.backend" = "tests.fuzz.test_importing:nothing"}\n'
    )


def nothing() -> object:
    from hypothesis import strategies as st

    return st.none()


def test_a_missing_package_is_named_with_the_option_that_stubs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "heavy_unstubbed", "rc_absent_engine")
    assert main(["fuzz", str(tmp_path / "heavy_unstubbed.py")]) == 2
    # a path is swept: the class it holds cannot run, one line with why
    assert (
        "ERROR heavy_unstubbed:HeavyInput: cannot run: cannot import module 'heavy_unstubbed': "
        "No module named 'rc_absent_engine' (--stub-imports rc_absent_engine fuzzes it with "
        "that package stubbed)\n"
    ) in capsys.readouterr().out


@pytest.mark.parametrize("everything", [False, True], ids=["named", "*"])
def test_stubbed_packages_are_fuzzed_on_every_rank_and_said(
    tmp_path: Path, everything: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    package = f"rc_absent_engine_{int(everything)}"
    module = f"heavy_stubbed_{int(everything)}"
    _write(tmp_path, module, package)
    argv = ["fuzz", "--examples", "5", "--seed", "1", str(tmp_path / f"{module}.py")]
    argv += ["--stub-imports", "*" if everything else f"json,{package}"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == (
        f"runnercheck fuzz: stubbed the missing package {package!r} (--stub-imports): "
        "its names are placeholders\n"
    )
    assert f"PASS {module}:HeavyInput  (5 examples)" in out


def test_only_missing_packages_are_stubbed_and_only_the_named_ones(tmp_path: Path) -> None:
    (tmp_path / "uses_json_and_absent.py").write_text(
        "import json\nimport rc_absent_one\nfrom rc_absent_one.sub import Thing\n"
        "class Child(Thing[int]):\n    pass\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        with guard(stubs=["rc_absent_one"]):
            module = import_module("uses_json_and_absent")
            with pytest.raises(ModuleNotFoundError):
                import_module("rc_absent_two")
    finally:
        sys.path.remove(str(tmp_path))
    assert not isinstance(module.json, StubModule)
    assert isinstance(module.rc_absent_one, StubModule)
    assert issubclass(module.Child, module.Thing) and "rc_absent_one" in stubbed()


def test_stubbing_needs_package_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", "--stub-imports", "a.b", "tests.fuzz.fixtures.good:ModelInput"]) == 2
    assert capsys.readouterr().err == (
        "runnercheck: error: --stub-imports 'a.b': 'a.b' is not a top-level package name (or '*')\n"
    )


ENGINE_LIKE = textwrap.dedent(
    """
    import importlib.util

    import rc_absent_struct
    import rc_absent_cache
    import rc_absent_triton

    try:
        import rc_absent_accelerator  # a platform probe: must fail
        ACCELERATOR = True
    except ImportError:
        ACCELERATOR = False
    FOUND = importlib.util.find_spec("rc_absent_other_accelerator") is not None
    # a probe for a package an earlier import stubbed: still not installed
    STUBBED_FOUND = importlib.util.find_spec("rc_absent_struct") is not None


    class SamplingParams(rc_absent_struct.Struct, omit_defaults=True, array_like=True):
        pass


    class LRUCache(rc_absent_cache.LRUCache[int, int]):
        def __init__(self, capacity):
            super().__init__(capacity)
            self.capacity = capacity


    VERSION = rc_absent_triton.__version__
    CACHE = LRUCache(8)
    """
)


def test_stubs_behave_like_the_packages_engines_import(tmp_path: Path) -> None:
    """Class keywords and constructor arguments are accepted, a stub has a version, and
    a platform probe (an import under ``except ImportError``, ``find_spec``, also of a
    package an earlier import stubbed) still finds nothing."""
    (tmp_path / "engine_like.py").write_text(ENGINE_LIKE)
    sys.path.insert(0, str(tmp_path))
    try:
        with guard(stubs=["*"]):
            allow_importer("engine_like")  # as fuzz does for the module it is given
            module = import_module("engine_like")
    finally:
        sys.path.remove(str(tmp_path))
    assert module.CACHE.capacity == 8
    assert isinstance(module.VERSION, str) and module.VERSION[0].isdigit()
    assert issubclass(module.SamplingParams, module.rc_absent_struct.Struct)
    assert (module.ACCELERATOR, module.FOUND, module.STUBBED_FOUND) == (False, False, False)
    assert "rc_absent_accelerator" not in stubbed()


LOSES_A_FIELD = textwrap.dedent(
    """
    from dataclasses import dataclass
    from typing import Any, Dict

    import rc_absent_for_replay


    @dataclass(frozen=True)
    class LosesInput:
        kept: int = 0
        lost: int = 0

        def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
            return {"kept": self.kept}

        @classmethod
        def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> "LosesInput":
            return cls(**tensor_dict)
    """
)


def test_the_replay_line_carries_the_stubs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "loses_under_stubs.py").write_text(LOSES_A_FIELD)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["fuzz", "loses_under_stubs:LosesInput", "--stub-imports", "rc_absent_for_replay"]
    argv += ["--examples", "5", "--seed", "3", "--world-size", "1", "--format", "json"]
    assert main(argv) == 1
    [result] = json.loads(capsys.readouterr().out)["results"]
    assert result["replay"].endswith(
        "--seed 3 --world-size 1 --examples 5 --stub-imports rc_absent_for_replay"
    )


PYDANTIC_MODEL = textwrap.dedent(
    """
    from typing import Optional

    import pydantic
    from rc_absent_api.types import ContentPart


    class ChatMessage(pydantic.BaseModel):
        part: Optional[ContentPart] = None
    """
)


def test_a_stub_is_a_field_type_pydantic_accepts(tmp_path: Path) -> None:
    """An engine's request models (pydantic) may name a stubbed package's class as a
    field type: the module imports, and the field takes any value."""
    pytest.importorskip("pydantic")
    (tmp_path / "chat_like.py").write_text(PYDANTIC_MODEL)
    sys.path.insert(0, str(tmp_path))
    try:
        with guard(stubs=["*"]):
            allow_importer("chat_like")
            module = import_module("chat_like")
    finally:
        sys.path.remove(str(tmp_path))
    assert module.ChatMessage(part={"url": "x"}).part == {"url": "x"}
