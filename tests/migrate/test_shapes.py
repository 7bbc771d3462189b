"""``runnercheck migrate`` on the shapes real engine trees have, each proved on a legacy
variant of the shipped engine (built from its legacy shape and one edit,
``fixtures/variants/<shape>.diff``, see :mod:`tests.migrate.variants`):

* ``after_split``: as vLLM 0.4.x, the attention metadata is assembled after the
  driver split from parts both sides hold;
* ``extra_broadcast``: a conditional second broadcast in the runner, under a
  condition every rank evaluates from what the first one carried;
* ``request_after_prepare``: ``execute_model`` reads the request list again after
  preparing, for a driver-only step;
* ``hardware_subclass``: hardware runners in files of their own subclass the model
  runner, one with its own worker, one driven by no worker of the package;
* ``shared_worker_input``: a hardware worker copied from the GPU worker sends the
  same fields, so both use one worker input in a generated ``worker_input.py``, and
  their steps are the same, so both derive from one generated
  ``LocalOrDistributedWorkerBase`` in ``worker_base.py``.

Each migrates to its golden ``after`` (``<shape>.migrated.diff``) byte for byte, a second run changes nothing,
``check`` finds nothing on the result, and (slow) at TP 2 the migrated variant
computes the same tokens as the legacy one with one broadcast per step.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck import catalog
from runnercheck.check import check_paths
from runnercheck.demo.engine import run_engine
from tests.migrate import variants
from tests.migrate.conftest import FIXTURES, copy_tree, snapshot

REPO = Path(__file__).resolve().parents[2]
SHAPES = (
    "after_split",
    "extra_broadcast",
    "request_after_prepare",
    "hardware_subclass",
    "shared_worker_input",
    "twin_inputs",
)
#: the worker each variant runs with (``module:Class`` of its package)
WORKERS = {
    "hardware_subclass": "xpu_worker:XPUWorker",
    "shared_worker_input": "hpu_worker:HPUWorker",
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_variant_migrates_to_its_golden_files(shape: str, tmp_path: Path, migrate_cli) -> None:
    work = variants.write(variants.before(shape), tmp_path / shape)
    result = migrate_cli(str(work))
    assert result.code == 0, result.out + result.err
    assert ": MIG" not in result.out, result.out
    assert snapshot(work) == variants.snapshot(variants.after(shape))


@pytest.mark.parametrize("shape", SHAPES)
def test_golden_result_is_check_clean_and_stable(shape: str, tmp_path: Path, migrate_cli) -> None:
    legacy = variants.write(variants.before(shape), tmp_path / "before" / shape)
    assert {f.code for f in check_paths([legacy]).findings} == {"RC106"}
    work = variants.write(variants.after(shape), tmp_path / shape)
    assert check_paths([work]).findings == []
    again = migrate_cli(str(work))
    assert again.code == 0, again.out
    assert snapshot(work) == variants.snapshot(variants.after(shape))


def test_after_split_statements_run_where_every_rank_has_the_input() -> None:
    after = variants.after("after_split")["model_runner.py"]
    execute = after.split("    def execute_model(")[1]
    # the assembly every rank ran after the split opens execute_model, from the fields
    assert execute.split("\n\n")[0].count("model_input.") >= 9
    assert "attn_metadata = self.attn_backend.make_metadata(" in execute
    prepare = after.split("    def prepare_model_input(")[1].split("    def ")[0]
    assert "make_metadata" not in prepare


def test_extra_broadcast_travels_in_the_one_dict_under_a_prefix() -> None:
    after = variants.after("extra_broadcast")["model_runner.py"]
    assert after.count("broadcast_tensor_dict(") == 0
    as_dict = after.split("def as_broadcastable_tensor_dict")[1].split("@classmethod")[0]
    assert '"multi_modal_kwargs." + key' in as_dict
    from_dict = after.split("def from_broadcasted_tensor_dict")[1]
    # taken out before anything spreads the rest of the dict into the metadata
    assert from_dict.index('key.startswith("multi_modal_kwargs.")') < from_dict.index(
        "make_metadata(**tensor_dict)"
    )


def test_request_read_after_preparing_is_a_driver_only_field() -> None:
    after = variants.after("request_after_prepare")["model_runner.py"]
    # as in vLLM: left out of the broadcast dict, said in a comment, no marker
    assert (
        "    # Driver-only: set by prepare_model_input; the other ranks get None.\n"
        "    seq_group_metadata_list: Optional[List[SequenceGroupMetadata]] = None\n"
    ) in after
    assert "metadata={" not in after
    assert "seq_group_metadata_list=seq_group_metadata_list," in after
    execute = after.split("    def execute_model(")[1].split("    def ")[0]
    assert "self._count_prompts(\n            model_input.seq_group_metadata_list\n" in execute


def test_hardware_runners_migrate_with_their_parent() -> None:
    after = variants.after("hardware_subclass")
    for name in ("xpu_model_runner.py", "hpu_model_runner.py"):
        text = after[name]
        assert "model_input: ModelRunnerInput," in text, name
        assert "prepare_input_tensors" not in text, name


def test_a_refusal_names_the_line_the_shape_and_every_runner_held_back(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    """An extra broadcast whose condition the other ranks cannot evaluate: refused at
    that line, with what to change, and the whole group (the hardware runners in
    other files too) left byte-identical."""
    work = variants.write(variants.before("hardware_subclass"), tmp_path / "engine")
    runner = work / "model_runner.py"
    text = runner.read_text()
    driver_send = "            broadcast_tensor_dict(metadata_dict, src=0)\n"
    receive = '            lora_requests = broadcast_data.pop("lora_requests")\n'
    assert driver_send in text and receive in text
    text = text.replace(
        driver_send,
        driver_send + "            if self.lora_config:\n"
        "                broadcast_tensor_dict({'extra': 1}, src=0)\n",
    ).replace(
        receive,
        receive + "            if self.lora_config:\n"
        "                extra = broadcast_tensor_dict(src=0)\n",
    )
    runner.write_text(text)
    before = snapshot(work)
    line = text.splitlines().index("            if self.lora_config:") + 1
    monkeypatch.chdir(work)
    result = migrate_cli(".")
    assert snapshot(work) == before
    lines = result.out.splitlines()
    at = next(i for i, t in enumerate(lines) if ": MIG101" in t)
    assert lines[at].startswith(f"model_runner.py:{line}: MIG101 [merge-broadcasts]")
    assert "runner state (`self`)" in lines[at]
    assert lines[at + 1] == "    shape: conditional extra broadcast"
    assert lines[at + 2].startswith("    by hand: ")
    held = lines[at + 3]
    for name in ("Worker (worker.py)", "ModelRunner (model_runner.py)",
                 "XPUModelRunner (xpu_model_runner.py)", "HPUModelRunner (hpu_model_runner.py)"):  # fmt: skip
        assert name in held, held
    data = json.loads(migrate_cli("--format", "json", ".").out)
    refusal = next(r for r in data["refusals"] if r["code"] == "MIG101")
    assert refusal["line"] == line
    assert refusal["shape"] == "conditional extra broadcast"
    assert refusal["advice"] and "HPUModelRunner (hpu_model_runner.py)" in refusal["held_back"]


@pytest.mark.parametrize(
    ("edit", "shape", "code"),
    [
        # a statement after the split reads the request, which the other ranks lack
        (
            (
                "        # Every rank assembles the attention metadata from the parts.\n",
                "        # Every rank assembles the attention metadata from the parts.\n"
                "        assert seq_group_metadata_list is not None\n",
            ),
            "statements after the driver split",
            "MIG105",
        ),
    ],
)
def test_an_after_split_statement_that_reads_the_request_is_refused_at_its_line(
    edit: tuple[str, str], shape: str, code: str, tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = variants.write(variants.before("after_split"), tmp_path / "engine")
    runner = work / "model_runner.py"
    text = runner.read_text()
    assert edit[0] in text
    text = text.replace(*edit)
    runner.write_text(text)
    line = text.splitlines().index("        assert seq_group_metadata_list is not None") + 1
    before = snapshot(work)
    monkeypatch.chdir(work)
    data = json.loads(migrate_cli("--format", "json", ".").out)
    assert snapshot(work) == before
    refusal = next(r for r in data["refusals"] if r["code"] == code)
    assert (refusal["path"], refusal["line"], refusal["shape"]) == ("model_runner.py", line, shape)
    assert "seq_group_metadata_list" in refusal["message"]


PLUGIN_CODES = {rule.name for rule in catalog.for_tool("mypy")}


@pytest.mark.slow
def test_migrated_variants_are_mypy_clean_with_the_plugin(tmp_path: Path) -> None:
    for shape in SHAPES:
        variants.write(variants.after(shape), tmp_path / shape)
    (tmp_path / "mypy.ini").write_text("[mypy]\nplugins = mypy_plugin\n")
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--config-file", "mypy.ini",
            "--cache-dir", ".mypy_cache", "--show-error-codes", *SHAPES,
        ],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert "runnercheck mypy plugin: error" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
def test_migrated_variant_computes_the_same_tokens_with_one_broadcast(
    shape: str, tmp_path: Path
) -> None:
    before = variants.write(variants.before(shape), tmp_path / "before")
    after = variants.write(variants.after(shape), tmp_path / "after")
    worker = WORKERS.get(shape, "default")
    legacy = run_engine(None, tp=2, steps=6, seed=3, engine_dir=str(before), worker=worker)
    merged = run_engine(None, tp=2, steps=6, seed=3, engine_dir=str(after), worker=worker)
    assert legacy["broadcasts_per_step"] >= 2
    if shape == "extra_broadcast":  # the extra broadcast did run on some steps
        assert legacy["broadcasts_per_step"] > 2
    assert merged["broadcasts_per_step"] == 1
    assert merged["num_tokens"] == legacy["num_tokens"] > 0
    assert merged["tokens_sha256"] == legacy["tokens_sha256"]


def test_behaviour_changes_and_carried_over_latent_bugs_are_notes_at_their_lines(
    tmp_path: Path, migrate_cli, monkeypatch
) -> None:
    work = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    monkeypatch.chdir(work)
    data = json.loads(migrate_cli("--check", "--format", "json", ".").out)
    notes = {
        (n["path"], n["line"]): n["message"]
        for g in data["groups"]
        for r in g["runners"]
        for n in r["notes"]
    }
    # notes cite lines of the rewritten files (the golden ones)
    after = FIXTURES / "engine" / "after"
    runner = (after / "model_runner.py").read_text().splitlines()
    profile = next(
        i
        for i, t in enumerate(runner, 1)
        if "self.execute_model(self.prepare_model_input(dummy_groups)" in t
    )
    assert "does not broadcast" in notes[("model_runner.py", profile)]
    cpu = (after / "cpu_model_runner.py").read_text().splitlines()
    read = next(i for i, t in enumerate(cpu, 1) if "= self.model(" in t)
    assert "never broadcast" in notes[("cpu_model_runner.py", read)]
    pooling = (after / "pooling_model_runner.py").read_text().splitlines()
    subclass = next(
        i for i, t in enumerate(pooling, 1) if t.startswith("class PoolingModelRunner(")
    )
    assert "no longer holds" in notes[("pooling_model_runner.py", subclass)]
    assert len(notes) == 3
    # the workers' loop exit on a step the driver does not end is a note at its line
    worker = (after / "worker.py").read_text().splitlines()
    exits = [
        i
        for i, t in enumerate(worker, 1)
        if t.strip() == "return False" and "if not " not in worker[i - 2]
    ]
    group_notes = {(n["path"], n["line"]): n["message"] for g in data["groups"] for n in g["notes"]}
    assert exits and all("leave their loop" in group_notes[("worker.py", i)] for i in exits)
    # the GPU and CPU workers' steps differ: each keeps its own, and says where
    stop = worker.index("        if request is None:") + 1
    kept = group_notes[("worker.py", stop)]
    assert kept.startswith("Worker keeps its own execute_model: its driver broadcasts `{}`")
    assert not [k for k in group_notes if k[0] == "worker.py" and k[1] not in [*exits, stop]]
    text = migrate_cli("--check", ".").out
    assert f"model_runner.py:{profile}: Worker/PoolingModelRunner/ModelRunner: " in text


def test_an_extra_receive_into_a_name_bound_before_keeps_that_name(
    tmp_path: Path, migrate_cli
) -> None:
    """``x = {}; if cond: x = broadcast()``: the extracted values are bound to ``x``
    inside the ``if``, so ``x`` keeps its value where the condition is false."""
    work = variants.write(variants.before("extra_broadcast"), tmp_path / "engine")
    runner = work / "model_runner.py"
    text = runner.read_text()
    old = (
        "            if has_images:\n"
        "                images = broadcast_tensor_dict(src=0)\n"
        "                assert images is not None\n"
        "                multi_modal_kwargs = images\n"
        "            else:\n"
        "                multi_modal_kwargs = {}\n"
    )
    assert old in text
    runner.write_text(
        text.replace(
            old,
            "            multi_modal_kwargs = {}\n"
            "            if has_images:\n"
            "                multi_modal_kwargs = broadcast_tensor_dict(src=0)\n",
        )
    )
    result = migrate_cli(str(work))
    assert result.code == 0 and ": MIG" not in result.out, result.out
    after = runner.read_text()
    assert (
        "        multi_modal_kwargs = {}\n"
        "        if has_images:\n"
        "            multi_modal_kwargs = multi_modal_kwargs_dict\n"
    ) in after
    assert after.index("multi_modal_kwargs_dict = {") < after.index("make_metadata(**")
    assert check_paths([work]).findings == []
