"""The reference broadcast over a real 2-process gloo group, and the counter."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from runnercheck.broadcast import CollectiveCounter, broadcast_tensor_dict, split_tensor_dict


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sample() -> dict[str, Any]:
    return {
        "input_tokens": torch.arange(6, dtype=torch.int64),
        "positions": torch.tensor([[1.5, float("nan")]], dtype=torch.float32),
        "empty": torch.empty(0, 3, dtype=torch.float16),
        "nested": {"a": torch.ones(2, dtype=torch.bool), "b": 3, "c": {}},
        "name": "x",
        "n": 4,
    }


def _worker(rank: int, port: int, queue: Any, received: Any) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        with CollectiveCounter() as counter:
            got = broadcast_tensor_dict(sample() if rank == 0 else None, src=0)
            counter.step()
            got2 = broadcast_tensor_dict({"k": torch.zeros(3)} if rank == 0 else None, src=0)
            counter.step()
        assert got is not None and got2 is not None
        queue.put(
            (
                rank,
                {k: v for k, v in got.items() if k != "nested"},
                got["nested"],
                counter.broadcasts_per_step,
                counter.collectives,
            )
        )
        # tensors travel through the queue as shared memory this process serves: stay
        # until the parent has them
        received.wait(timeout=120)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_round_trip_over_gloo() -> None:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    received = ctx.Event()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, port, queue, received)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        results = {}
        for _ in procs:
            rank, top, nested, per_step, collectives = queue.get(timeout=120)
            results[rank] = (top, nested, per_step, collectives)
    finally:
        received.set()
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    expected = sample()
    top, nested, per_step, collectives = results[1]
    assert torch.equal(top["input_tokens"], expected["input_tokens"])
    assert torch.allclose(top["positions"], expected["positions"], equal_nan=True)
    assert top["empty"].shape == (0, 3) and top["empty"].dtype == torch.float16
    assert top["name"] == "x" and top["n"] == 4
    assert torch.equal(nested["a"], expected["nested"]["a"]) and nested["b"] == 3
    assert nested["c"] == {}
    assert per_step == [1, 1]
    # metadata once per broadcast; one tensor broadcast per non-empty tensor (3, then 1)
    assert collectives["broadcast_object_list"] == 2
    assert collectives["broadcast"] == 4
    assert results[0][2] == [1, 1]


def test_split_rejects_separator_in_key() -> None:
    with pytest.raises(ValueError, match="must be a str without"):
        split_tensor_dict({"a%b": 1})


def test_single_process_passthrough() -> None:
    data = {"x": torch.ones(1)}
    with CollectiveCounter() as counter:
        assert broadcast_tensor_dict(data) is data
        counter.step()
    assert counter.broadcasts_per_step == [1]
