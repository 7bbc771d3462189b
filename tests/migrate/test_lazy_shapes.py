"""The shapes ``migrate`` plans groups from (a broadcasting method's legacy split, the
execute method's request reads) are read only for the classes group planning asks
about, with the same answers as reading them with the rest of the facts."""

from __future__ import annotations

import ast
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from codemods.framework import pipeline
from codemods.framework.pipeline import MigrateResult, migrate
from runnercheck.analysis import extract
from runnercheck.analysis.extract import extract_tree, read_shapes
from runnercheck.analysis.model import ModuleFacts
from runnercheck.contract import VLLM
from runnercheck.demo.engine import engine_source_dir
from tests.migrate import refusals, variants
from tests.migrate.conftest import FIXTURES

#: Names defined twice: the facts hold the last class of a name, and its last method
#: of a name, whether that one is async or not.
TWICE = """\
import torch.distributed as dist


class Runner:
    def execute_model(self, seq_group_metadata_list, kv_caches):
        return None


if dist.is_initialized():

    class Runner:
        def prepare(self, seq_group_metadata_list):
            if self.is_driver_worker:
                data = {"n": len(seq_group_metadata_list)}
                broadcast_tensor_dict(data, src=0)
            else:
                data = broadcast_tensor_dict(src=0)
            return data["n"]

        async def prepare(self, seq_group_metadata_list):
            return None

        def execute_model(self, seq_group_metadata_list: list, kv_caches: list) -> int:
            if self.is_driver_worker:
                n = len(seq_group_metadata_list)
                broadcast_tensor_dict({"n": n}, src=0)
            else:
                n = broadcast_tensor_dict(src=0)["n"]
            return n

        def execute_model(self, seq_group_metadata_list: list, kv_caches: list) -> int:
            if self.is_driver_worker:
                first = seq_group_metadata_list[0]
                broadcast_tensor_dict({"first": first.seq_data}, src=0)
            return 0
"""


def _sources() -> dict[str, str]:
    found: dict[str, str] = {"twice.py": TWICE}
    trees = [engine_source_dir("legacy"), FIXTURES / "engine" / "before"]
    for root in trees:
        for path in sorted(root.rglob("*.py")):
            found[str(path)] = path.read_text()
    for refused in refusals.NAMES:
        for name, text in refusals.tree(refused).items():
            found[f"{refused}/{name}"] = text
    for shape in ("after_split", "hardware_subclass", "request_after_prepare"):
        for name, text in variants.before(shape).items():
            if name.endswith(".py"):
                found[f"{shape}/{name}"] = text
    return found


def _later(text: str, path: str) -> ModuleFacts:
    tree = ast.parse(text)
    facts = extract_tree(tree, path, text, VLLM, names=True, loaded=False, shapes=False)
    assert not facts.shapes_read
    read_shapes(facts, ast.parse(text), text, VLLM)  # (a tree of its own, as from the cache)
    return facts


@pytest.mark.slow
def test_shapes_read_later_are_the_shapes_read_with_the_facts() -> None:
    with_shapes = 0
    for path, text in _sources().items():
        at_once = extract_tree(ast.parse(text), path, text, VLLM, names=True, loaded=False)
        assert at_once.shapes_read
        assert _later(text, path) == at_once, path
        methods = [m for c in at_once.classes.values() for m in c.methods.values()]
        if any(m.split is not None or m.request_reads is not None for m in methods):
            with_shapes += 1
    assert with_shapes >= 10, "the sources hold shapes to read"


def test_the_shapes_of_a_name_defined_twice_are_those_of_the_last_definition() -> None:
    facts = _later(TWICE, "twice.py")
    runner = facts.classes["Runner"]
    assert runner.methods["prepare"].split is None  # the async one stands
    execute = runner.methods["execute_model"]
    assert execute.request_reads is not None and execute.split is not None
    assert execute.param_annotations == ("list", "list")
    defined = [i + 1 for i, line in enumerate(TWICE.splitlines()) if "def execute_model" in line]
    assert execute.line == defined[-1]
    assert [u.line for u in execute.request_reads.uses] == [defined[-1] + 2]


def test_reading_shapes_twice_changes_nothing() -> None:
    facts = _later(TWICE, "twice.py")
    execute = facts.classes["Runner"].methods["execute_model"]
    reads = execute.request_reads
    read_shapes(facts, ast.parse("class Runner:\n    def execute_model(self): pass\n"), "")
    assert facts.classes["Runner"].methods["execute_model"].request_reads is reads


def _counting_shapes(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The files ``migrate`` reads shapes of, by name."""
    read: Counter[str] = Counter()
    real = pipeline.read_shapes

    def counting(facts: ModuleFacts, *args: Any, **kwargs: Any) -> None:
        read[Path(facts.path).name] += 1
        real(facts, *args, **kwargs)

    monkeypatch.setattr(pipeline, "read_shapes", counting)
    return read


def _outcome(result: MigrateResult) -> tuple[object, ...]:
    return (
        {p: (c.old, c.new, c.codemods) for p, c in result.changes.items()},
        [(r.code, r.path, r.line, r.message) for r in result.refusals],
        [(n.path, n.line, n.message) for n in result.notes],
    )


def test_a_run_reads_shapes_for_the_files_of_its_groups_and_their_bases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's worker and runners (the hardware runners in files of their own) and
    the worker's base (``worker_base.py``, in no group) are read, each once; the
    hardware worker, in no group and the base of none, is not."""
    work = variants.write(variants.before("hardware_subclass"), tmp_path / "hw")
    read = _counting_shapes(monkeypatch)
    assert migrate([work]).changes
    group = {"worker.py", "model_runner.py", "xpu_model_runner.py", "hpu_model_runner.py"}
    assert read == dict.fromkeys(group | {"worker_base.py"}, 1)
    assert (work / "xpu_worker.py").is_file()


@pytest.mark.parametrize("tree", ["merged", "missing-runner"])
def test_a_run_that_plans_no_group_reads_no_shapes(
    tree: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merged engine has no group; every group of ``missing-runner`` is refused as
    found (MIG103, MIG104), and a refused group is never planned."""
    work = tmp_path / tree
    if tree == "merged":
        shutil.copytree(engine_source_dir("merged"), work)
    else:
        refusals.write(tree, work)
    read = _counting_shapes(monkeypatch)
    counted: Counter[str] = Counter()
    real = extract._method_shape

    def counting(*args: Any, **kwargs: Any) -> None:
        counted["method"] += 1
        real(*args, **kwargs)

    monkeypatch.setattr(extract, "_method_shape", counting)
    result = migrate([work], exact=True)
    if tree == "missing-runner":
        assert {"MIG103", "MIG104"} <= {r.code for r in result.refusals}
    assert not read and not counted


@pytest.mark.slow
def test_a_cached_file_gets_its_shapes_the_first_time_it_is_in_a_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    plain = migrate([tree])
    read = _counting_shapes(monkeypatch)
    migrate([tree], select=("self-return",), cache_root=tmp_path)  # stored without shapes
    assert not read
    first = migrate([tree], cache_root=tmp_path)
    assert read and set(read.values()) == {1}
    assert _outcome(first) == _outcome(plain)
    read.clear()
    second = migrate([tree], cache_root=tmp_path)
    assert not read, "the cache held them"
    assert _outcome(second) == _outcome(plain)
