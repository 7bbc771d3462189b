"""One worker base for the workers whose merged steps differ only in what they send.

The variant: the demo's legacy engine plus ``CopyOnlyWorker`` (``copy_worker.py``), the
demo's ``Worker`` with another cache operation (it copies blocks, never swaps) and
fewer fields sent. ``migrate`` moves both onto a generated
``LocalOrDistributedWorkerBase`` in ``worker_base.py``; ``CPUWorker``, whose step differs
(its driver returns None where theirs returns ``[]``), keeps its own, with a note.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import libcst as cst
import pytest

from codemods.merge_broadcasts import rewrite, worker_hoist
from runnercheck.check import check_paths
from runnercheck.demo.engine import engine_source_dir, run_engine
from tests.migrate.conftest import copy_tree, snapshot

WORKER = "copy_worker:CopyOnlyWorker"
STOP_CHECK = "        if not data:\n            return False\n"

#: the demo worker, made to copy blocks only: (old, new) text edits of ``worker.py``
COPY_ONLY = [
    (
        'class Worker(WorkerBase):\n    """A worker class that executes (a partition of) the model.',
        'class CopyOnlyWorker(WorkerBase):\n    """A worker whose KV cache blocks are copied, never swapped.',
    ),
    (
        "        # `blocks_to_swap_in` and `blocks_to_swap_out` are host tensors.\n"
        "        blocks_to_swap_in = torch.tensor(\n"
        '            execute_model_req.blocks_to_swap_in, device="cpu", dtype=torch.int64\n'
        "        ).view(-1, 2)\n"
        "        blocks_to_swap_out = torch.tensor(\n"
        '            execute_model_req.blocks_to_swap_out, device="cpu", dtype=torch.int64\n'
        "        ).view(-1, 2)\n",
        "",
    ),
    (
        '            "blocks_to_swap_in": blocks_to_swap_in,\n'
        '            "blocks_to_swap_out": blocks_to_swap_out,\n',
        "",
    ),
    (
        '        blocks_to_swap_in = data.get("blocks_to_swap_in")\n'
        '        blocks_to_swap_out = data.get("blocks_to_swap_out")\n',
        "",
    ),
    (
        "self.cache_swap(blocks_to_swap_in, blocks_to_swap_out, blocks_to_copy)",
        "self.cache_copy(blocks_to_copy)",
    ),
    (
        "self.cache_swap(blocks_to_swap_in, blocks_to_swap_out, blocks_to_copy)",
        "self.cache_copy(blocks_to_copy)",
    ),
    (
        "    def cache_swap(\n"
        "        self,\n"
        "        blocks_to_swap_in: Optional[torch.Tensor],\n"
        "        blocks_to_swap_out: Optional[torch.Tensor],\n"
        "        blocks_to_copy: Optional[torch.Tensor],\n"
        "    ) -> None:\n"
        "        # Issue cache operations.\n"
        "        if blocks_to_swap_in is not None and blocks_to_swap_in.numel() > 0:\n"
        "            self.cache_engine.swap_in(blocks_to_swap_in)\n"
        "        if blocks_to_swap_out is not None and blocks_to_swap_out.numel() > 0:\n"
        "            self.cache_engine.swap_out(blocks_to_swap_out)\n",
        "    def cache_copy(self, blocks_to_copy: Optional[torch.Tensor]) -> None:\n",
    ),
]


def two_workers(target: Path, *more: tuple[str, str]) -> Path:
    """The legacy engine with ``copy_worker.py`` beside it (``more``: further edits of it)."""
    work = copy_tree(engine_source_dir("legacy"), target)
    text = (work / "worker.py").read_text()
    for old, new in [*COPY_ONLY, *more]:
        assert old in text, old
        text = text.replace(old, new, 1)
    (work / "copy_worker.py").write_text(text)
    return work


def migrate_json(work: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.chdir(work)
    result = migrate_cli("--format", "json", ".")
    assert result.code == 0, result.err
    return json.loads(result.out)


def worker_notes(data: dict) -> list[tuple[str, int, str]]:
    return [(n["path"], n["line"], n["message"]) for g in data["groups"] for n in g["notes"]]


def methods_of(path: Path, name: str) -> list[str]:
    tree = ast.parse(path.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    return [n.name for n in cls.body if isinstance(n, ast.FunctionDef)]


def line_of(path: Path, *texts: str) -> int:
    """The line of the last of ``texts``, each found after the one before."""
    lines = path.read_text().splitlines()
    at = 0
    for text in texts:
        at = next(i for i in range(at, len(lines)) if text in lines[i])
    return at + 1


@pytest.fixture(scope="module")
def hoisted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    from runnercheck.cli import main

    root = tmp_path_factory.mktemp("hoist")
    before = two_workers(root / "before")
    after = copy_tree(before, root / "after")
    out = root / "out.json"
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["migrate", "--format", "json", str(after)]) == 0
    out.write_text(buffer.getvalue())
    return before, after, json.loads(buffer.getvalue())


def test_two_workers_that_differ_only_in_what_they_send_share_one_base(
    hoisted: tuple[Path, Path, dict],
) -> None:
    _, after, data = hoisted
    assert data["refusals"] == []
    base = (after / "worker_base.py").read_text()
    assert "class LocalOrDistributedWorkerBase(WorkerBase):" in base
    assert methods_of(after / "worker_base.py", "LocalOrDistributedWorkerBase") == [
        "prepare_worker_input",
        "execute_worker",
        "execute_model",
        "start_worker_execution_loop",
        "_execute_model_non_driver",
    ]
    # the step once, in the base: one broadcast and one receive
    assert base.count("broadcast_tensor_dict(data, src=0)") == 1
    assert base.count("broadcast_tensor_dict(src=0)") == 1
    for path, name in (("worker.py", "Worker"), ("copy_worker.py", "CopyOnlyWorker")):
        own = methods_of(after / path, name)
        assert "execute_model" not in own and "_execute_model_non_driver" not in own
        assert {"prepare_worker_input", "execute_worker"} <= set(own)
        text = (after / path).read_text()
        assert f"class {name}(LocalOrDistributedWorkerBase):" in text
        assert "broadcast_tensor_dict" not in text
    # what each sends and does stays its own
    assert "self.cache_swap(" in (after / "worker.py").read_text()
    copy_only = (after / "copy_worker.py").read_text()
    assert "self.cache_copy(worker_input.blocks_to_copy)" in copy_only
    assert "blocks_to_swap_in" not in copy_only
    # one worker input, its field types the workers' own
    created = "\n".join(p.read_text() for p in after.glob("*.py"))
    assert created.count("class WorkerInput") == 1
    assert "num_seq_groups: int" in (after / "worker_input.py").read_text()
    assert check_paths([after]).findings == []


def test_a_worker_whose_step_differs_keeps_its_own_with_a_note(
    hoisted: tuple[Path, Path, dict],
) -> None:
    _, after, data = hoisted
    assert "execute_model" in methods_of(after / "cpu_worker.py", "CPUWorker")
    notes = [n for n in worker_notes(data) if "keeps its own" in n[2]]
    assert len(notes) == 1
    path, line, message = notes[0]
    assert path.endswith("cpu_worker.py")
    assert message.startswith("CPUWorker keeps its own execute_model: its driver broadcasts")
    assert "returns `None`" in message and "CopyOnlyWorker's driver" in message
    # the line of the rewritten file
    assert f"(cpu_worker.py:{line})" in message
    assert line == line_of(
        after / "cpu_worker.py",
        "def execute_model",
        "if self.is_driver_worker:",
        "if execute_model_req is None:",
    )


def test_a_second_run_changes_nothing(
    hoisted: tuple[Path, Path, dict], migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, after, _ = hoisted
    before = snapshot(after)
    monkeypatch.chdir(after)
    assert migrate_cli(".").code == 0
    assert snapshot(after) == before


@pytest.mark.slow
def test_the_shared_step_gives_the_legacy_tokens_at_tp_2(
    hoisted: tuple[Path, Path, dict],
) -> None:
    before, after, _ = hoisted
    legacy = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(before), worker=WORKER)
    merged = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(after), worker=WORKER)
    assert (legacy["broadcasts_per_step"], merged["broadcasts_per_step"]) == (2, 1)
    assert merged["num_tokens"] == legacy["num_tokens"] > 0
    assert merged["tokens_sha256"] == legacy["tokens_sha256"]


@pytest.mark.slow
def test_the_demo_worker_on_the_shared_step_gives_the_legacy_tokens_at_tp_2(
    hoisted: tuple[Path, Path, dict],
) -> None:
    before, after, _ = hoisted
    legacy = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(before))
    merged = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(after))
    assert (legacy["broadcasts_per_step"], merged["broadcasts_per_step"]) == (2, 1)
    assert merged["tokens_sha256"] == legacy["tokens_sha256"]


def test_a_second_worker_that_never_checks_the_stop_signal_is_not_hoisted(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = two_workers(tmp_path / "engine", (STOP_CHECK, ""))
    data = migrate_json(work, migrate_cli, monkeypatch)
    assert data["refusals"] == []
    assert "LocalOrDistributedWorkerBase" not in (work / "worker_base.py").read_text()
    for path, name in (("worker.py", "Worker"), ("copy_worker.py", "CopyOnlyWorker")):
        assert "execute_model" in methods_of(work / path, name)
    notes = {Path(p).name: (n, m) for p, n, m in worker_notes(data) if "keeps its own" in m}
    assert set(notes) == {"copy_worker.py", "worker.py", "cpu_worker.py"}
    line, message = notes["copy_worker.py"]
    receive = line_of(work / "copy_worker.py", "data = broadcast_tensor_dict(src=0)")
    assert line == receive  # a line of the rewritten file, cited in the text as well
    assert message == (
        "CopyOnlyWorker keeps its own execute_model: its non-driver path never checks the "
        f"stop signal (copy_worker.py:{receive}), Worker's non-driver path leaves on the "
        "stop signal returning `False`"
    )


@pytest.mark.slow
def test_a_shared_step_that_does_not_verify_is_not_written(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planted second broadcast in the base fails the re-check (more than one
    broadcast per step): every worker keeps its own step, and the run says why."""
    work = two_workers(tmp_path / "engine")
    with_base = worker_hoist.with_base

    def planted(module: cst.Module, hoist: worker_hoist.Hoist) -> cst.Module:
        code = with_base(module, hoist).code
        send = "        broadcast_tensor_dict(data, src=0)\n"
        assert send in code
        return cst.parse_module(code.replace(send, send * 2, 1))

    monkeypatch.setattr(worker_hoist, "with_base", planted)
    assert rewrite.worker_hoist is worker_hoist
    data = migrate_json(work, migrate_cli, monkeypatch)
    assert data["refusals"] == []
    assert "LocalOrDistributedWorkerBase" not in (work / "worker_base.py").read_text()
    assert "execute_model" in methods_of(work / "copy_worker.py", "CopyOnlyWorker")
    said = [n["message"] for n in data["notes"] if n["pair"] == "worker-base"]
    assert len(said) == 1 and "the shared step did not verify" in said[0], said
    assert check_paths([work]).findings == []
