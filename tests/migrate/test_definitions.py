"""The modules defining the classes a non-driver branch builds with a literal flag are
read as context (through a package's re-export), so that the flag's default is known;
nothing else is read."""

from __future__ import annotations

from pathlib import Path

from codemods.framework.definitions import flag_classes, read_definitions
from runnercheck.analysis.extract import extract_file
from runnercheck.contract import VLLM

RUNNER = """
from engine.sampling import SamplingMetadata
from engine.other import Unrelated


class ModelRunner:
    def prepare_input_tensors(self, seqs):
        if self.is_driver_worker:
            sampling = self._prepare_sample(seqs)
        else:
            sampling = SamplingMetadata(seq_groups=None, perform_sampling=False)
        Unrelated(flag=False)
        return sampling
"""


def package(root: Path) -> Path:
    engine = root / "engine"
    (engine / "sampling").mkdir(parents=True)
    (engine / "__init__.py").write_text("")
    (engine / "sampling" / "__init__.py").write_text(
        "from engine.sampling.metadata import SamplingMetadata\n"
    )
    (engine / "sampling" / "metadata.py").write_text(
        "class SamplingMetadata:\n"
        "    def __init__(self, seq_groups, perform_sampling=True):\n"
        "        self.perform_sampling = perform_sampling\n"
    )
    (engine / "other.py").write_text("class Unrelated:\n    pass\n")
    runner = engine / "model_runner.py"
    runner.write_text(RUNNER)
    return runner


def test_the_class_a_non_driver_branch_builds_with_a_flag_is_read_through_re_exports(
    tmp_path: Path,
) -> None:
    runner = package(tmp_path)
    facts = {runner: extract_file(runner)}
    assert flag_classes(facts[runner]) == {"SamplingMetadata"}  # Unrelated runs on every rank
    found = read_definitions(facts, VLLM, 1 << 20)
    engine = tmp_path / "engine"
    assert sorted(found) == [
        engine / "sampling" / "__init__.py",
        engine / "sampling" / "metadata.py",
    ]
    data, metadata = found[engine / "sampling" / "metadata.py"]
    assert data == (engine / "sampling" / "metadata.py").read_bytes()
    init = metadata.classes["SamplingMetadata"].methods["__init__"]
    assert init.param_defaults == {"perform_sampling": "True"}


def test_nothing_is_read_when_the_module_is_already_known(tmp_path: Path) -> None:
    runner = package(tmp_path)
    metadata = tmp_path / "engine" / "sampling" / "metadata.py"
    init = tmp_path / "engine" / "sampling" / "__init__.py"
    facts = {p: extract_file(p) for p in (runner, init, metadata)}
    assert read_definitions(facts, VLLM, 1 << 20) == {}
