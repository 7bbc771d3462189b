"""Real round trips through gloo process groups on 127.0.0.1: good classes pass, each
defect is caught with its code, field and minimal example, and nothing hangs.

Groups come from the plugin's session-wide pool (``roundtrip_groups``), so the ranks
start once per (world size, deadline) for the whole test run."""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import strategies as st

from runnercheck.config import Config
from runnercheck.fuzz import ClassResult, FuzzOptions, Target, fuzz
from runnercheck.fuzz.strategies import register_strategy, unregister_strategy
from tests.fuzz.fixtures import defects, good
from tests.fuzz.fixtures.annotated import Everything

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = Path(__file__).parent / "expected"
SEED = 3


def run_one(
    group: Any, cls: type, examples: int = 40, seed: int = SEED, **options: Any
) -> ClassResult:
    settings = group.settings
    report = fuzz(
        [Target(cls, f"{cls.__module__}:{cls.__qualname__}")],
        FuzzOptions(
            settings.world_size, settings.device, examples, seed, settings.deadline, **options
        ),
        Config(),
        group,
    )
    return report.results[0]


@pytest.fixture
def group2(roundtrip_groups: Any) -> Any:
    return roundtrip_groups.get(2, "cpu", 10.0)


@pytest.mark.parametrize("cls", [good.ModelInput, good.ModelInputWithSampling, Everything])
def test_good_classes_round_trip(group2: Any, cls: type) -> None:
    result = run_one(group2, cls, examples=60)
    assert result.problems == []
    assert result.examples == 60


def test_attention_backend_is_passed_to_receivers(group2: Any) -> None:
    # without one, a stand-in rebuilds the annotated metadata class (test_static_facts)
    without = run_one(group2, good.FlatAttentionInput, examples=60)
    assert without.passed
    with_backend = run_one(group2, good.FlatAttentionInput, attn_backend=good.FlatBackend)
    assert with_backend.passed
    refused = run_one(group2, good.FlatAttentionInput, attn_backend=defects.RefusingBackend)
    assert refused.codes == ["RC302"]
    assert "this backend rebuilds no metadata" in refused.problems[0].message


DEFECTS = [
    (
        defects.DroppedField,
        "RC301",
        "lora_requests",
        "sent set(), received None (the field's default)",
        "DroppedField(lora_requests=set())",
    ),
    (
        defects.RecursiveFromDict,
        "RC302",
        "",
        "from_broadcasted_tensor_dict raised RecursionError: "
        "maximum recursion depth exceeded at tests/fuzz/fixtures/defects.py:34 in from_broadcasted_tensor_dict",
        "RecursiveFromDict()",
    ),
    (
        defects.UnknownKey,
        "RC302",
        "num_prefills",
        "got an unexpected keyword argument 'num_prefills'",
        "UnknownKey()",
    ),
    (
        defects.DtypeChanged,
        "RC303",
        "input_positions",
        "dtype int64 -> int32",
        "DtypeChanged(input_positions=tensor(0, int64, shape (), cpu))",
    ),
    (
        defects.MutatesSender,
        "RC305",
        "request_ids_to_seq_ids",
        "as_broadcastable_tensor_dict() changed the sender's object: {} (dict) -> None",
        "MutatesSender(request_ids_to_seq_ids={})",
    ),
]


@pytest.mark.parametrize(
    ("cls", "code", "field", "message", "example"), DEFECTS, ids=[d[0].__name__ for d in DEFECTS]
)
def test_each_defect_is_caught_with_a_minimal_example(
    group2: Any, cls: type, code: str, field: str, message: str, example: str
) -> None:
    result = run_one(group2, cls)
    first = result.problems[0]
    assert (first.code, first.field) == (code, field)
    assert message in first.message
    assert result.example == example
    assert result.shrunk


def test_nondeterministic_conversion(group2: Any) -> None:
    result = run_one(group2, defects.Nondeterministic)
    assert "RC304" in result.codes
    assert any("two calls of as_broadcastable_tensor_dict()" in p.message for p in result.problems)


def test_a_failure_that_does_not_come_back_is_reported_unshrunk(group2: Any) -> None:
    result = run_one(group2, defects.FailsOnce, examples=10)
    assert sorted(result.codes) == ["RC302", "RC304"]
    assert any("only the third time" in p.message for p in result.problems)
    assert any("did not reproduce" in p.message for p in result.problems)
    assert result.example.startswith("FailsOnce(")
    assert not result.shrunk


def test_seed_replays_the_same_minimal_example(group2: Any) -> None:
    first = run_one(group2, defects.DtypeChanged, seed=11)
    again = run_one(group2, defects.DtypeChanged, seed=11)
    assert (first.examples, first.example, first.problems) == (
        again.examples,
        again.example,
        again.problems,
    )


SEARCH = importlib.import_module("runnercheck.fuzz.search")


def _sent(group: Any, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The examples handed to rank 0 from now on, in order."""
    sent: list[bytes] = []
    submit = group.submit

    def recording(payload: bytes) -> None:
        sent.append(payload)
        submit(payload)

    monkeypatch.setattr(group, "submit", recording)
    return sent


def test_the_search_ahead_sends_the_examples_it_sends_in_step(
    group2: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a fixed seed, Hypothesis's next example depends only on the examples before
    it and their outcomes, not on when those outcomes are judged."""
    sent = _sent(group2, monkeypatch)
    ahead = run_one(group2, good.ModelInputWithSampling, examples=50)
    in_order = list(sent)
    sent.clear()
    monkeypatch.setattr(SEARCH, "LOOKAHEAD", 0)
    in_step = run_one(group2, good.ModelInputWithSampling, examples=50)
    assert ahead.passed and in_step.passed
    assert len(in_order) == 50
    assert sent == in_order


@pytest.mark.parametrize(
    ("cls", "code", "field", "message", "example"), DEFECTS, ids=[d[0].__name__ for d in DEFECTS]
)
def test_a_problem_found_ahead_is_reported_as_in_step(
    group2: Any,
    monkeypatch: pytest.MonkeyPatch,
    cls: type,
    code: str,
    field: str,
    message: str,
    example: str,
) -> None:
    """A problem found while several examples are out is searched again in step: the
    same problems, minimal example, shrinking and count of examples as a search that
    never ran ahead."""
    sent = _sent(group2, monkeypatch)
    ahead = run_one(group2, cls)
    sent_ahead = len(sent)
    sent.clear()
    monkeypatch.setattr(SEARCH, "LOOKAHEAD", 0)
    in_step = run_one(group2, cls)
    assert (ahead.problems, ahead.example, ahead.shrunk, ahead.examples) == (
        in_step.problems,
        in_step.example,
        in_step.shrunk,
        in_step.examples,
    )
    assert ahead.example == example
    # the search ahead stopped at the problem and ran again: more examples sent in all
    assert sent_ahead > len(sent)


@pytest.mark.slow
def test_blocking_rank_is_reported_within_the_deadline(roundtrip_groups: Any) -> None:
    group = roundtrip_groups.get(2, "cpu", 2.0)
    group.start()
    started = time.monotonic()
    result = run_one(group, defects.BlocksForever)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0 + 7.0, elapsed  # deadline, 2 s grace, stack dumps, a loaded machine
    [problem] = result.problems
    assert problem.code == "RC306" and problem.ranks == (1,)
    assert problem.message == (
        "rank 1 did not finish within the deadline of 2 s; it was busy at "
        "tests/fuzz/fixtures/defects.py:118 in from_broadcasted_tensor_dict"
    )
    assert "not shrunk" in result.note
    # the same group object starts afresh for the next class
    assert run_one(group, good.ModelInput, examples=10).passed


@pytest.mark.slow
def test_a_rank_that_blocks_with_examples_still_out_is_reported(roundtrip_groups: Any) -> None:
    """Three examples are all out when the search ends; a rank that blocks on one of
    them loses the group while the later ones are still out, and that is reported as
    such (nothing is collected from the group that is gone)."""
    group = roundtrip_groups.get(2, "cpu", 2.0)
    result = run_one(group, defects.BlocksEveryTime, examples=3)
    [problem] = result.problems
    assert problem.code == "RC306" and problem.ranks == (1,)
    assert problem.message.startswith("rank 1 did not finish within the deadline of 2 s")


@pytest.mark.slow
def test_a_rank_lost_on_an_example_newer_than_a_failure_is_not_reported(
    roundtrip_groups: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search ahead finds a failure while newer examples are out, and a rank blocks
    on one of those: a search in step never sends it, so the group starts again and the
    search in step reports what it finds, the failure shrunk."""
    group = roundtrip_groups.get(2, "cpu", 2.0)
    group.start()
    restarts = group.restarts
    ahead = run_one(group, defects.FailsOrBlocks, examples=5)
    assert group.restarts == restarts + 1  # a newer example did block the rank
    monkeypatch.setattr(SEARCH, "LOOKAHEAD", 0)
    in_step = run_one(group, defects.FailsOrBlocks, examples=5)
    assert group.restarts == restarts + 1
    assert [p.code for p in ahead.problems] == ["RC302"]
    assert "virtual engine 0 is refused" in ahead.problems[0].message
    assert (ahead.problems, ahead.example, ahead.shrunk) == (
        in_step.problems,
        in_step.example,
        in_step.shrunk,
    )
    assert ahead.shrunk


@pytest.mark.timeout(120)  # a deadlock here would wait forever
def test_examples_larger_than_a_pipe_do_not_deadlock(
    roundtrip_groups: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search runs ahead only while the examples out fit in rank 0's pipe: with
    three out and examples (and answers) larger than the pipes' buffers, writing one
    more while rank 1 blocks writing its answer would leave every process waiting."""
    monkeypatch.setattr(importlib.import_module("runnercheck.fuzz.search"), "LOOKAHEAD", 4)
    group = roundtrip_groups.get(2, "cpu", 5.0)
    big = torch.arange(1 << 17, dtype=torch.float32)  # 512 KiB, and as much in each answer
    register_strategy("ModelInput.input_tokens", st.just(big))
    try:
        result = run_one(group, good.ModelInput, examples=12)
    finally:
        unregister_strategy("ModelInput.input_tokens")
    assert result.problems == []
    assert result.examples == 12


def test_dead_rank_is_reported(roundtrip_groups: Any) -> None:
    group = roundtrip_groups.get(2, "cpu", 2.0)
    result = run_one(group, defects.KillsReceiver)
    assert [(p.code, p.ranks, p.message) for p in result.problems] == [
        ("RC306", (1,), "rank 1 died: it exited with status 7")
    ]


def test_raising_on_one_rank_only(roundtrip_groups: Any) -> None:
    group = roundtrip_groups.get(3, "cpu", 10.0)
    result = run_one(group, defects.RaisesOnLastRank)
    [problem] = result.problems
    assert (problem.code, problem.ranks) == ("RC302", (2,))
    assert "RuntimeError: no cache engine for this virtual engine" in problem.message
    assert result.example == "RaisesOnLastRank(virtual_engine=1)"


def test_roundtrip_fixture(roundtrip: Any) -> None:
    assert roundtrip(good.ModelInputWithSampling, examples=20, deadline=10.0).passed
    with pytest.raises(AssertionError, match="RC301 roundtrip-lost-field") as info:
        roundtrip(defects.DroppedField, examples=40, seed=SEED, deadline=10.0)
    assert "minimal example: DroppedField(lora_requests=set())" in str(info.value)
    with pytest.raises(TypeError, match="not an input class"):
        roundtrip(good.Phase)


# ------------------------------------------------------------------ the command line


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "fuzz", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, **(env or {})},
    )


def test_cli_report_matches_expected_output() -> None:
    done = _cli(
        "tests.fuzz.fixtures.good:ModelInput",
        "tests.fuzz.fixtures.defects:DroppedField",
        "--examples",
        "40",
        "--seed",
        str(SEED),
    )
    assert done.returncode == 1, done.stderr
    text = re.sub(r"after \d+ examples", "after N examples", done.stdout)
    assert text == (EXPECTED / "cli_dropped_field.txt").read_text()


def test_cli_runs_the_exit_handlers_once(tmp_path: Path) -> None:
    record = tmp_path / "at_exit.txt"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runnercheck",
            "fuzz",
            "tests.fuzz.fixtures.at_exit:Registered",
            "--examples",
            "3",
            "--world-size",
            "1",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RUNNERCHECK_TEST_AT_EXIT": str(record)},
    )
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0, stderr
    assert stdout.rstrip().endswith("all 1 class passed")
    # the command's own handler, once (the trial import and the rank end without theirs)
    assert record.read_text().split() == [str(proc.pid)]


@pytest.mark.slow
def test_cli_json_and_usage_errors() -> None:
    done = _cli(
        "tests.fuzz.fixtures.defects:UnknownKey",
        "--examples",
        "20",
        "--seed",
        "5",
        "--format",
        "json",
        "--world-size",
        "1",
    )
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    [result] = data["results"]
    assert [(p["code"], p["field"], p["ranks"]) for p in result["problems"]] == [
        ("RC302", "num_prefills", [0])
    ]
    assert result["replay"].endswith("--seed 5 --world-size 1 --examples 20")
    for args, message in [
        (["no_such_module_xyz:X"], "cannot import module 'no_such_module_xyz': no such module"),
        (
            ["tests.fuzz.fixtures.good:ModelInput", "--world-size", "0"],
            "--world-size must be between 1 and 64, not 0",
        ),
        (["tests.fuzz.fixtures.annotated:NeedsStrategy"], "cannot generate NeedsStrategy.handle"),
    ]:
        done = _cli(*args)
        assert done.returncode == 2
        assert done.stderr.startswith(f"runnercheck: error: {message}"), done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_under_torchrun() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "runnercheck",
            "fuzz",
            "tests.fuzz.fixtures.defects:DtypeChanged",
            "--examples",
            "30",
            "--seed",
            str(SEED),
            "--deadline",
            "20",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"},
    )
    assert "FAIL tests.fuzz.fixtures.defects:DtypeChanged" in done.stdout, done.stdout + done.stderr
    assert "field 'input_positions': dtype int64 -> int32" in done.stdout
    assert (
        "minimal example: DtypeChanged(input_positions=tensor(0, int64, shape (), cpu))"
        in done.stdout
    )


def _processes_with(token: str, watchdog: bool = False) -> list[int]:
    """The processes whose environment holds ``token`` (with ``watchdog``, also the
    command's watchdog, which keeps its deadline in a process of its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes() and (
                watchdog
                or b"runnercheck.processes import watch" not in (entry / "cmdline").read_bytes()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_ctrl_c_reaps_every_rank() -> None:
    token = f"RUNNERCHECK_TEST_RUN={os.getpid()}-{time.monotonic_ns()}"
    key, value = token.split("=")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runnercheck",
            "fuzz",
            "tests.fuzz.fixtures.defects:BlocksForever",
            "--deadline",
            "120",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, key: value},
        # a suite started in the background inherits SIGINT ignored; the CLI must not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 60
        while len(_processes_with(token)) < 3 and time.monotonic() < deadline:  # cli, 2 ranks
            time.sleep(0.2)
        time.sleep(1.0)  # rank 1 is now blocked in from_broadcasted_tensor_dict
        running = _processes_with(token)
        # the ranks, forked from the command itself (no fork server importing torch again)
        assert sorted(_parent(pid) for pid in running if pid != proc.pid) == [proc.pid] * 2
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert stderr.strip().endswith("runnercheck: interrupted")
    deadline = time.monotonic() + 10
    while _processes_with(token, watchdog=True) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(token, watchdog=True) == []
