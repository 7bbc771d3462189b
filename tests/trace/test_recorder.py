"""The recorder in this process, on a real one-rank gloo group: steps, logical broadcasts,
contract methods, call sites, bytes."""

from __future__ import annotations

import inspect
import pickle
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.distributed as dist

from runnercheck.trace import Recorder, RecorderOptions
from runnercheck.trace.records import CollectiveRecord

HERE = "tests/trace/test_recorder.py"


@pytest.fixture(scope="module")
def one_rank_group() -> Iterator[None]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def broadcast_tensor_dict(tensor_dict: dict[str, Any]) -> None:
    """Stands for the real one (which sends nothing on one rank): metadata, then tensors."""
    dist.broadcast_object_list([list(tensor_dict)], src=0)
    for value in tensor_dict.values():
        dist.broadcast(value, src=0)


class Runner:
    def prepare_model_input(self) -> None:
        dist.all_reduce(torch.ones(3))  # LINE: prepare

    def execute_model(self) -> None:
        dist.all_reduce(torch.ones(2, 4))  # LINE: execute


class Worker:
    def __init__(self) -> None:
        self.model_runner = Runner()

    def execute_model(self, prepare: bool) -> None:
        if prepare:
            self.model_runner.prepare_model_input()
        broadcast_tensor_dict({"a": torch.zeros(5, dtype=torch.int64)})  # LINE: broadcast
        self.model_runner.execute_model()


class Wrapper:
    """A worker whose step runs two inner workers' steps."""

    def __init__(self) -> None:
        self.inner = [Worker(), Worker()]

    def execute_model(self) -> None:
        dist.broadcast_object_list([{"control": 1}], src=0)  # LINE: control
        for worker in self.inner:
            worker.execute_model(False)


def line(tag: str) -> str:
    source = inspect.getsource(inspect.getmodule(line)).splitlines()  # type: ignore[arg-type]
    number = next(i for i, text in enumerate(source, 1) if f"# LINE: {tag}" in text)
    return f"{HERE}:{number}"


def test_steps_logical_broadcasts_methods_and_sites(one_rank_group: None) -> None:
    worker = Worker()
    original = dist.all_reduce
    with Recorder() as recorder:
        assert dist.all_reduce is not original
        worker.execute_model(prepare=True)
        worker.execute_model(prepare=False)
        dist.barrier()
    records = recorder.records()
    assert [(r.step, r.op, r.logical, r.kind) for r in records] == [
        (0, "all_reduce", -1, "prepare"),
        (0, "broadcast_object_list", 0, "worker"),
        (0, "broadcast", 0, "worker"),
        (0, "all_reduce", -1, "execute"),
        (1, "broadcast_object_list", 1, "worker"),
        (1, "broadcast", 1, "worker"),
        (1, "all_reduce", -1, "execute"),
        (-1, "barrier", -1, ""),
    ]
    by_index = {r.index: r for r in records}
    assert by_index[0].site == line("prepare")
    assert by_index[0].method == "Runner.prepare_model_input"
    assert by_index[0].shape == "float32:3" and by_index[0].nbytes == 12
    # The parts of a logical broadcast carry the line that called it.
    assert {by_index[i].site for i in (1, 2)} == {line("broadcast")}
    assert by_index[1].logical_name == "broadcast_tensor_dict"
    # Object bytes: what torch pickled, counted inside broadcast_object_list.
    assert by_index[1].nbytes == len(pickle.dumps(["a"])) and by_index[2].nbytes == 40
    assert by_index[3].site == line("execute") and by_index[3].method == "Runner.execute_model"
    assert by_index[3].step_method == "Worker.execute_model"
    # Unwrapped afterwards.
    assert dist.all_reduce is original


def test_a_wrapper_step_holds_its_inner_steps(one_rank_group: None) -> None:
    wrapper = Wrapper()
    with Recorder() as recorder:
        wrapper.execute_model()
        wrapper.execute_model()
    records: list[CollectiveRecord] = recorder.records()
    assert {r.step for r in records} == {0, 1}
    step0 = [r for r in records if r.step == 0]
    assert [(r.op, r.method) for r in step0 if r.op != "broadcast"] == [
        ("broadcast_object_list", "Wrapper.execute_model"),
        ("broadcast_object_list", "Worker.execute_model"),
        ("all_reduce", "Runner.execute_model"),
        ("broadcast_object_list", "Worker.execute_model"),
        ("all_reduce", "Runner.execute_model"),
    ]
    assert step0[0].site == line("control") and step0[0].logical == -1
    assert {r.step_method for r in records} == {"Wrapper.execute_model"}


def test_step_methods_are_configurable(one_rank_group: None) -> None:
    worker = Worker()
    options = RecorderOptions(step_methods=("prepare_model_input",))
    with Recorder(options=options) as recorder:
        worker.execute_model(prepare=True)
        worker.execute_model(prepare=True)
    steps = [(r.step, r.op) for r in recorder.records()]
    assert steps[0] == (0, "all_reduce")
    assert steps[4] == (1, "all_reduce")
    assert all(step == -1 for step, _ in steps[1:4])


def test_each_call_is_timed_on_the_monotonic_clock(one_rank_group: None) -> None:
    worker = Worker()
    before = time.monotonic_ns()
    with Recorder() as recorder:
        worker.execute_model(prepare=True)
    after = time.monotonic_ns()
    records = recorder.records()
    assert len(records) == 4
    times = [t for r in records for t in (r.start_ns, r.end_ns)]
    assert before <= times[0] and times == sorted(times) and times[-1] <= after
    assert all(r.start_ns < r.end_ns for r in records)
