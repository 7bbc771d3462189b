"""``migrate`` verifies each rewritten group with the step semantics: at every entry
point of the step and on each role, the values that reach the model call, the sampler
and the cache operations must keep their sources. The legacy variant's non-driver
branch builds its sampling metadata with ``perform_sampling=False``; a planted rewrite
that drops the flag (the rebuilt metadata then takes the class default) is refused,
naming the entry point, the value and both sides, and nothing is written; with the
check disabled the same rewrite is written. A planted rewrite that gives the other
ranks ``blocks_to_copy = None`` where they received it is refused by the value sources
alone.

Where every rank now prepares its own input (``profile_run``), the rewrite keeps the
non-driver's value in ``prepare_model_input`` by reading the driver flag
(``perform_sampling=self.is_driver_worker``) and the same check passes; the
``sampling_flag`` variant (:mod:`tests.migrate.variants`) runs through profiling and
steps at TP 2 with the legacy engine's tokens. Where the driver leaves the flag to a class default it can read, or
builds the object in a helper of the runner (vLLM 0.4's ``_prepare_sample``), the flag
is kept there; a default it cannot read refuses the group."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import libcst as cst
import pytest

from codemods.facts.sources import SourceChange
from codemods.facts.values import ValueFacts
from codemods.framework import verify
from codemods.merge_broadcasts import rewrite, runner_rewrite
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.holds import ChangedValue
from runnercheck.check import check_paths
from runnercheck.config import Config
from runnercheck.demo.engine import run_engine
from runnercheck.demo.engine.launcher import EngineRunError
from tests.migrate import variants
from tests.migrate.conftest import snapshot

OVERRIDE = "            perform_sampling=False,\n"


def legacy_variant(target: Path) -> Path:
    """The after-split legacy engine whose non-driver ranks never sample."""
    work = variants.write(variants.before("after_split"), target)
    runner = work / "model_runner.py"
    text = runner.read_text()
    count = "                num_prompts=0,\n"
    assert text.count(count) == 1
    runner.write_text(text.replace(count, count + "                perform_sampling=False,\n"))
    return work


def plant(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite, with the non-driver's override dropped from the runner it writes."""
    finish = rewrite.finish

    def planted(
        path: Path, module: cst.Module, used_before: set[str]
    ) -> tuple[cst.Module, str, ast.Module]:
        module, code, tree = finish(path, module, used_before)
        if path.name == "model_runner.py" and OVERRIDE in code:
            code = code.replace(OVERRIDE, "")
            return cst.parse_module(code), code, ast.parse(code)
        return module, code, tree

    monkeypatch.setattr(rewrite, "finish", planted)


def test_unplanted_rewrite_keeps_the_non_driver_value(tmp_path: Path, migrate_cli) -> None:
    work = legacy_variant(tmp_path / "engine")
    assert migrate_cli(str(work)).code == 0  # written
    assert OVERRIDE in (work / "model_runner.py").read_text()


def test_a_planted_change_of_a_non_driver_value_is_refused(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    work = legacy_variant(tmp_path / "engine")
    message = refused(work, migrate_cli, monkeypatch)
    assert (
        "at Worker.execute_model with ModelRunner, a non-driver rank built "
        "SamplingMetadata(perform_sampling=False) before the rewrite and gets its default "
        "after it"
    ) in message


def test_with_the_check_disabled_the_planted_change_is_written(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    monkeypatch.setattr(verify, "changed_values", lambda *args: [])
    work = legacy_variant(tmp_path / "engine")
    assert migrate_cli(str(work)).code == 0
    assert OVERRIDE not in (work / "model_runner.py").read_text()


LEGACY = """
class ModelRunner(ModelRunnerBase):
    def prepare_input_tensors(self, seqs):
        if self.is_driver_worker:
            tokens = self._tokens(seqs)
            sampling = SamplingMetadata(seq_groups=seqs, tokens=tokens)
            broadcast_tensor_dict({"tokens": tokens}, src=0)
        else:
            tokens = broadcast_tensor_dict(src=0)["tokens"]
            sampling = SamplingMetadata(seq_groups=None, tokens=tokens, perform_sampling=False)
        return tokens, sampling

    def execute_model(self, seqs, kv_caches):
        tokens, sampling = self.prepare_input_tensors(seqs)
        return self.sampler(self.model(tokens), sampling)

    def profile_run(self, seqs):
        self.execute_model(seqs, [])
"""

MERGED = """
class ModelRunner(ModelRunnerBase):
    def prepare_model_input(self, seqs):
        tokens = self._tokens(seqs)
        return ModelInput(tokens, SamplingMetadata(seq_groups=seqs, tokens=tokens))

    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        sampling = SamplingMetadata(
            seq_groups=None, tokens=tensor_dict["tokens"], perform_sampling=False
        )
        return ModelInput(tensor_dict["tokens"], sampling)

    def execute_model(self, model_input, kv_caches):
        return self.sampler(self.model(model_input.tokens), model_input.sampling)

    def profile_run(self, seqs):
        self.execute_model(self.prepare_model_input(seqs), [])
"""


def _changed_values(before: str, after: str) -> list[ChangedValue | SourceChange]:
    """What :func:`verify.changed_values` reports when ``model_runner.py`` is rewritten
    from ``before`` to ``after``."""
    path = Path("model_runner.py")
    old = {path: extract_source(before, str(path))}
    new = {path: extract_source(after, str(path))}
    values = ValueFacts({path: before})
    return verify.changed_values(old, new, Config(), values, values.changed({path: after}))


def test_profile_run_preparing_locally_changes_the_non_driver_flag() -> None:
    """The fork's case: the legacy profile run took the non-driver branch (no sampling
    on ranks without the logits); merged, every rank prepares the dummy input itself and
    the non-driver gets the driver's default."""
    changes = _changed_values(LEGACY, MERGED)
    assert [c.describe() for c in changes] == [
        "at ModelRunner.profile_run, a non-driver rank built "
        "SamplingMetadata(perform_sampling=False) before the rewrite and gets its default "
        "after it"
    ]


@pytest.mark.parametrize(
    ("value", "after"),
    [("self.is_driver_worker", None), ("not self.is_driver_worker", "True")],
)
def test_a_flag_read_from_the_driver_flag_is_what_a_non_driver_rank_holds(
    value: str, after: str | None
) -> None:
    kept = MERGED.replace(
        "SamplingMetadata(seq_groups=seqs, tokens=tokens)",
        f"SamplingMetadata(seq_groups=seqs, tokens=tokens, perform_sampling={value})",
    )
    assert kept != MERGED
    changes = _changed_values(LEGACY, kept)
    assert [c.after for c in changes] == ([after] if after else [])


VARIANT = "sampling_flag"
KEPT = "            perform_sampling=self.is_driver_worker,\n"


def test_where_every_rank_now_prepares_the_non_driver_flag_is_kept(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = variants.write(variants.before(VARIANT), tmp_path / "engine")
    monkeypatch.chdir(work)
    data = json.loads(migrate_cli("--format", "json", ".").out)
    assert data["refusals"] == []
    rewritten = (work / "model_runner.py").read_text().splitlines()
    line = rewritten.index(KEPT.rstrip("\n")) + 1  # notes cite lines of the rewritten file
    notes = {
        (n["path"], n["line"]): n["message"]
        for g in data["groups"]
        for r in g["runners"]
        for n in r["notes"]
    }
    assert notes[("model_runner.py", line)] == (
        "ModelRunner.prepare_model_input builds SamplingMetadata(perform_sampling="
        "self.is_driver_worker): the other ranks, which now prepare their own input in a "
        "profile or dummy run, keep False as the legacy non-driver branch gave it"
    )
    runner = (work / "model_runner.py").read_text()
    prepare = runner.split("    def prepare_model_input(")[1].split("    def ")[0]
    assert KEPT in prepare
    assert "self.prepare_model_input([dummy])" in runner  # profile_run prepares locally
    assert snapshot(work) == variants.snapshot(variants.after(VARIANT))
    legacy = variants.write(variants.before(VARIANT), tmp_path / "legacy")
    assert {f.code for f in check_paths([legacy]).findings} == {"RC106"}
    assert check_paths([work]).findings == []


def test_without_keeping_the_flag_the_same_check_refuses_the_group(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        runner_rewrite,
        "keep_non_driver_flags",
        lambda driver, non_driver, flag, defaults=None: list(driver),
    )
    work = variants.write(variants.before(VARIANT), tmp_path / "engine")
    message = refused(work, migrate_cli, monkeypatch)
    assert (
        "at ModelRunner.profile_run, a non-driver rank built "
        "SamplingMetadata(perform_sampling=False) before the rewrite and gets True after it"
    ) in message


EXPLICIT = "                perform_sampling=True,\n"
DIRECT = """            sampling_metadata = SamplingMetadata(
                seq_groups=prepared.seq_groups,
                selected_token_indices=prepared.selected_token_indices,
                num_prompts=prepared.num_prompts,
                perform_sampling=True,
            )
"""
HELPER_CALL = "            sampling_metadata = self._sampling_metadata(prepared)\n"
HELPER = """
    def _sampling_metadata(self, prepared: Prepared) -> SamplingMetadata:
        sampling_metadata = SamplingMetadata(
            seq_groups=prepared.seq_groups,
            selected_token_indices=prepared.selected_token_indices,
            num_prompts=prepared.num_prompts,
        )
        return sampling_metadata
"""


def left_to_default(target: Path) -> Path:
    """The variant whose driver leaves ``perform_sampling`` to the class default."""
    work = variants.write(variants.before(VARIANT), target)
    runner = work / "model_runner.py"
    text = runner.read_text()
    assert text.count(EXPLICIT) == 1
    runner.write_text(text.replace(EXPLICIT, ""))
    return work


def in_a_helper(target: Path) -> Path:
    """The variant whose driver builds its sampling metadata in a helper of the runner,
    leaving ``perform_sampling`` to the class default (vLLM 0.4's ``_prepare_sample``)."""
    work = variants.write(variants.before(VARIANT), target)
    runner = work / "model_runner.py"
    text = runner.read_text()
    assert text.count(DIRECT) == 1
    text = text.replace(DIRECT, HELPER_CALL)
    marker = "    def prepare_input_tensors("
    assert text.count(marker) == 1
    runner.write_text(text.replace(marker, HELPER.lstrip("\n") + "\n" + marker))
    return work


def migrate_json(work: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.chdir(work)
    return json.loads(migrate_cli("--format", "json", ".").out)


def refused(work: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch) -> str:
    """The MIG111 message of a run that must write nothing."""
    before = snapshot(work)
    data = migrate_json(work, migrate_cli, monkeypatch)
    assert snapshot(work) == before  # nothing written
    return str(next(r for r in data["refusals"] if r["code"] == "MIG111")["message"])


def notes_of(data: dict) -> list[str]:
    return [n["message"] for g in data["groups"] for r in g["runners"] for n in r["notes"]]


def test_a_flag_the_driver_leaves_to_a_known_default_is_kept(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The class default (``perform_sampling: bool = True``) is the driver's side: the
    keyword is added, reading the driver flag."""
    work = left_to_default(tmp_path / "engine")
    data = migrate_json(work, migrate_cli, monkeypatch)
    assert data["refusals"] == []
    runner = (work / "model_runner.py").read_text()
    prepare = runner.split("    def prepare_model_input(")[1].split("    def ")[0]
    assert "            num_prompts=prepared.num_prompts,\n" + KEPT in prepare
    assert any(
        m.startswith("ModelRunner.prepare_model_input builds SamplingMetadata(perform_sampling=")
        for m in notes_of(data)
    )


def test_a_flag_left_to_a_default_that_cannot_be_read_is_refused(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = left_to_default(tmp_path / "engine")
    metadata = work / "sampling_metadata.py"
    text = metadata.read_text()
    literal = "    perform_sampling: bool = True\n"
    assert text.count(literal) == 1
    metadata.write_text(
        text.replace(literal, "    perform_sampling: bool = dataclasses.field(default=True)\n")
    )
    message = refused(work, migrate_cli, monkeypatch)
    assert (
        "at ModelRunner.profile_run, a non-driver rank built "
        "SamplingMetadata(perform_sampling=False) before the rewrite and gets its default "
        "after it"
    ) in message


def test_a_flag_the_driver_leaves_to_the_default_in_a_helper_is_kept_there(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = in_a_helper(tmp_path / "engine")
    data = migrate_json(work, migrate_cli, monkeypatch)
    assert data["refusals"] == []
    runner = (work / "model_runner.py").read_text()
    helper = runner.split("    def _sampling_metadata(")[1].split("    def ")[0]
    assert "            num_prompts=prepared.num_prompts,\n" + KEPT in helper
    assert (
        "ModelRunner._sampling_metadata builds SamplingMetadata(perform_sampling="
        "self.is_driver_worker): the other ranks, which now prepare their own input in a "
        "profile or dummy run, keep False as the legacy non-driver branch gave it"
    ) in notes_of(data)
    assert check_paths([work]).findings == []


@pytest.mark.slow
def test_the_migrated_variant_profiles_and_steps_at_tp_2_with_the_legacy_tokens(
    tmp_path: Path,
) -> None:
    """Both engines run ``profile_run`` on every rank (the worker's block count), then
    the steps; non-driver ranks hold no logits, so a rank that samples fails."""
    before = variants.write(variants.before(VARIANT), tmp_path / "before")
    after = variants.write(variants.after(VARIANT), tmp_path / "after")
    legacy = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(before))
    merged = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(after))
    assert legacy["broadcasts_per_step"] == 2
    assert merged["broadcasts_per_step"] == 1
    assert merged["num_tokens"] == legacy["num_tokens"] > 0
    assert merged["tokens_sha256"] == legacy["tokens_sha256"]


@pytest.mark.slow
def test_the_migrated_helper_variant_profiles_and_steps_at_tp_2_with_the_legacy_tokens(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper variant (vLLM 0.4's shape) before and after ``migrate``: the same
    tokens at TP 2 through ``profile_run`` and the steps, one broadcast less per step."""
    before = in_a_helper(tmp_path / "before")
    after = in_a_helper(tmp_path / "after")
    assert migrate_json(after, migrate_cli, monkeypatch)["refusals"] == []
    legacy = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(before))
    merged = run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(after))
    assert (legacy["broadcasts_per_step"], merged["broadcasts_per_step"]) == (2, 1)
    assert merged["num_tokens"] == legacy["num_tokens"] > 0
    assert merged["tokens_sha256"] == legacy["tokens_sha256"]


@pytest.mark.slow
def test_without_the_kept_flag_the_migrated_variant_fails_in_its_profile_run(
    tmp_path: Path,
) -> None:
    after = variants.write(variants.after(VARIANT), tmp_path / "after")
    runner = after / "model_runner.py"
    text = runner.read_text()
    assert text.count(KEPT) == 1
    runner.write_text(text.replace(KEPT, ""))
    with pytest.raises(EngineRunError, match="rank 1: AssertionError: this rank holds no logits"):
        run_engine(None, tp=2, steps=2, seed=3, engine_dir=str(after))


RECEIVED = "        blocks_to_copy = worker_input.blocks_to_copy\n"
DROPPED = "        blocks_to_copy = None\n"


def plant_dropped_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rewrite, with the non-driver's received ``blocks_to_copy`` replaced by
    ``None`` in the worker it writes: the other ranks then never copy blocks. No rule of
    ``check`` sees it (the key is still produced and popped)."""
    finish = rewrite.finish

    def planted(
        path: Path, module: cst.Module, used_before: set[str]
    ) -> tuple[cst.Module, str, ast.Module]:
        module, code, tree = finish(path, module, used_before)
        if path.name == "worker.py" and RECEIVED in code:
            code = code.replace(RECEIVED, DROPPED)
            return cst.parse_module(code), code, ast.parse(code)
        return module, code, tree

    monkeypatch.setattr(rewrite, "finish", planted)


def test_a_planted_change_of_a_received_value_is_refused(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant_dropped_copy(monkeypatch)
    work = variants.write(variants.before(VARIANT), tmp_path / "engine")
    message = refused(work, migrate_cli, monkeypatch)
    assert (
        "at Worker.execute_model with ModelRunner, a non-driver rank passed #0 to the cache "
        "self.cache_engine.copy from key 'blocks_to_copy' received by broadcast_tensor_dict "
        "in Worker._execute_model_non_driver before the rewrite and from the constant None "
        "after it"
    ) in message


def test_with_only_the_flags_compared_the_planted_received_value_is_written(
    tmp_path: Path, migrate_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same planted rewrite passes every other check: only the value sources catch
    it."""
    plant_dropped_copy(monkeypatch)
    monkeypatch.setattr(verify, "changed_sources", lambda old, new: [])
    work = variants.write(variants.before(VARIANT), tmp_path / "engine")
    monkeypatch.chdir(work)
    data = json.loads(migrate_cli("--format", "json", ".").out)
    assert data["refusals"] == []
    assert DROPPED in (work / "worker.py").read_text()
