"""The workers of one directory share one input class in a generated ``worker_input.py``,
also when they belong to different groups and when one sends fewer fields (those are
None on its ranks); workers that type one key differently keep a class of their own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from codemods.framework.pipeline import MERGE, migrate
from runnercheck.check import check_paths
from tests.migrate import variants
from tests.migrate.conftest import FIXTURES, copy_tree, snapshot

IMPORT = "from .worker_input import WorkerInput\n"
#: the copied worker's tensor of blocks to swap, which the tests edit
TENSOR_SWAP = "        blocks_to_swap = torch.tensor(request.blocks_to_swap, dtype=torch.int64)\n"


def _engine_with_a_copied_worker(root: Path, edit: tuple[str, str] | None = None) -> Path:
    """The toy engine plus ``accel_worker.py``: the GPU worker's step copied, driving
    the CPU runner, so it falls in the CPU worker's group, not the GPU worker's."""
    work = copy_tree(FIXTURES / "engine" / "before", root / "engine")
    text = (work / "worker.py").read_text()
    runner = (
        "        RunnerClass = PoolingModelRunner if config.pooling else ModelRunner\n"
        "        self.model_runner = RunnerClass(config, is_driver_worker=is_driver_worker)\n"
    )
    assert runner in text
    text = (
        text.replace(
            runner, "        self.model_runner = CPUModelRunner(config, is_driver_worker)\n"
        )
        .replace(
            "from .model_runner import ModelRunner\n"
            "from .pooling_model_runner import PoolingModelRunner\n",
            "from .cpu_model_runner import CPUModelRunner\n",
        )
        .replace("class Worker:", "class AccelWorker:")
    )
    if edit is not None:
        assert edit[0] in text
        text = text.replace(*edit)
    (work / "accel_worker.py").write_text(text)
    return work


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_workers_of_two_groups_share_one_generated_class(
    jobs: str, tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = _engine_with_a_copied_worker(tmp_path)
    monkeypatch.chdir(work)
    data = json.loads(migrate_cli("--check", "--format", "json", ".").out)
    labels = [g["group"] for g in data["groups"]]
    assert any(label.startswith("Worker/") for label in labels), labels
    assert any("AccelWorker" in label and "CPUWorker" in label for label in labels), labels
    result = migrate_cli("-j", jobs, ".")
    assert result.code == 0 and ": MIG" not in result.out, result.out
    shared = (work / "worker_input.py").read_text()
    assert shared.count("\nclass ") == 1 and "class WorkerInput:" in shared
    assert "``AccelWorker``, ``CPUWorker`` and ``Worker``" in shared
    # the CPU worker sends no blocks to swap: the field is None on its ranks
    assert (
        '    num_seq_groups: int\n    blocks_to_swap: "Optional[torch.Tensor]" = None\n' in shared
    )
    for name in ("worker.py", "accel_worker.py", "cpu_worker.py"):
        text = (work / name).read_text()
        assert IMPORT in text and not re.search(r"^class \w*Input\b", text, re.M), name
        assert "WorkerInput(" in text, name
    assert "WorkerInput.from_broadcasted_tensor_dict(data)" in (work / "cpu_worker.py").read_text()
    # the GPU worker and its copy differ only in what they send: their step is one, in
    # the base; the receiver there indexed the key (relied on it): the cache operation
    # that reads it, in each worker's own execute_worker, asserts it is set (a type
    # checker narrows within one method)
    base = (work / "worker_base.py").read_text()
    for name in ("worker.py", "accel_worker.py"):
        text = (work / name).read_text()
        assert "(LocalOrDistributedWorkerBase):" in text, name
        assert (
            "    def execute_worker(self, worker_input: WorkerInput) -> None:\n"
            "        assert worker_input.blocks_to_swap is not None\n"
        ) in text, name
    assert "assert worker_input" not in base
    assert "assert worker_input" not in (work / "cpu_worker.py").read_text()
    assert check_paths([work]).findings == []
    again = snapshot(work)
    assert migrate_cli(".").code == 0
    assert snapshot(work) == again


def test_a_value_of_no_readable_type_takes_the_parameter_type_the_worker_states(
    tmp_path: Path, migrate_cli
) -> None:
    # `request` is `Optional[Any]`: the value sent has no type of its own, but the
    # worker passes it (and the non-driver passes what it receives) to its own
    # `swap(self, blocks_to_swap: torch.Tensor)`
    work = _engine_with_a_copied_worker(
        tmp_path, (TENSOR_SWAP, "        blocks_to_swap = request.blocks_to_swap\n")
    )
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    shared = (work / "worker_input.py").read_text()
    assert '    blocks_to_swap: "Optional[torch.Tensor]" = None\n' in shared, shared
    assert ": Any" not in shared.split("class WorkerInput")[1].split("def ")[0], shared
    assert check_paths([work]).findings == []


def test_a_parameter_typed_otherwise_keeps_any(tmp_path: Path, migrate_cli) -> None:
    # two of the worker's parameters state two types for one value: no type is chosen
    untyped = "        blocks_to_swap = request.blocks_to_swap\n        self.log(blocks_to_swap)\n"
    work = _engine_with_a_copied_worker(tmp_path, (TENSOR_SWAP, untyped))
    text = (
        (work / "accel_worker.py")
        .read_text()
        .replace(
            "    def swap(self, blocks_to_swap: torch.Tensor) -> None:\n",
            "    def log(self, value: List[int]) -> None:\n"
            "        pass\n\n"
            "    def swap(self, blocks_to_swap: torch.Tensor) -> None:\n",
        )
    )
    (work / "accel_worker.py").write_text(text)
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    assert "    blocks_to_swap: Any\n" in (work / "accel_worker.py").read_text()


def test_a_field_of_another_type_keeps_a_class_per_worker(tmp_path: Path, migrate_cli) -> None:
    typed = "        blocks_to_swap: List[int] = request.blocks_to_swap\n"
    work = _engine_with_a_copied_worker(tmp_path, (TENSOR_SWAP, typed))
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    assert not (work / "worker_input.py").exists()
    assert "class AccelWorkerInput:" in (work / "accel_worker.py").read_text()
    assert "class WorkerInput:" in (work / "worker.py").read_text()


def test_an_existing_worker_input_module_is_left_alone(tmp_path: Path, migrate_cli) -> None:
    work = _engine_with_a_copied_worker(tmp_path)
    mine = '"""Not generated."""\n'
    (work / "worker_input.py").write_text(mine)
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    assert (work / "worker_input.py").read_text() == mine
    assert "class AccelWorkerInput:" in (work / "accel_worker.py").read_text()
    assert "class WorkerInput:" in (work / "worker.py").read_text()


def test_the_shape_golden_shares_the_class_and_keeps_the_subclass_worker() -> None:
    after = variants.after("shared_worker_input")
    for name in ("worker.py", "hpu_worker.py"):
        text = after[name]
        assert IMPORT in text and "class WorkerInput" not in text, name
    # the XPU worker inherits the GPU worker's step: nothing of its own to share
    assert after["xpu_worker.py"] == variants.before("shared_worker_input")["xpu_worker.py"]


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_worker_whose_group_is_refused_is_left_out_of_the_shared_class(
    jobs: str, tmp_path: Path, migrate_cli
) -> None:
    # the GPU runner's non-driver sampling flag cannot be kept: its group (Worker's) is
    # refused at verification, after the CPU group planned a class for Worker too
    work = _engine_with_a_copied_worker(tmp_path)
    runner = work / "model_runner.py"
    built = "                selected_token_indices=selected_token_indices,\n            )\n"
    text = runner.read_text()
    assert text.count(built) == 1
    flag = "                perform_sampling=False,\n"
    runner.write_text(
        text.replace(built, built.replace("            )\n", flag + "            )\n"))
    )
    result = migrate_cli("-j", jobs, str(work))
    assert "worker.py: MIG111" in result.out, result.out
    assert (work / "worker.py").read_text() == (
        FIXTURES / "engine" / "before" / "worker.py"
    ).read_text()
    shared = (work / "worker_input.py").read_text()
    assert "``AccelWorker`` and ``CPUWorker``" in shared and "``Worker``" not in shared
    for name in ("accel_worker.py", "cpu_worker.py"):
        assert IMPORT in (work / name).read_text(), name


def test_a_value_of_no_readable_type_takes_the_type_another_worker_states(
    tmp_path: Path, migrate_cli
) -> None:
    # the copied worker's count has no type of its own and goes to no typed parameter:
    # the field takes the type the other workers state (``len(...)``: int)
    work = _engine_with_a_copied_worker(
        tmp_path,
        (
            "        num_seq_groups = len(seq_groups)\n",
            "        num_seq_groups = request.num_seq_groups\n",
        ),
    )
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    shared = (work / "worker_input.py").read_text()
    assert "    num_seq_groups: int\n" in shared, shared
    for name in ("worker.py", "accel_worker.py", "cpu_worker.py"):
        assert IMPORT in (work / name).read_text(), name
    assert check_paths([work]).findings == []


def test_a_value_the_driver_always_sets_is_asserted_where_a_receiver_read_it_with_get(
    tmp_path: Path,
) -> None:
    """The copied worker's receiver reads the blocks with ``data.get(...)`` (None when
    the key is missing), but its driver always sends a tensor: its ranks rely on it
    being set as the GPU worker's do, so the shared ``Optional`` field (the CPU worker
    sends none) is asserted set after the receive (passed to ``swap(blocks_to_swap:
    torch.Tensor)`` unchecked, it was a new plain-mypy message where the legacy
    ``data.get`` was ``Any``)."""
    read = '        self.swap(data["blocks_to_swap"])\n'
    work = _engine_with_a_copied_worker(
        tmp_path, (read, read.replace('data["blocks_to_swap"]', 'data.get("blocks_to_swap")'))
    )
    result = migrate([work], select=(MERGE,))
    assert not result.refusals, result.refusals
    shared = result.changes[work / "worker_input.py"].new.decode()
    assert '    blocks_to_swap: "Optional[torch.Tensor]" = None\n' in shared, shared
    accel = result.changes[work / "accel_worker.py"].new.decode()
    assert "        assert worker_input.blocks_to_swap is not None\n" in accel, accel
    typed = [n.message for n in result.notes if n.kind == "mypy"]
    assert typed == [], typed
