"""The request reads of a legacy execute method (:mod:`runnercheck.analysis.requests`):
where it reads the request besides the preparing call, and what the other ranks read.
The runner is the one of ``test_shapes.py``."""

from __future__ import annotations

from runnercheck.analysis.requests import non_driver_reads, request_reads, request_uses
from runnercheck.contract import VLLM
from tests.analysis.test_shapes import PREPARE, method


def test_the_request_read_after_preparing() -> None:
    func, _ = method(PREPARE, "execute_model")
    reads = request_reads(func, PREPARE.splitlines())
    assert reads is not None and reads.request == "seq_group_metadata_list"
    assert [(u.line, u.passed_to) for u in reads.uses] == [
        (25, "self.prepare_input_tensors"),
        (30, ""),
    ]
    after = request_uses(reads, "prepare_input_tensors")
    assert [(u.line, u.col) for u in after.uses] == [(30, 22)]
    assert after.problem is None


def test_request_columns_are_counted_in_characters() -> None:
    """``ast`` counts UTF-8 bytes; the rewrite (LibCST) counts characters."""
    source = PREPARE.replace(
        "        prompts = len(seq_group_metadata_list)\n",
        '        prompts = ("\u00e9", len(seq_group_metadata_list))[1]\n',
    )
    func, _ = method(source, "execute_model")
    reads = request_reads(func, source.splitlines())
    assert reads is not None
    assert [(u.line, u.col) for u in reads.uses][-1] == (30, 28)


def test_a_rebound_request_is_a_problem() -> None:
    source = PREPARE.replace(
        "        prompts = len(seq_group_metadata_list)\n",
        "        seq_group_metadata_list = []\n        prompts = 0\n",
    )
    func, _ = method(source, "execute_model")
    reads = request_reads(func, source.splitlines())
    assert reads is not None and reads.problem is not None and reads.problem.line == 30


def test_what_the_other_ranks_read() -> None:
    """After ``if not self.is_driver_worker: return``, only the driver runs on."""
    func, _ = method(PREPARE, "execute_model")
    # the first line each is read on (``hidden`` and ``sampling`` only the driver reads)
    assert non_driver_reads(func, VLLM.driver_flag) == {
        "self": 24,
        "seq_group_metadata_list": 24,
        "input_tokens": 27,
        "input_positions": 27,
        "kv_caches": 27,
    }
