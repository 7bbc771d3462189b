"""``runnercheck check`` on real vLLM releases (wheels downloaded once and cached)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runnercheck import diagnostic_formats
from runnercheck.check import check_paths
from tests.check.conftest import FIXTURES
from tests.vllm_wheels import VERSIONS, vllm_source

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module", params=VERSIONS)
def version(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def source_root(version: str) -> Path:
    try:
        return vllm_source(version)
    except RuntimeError as exc:  # no package index: say so instead of failing obscurely
        pytest.skip(f"vllm=={version} not available: {exc}")


def test_whole_package_is_analysed_without_internal_error(
    version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = source_root(version)
    monkeypatch.chdir(root)
    result = check_paths(["vllm"], jobs=1)
    on_disk = sum(1 for _ in Path("vllm").rglob("*.py"))
    assert result.files_seen == on_disk
    assert result.files_parsed + result.files_skipped == result.files_seen
    assert result.files_failed == 0
    assert not [f for f in result.findings if f.code in ("RC001", "RC002")]
    # the prefilter leaves most of the package alone
    assert result.files_skipped > 0.8 * result.files_seen
    assert result.files_parsed >= 10


@pytest.mark.parametrize("release", VERSIONS)
def test_worker_findings_are_pinned(release: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each line was reviewed against the vLLM source (see the project report); notes
    are pinned too, each with why it is one."""
    root = source_root(release)
    monkeypatch.chdir(root)
    result = check_paths(["vllm/worker"])
    expected = (FIXTURES / "vllm" / f"{release}-worker.expected").read_text().splitlines()
    assert [
        diagnostic_formats.text(f) for f in sorted([*result.findings, *result.notes])
    ] == expected


def test_legacy_release_has_one_paired_broadcast_per_worker_runner_pair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(source_root("0.5.0"))
    result = check_paths(["vllm"], select=["RC106"])
    subjects = sorted(f.message.split(" broadcast ")[0] for f in result.findings)
    assert subjects == [
        "CPUWorker and CPUModelRunner",
        "Worker and EmbeddingModelRunner",
        "Worker and ModelRunner",
    ]
    monkeypatch.chdir(source_root("0.5.1"))
    merged = check_paths(["vllm"], select=["RC105", "RC106"])
    # 0.5.1 merged the broadcasts; only the XPU runner still broadcasts in
    # prepare_model_input: one cause, one finding (RC105, at that broadcast)
    assert [(f.code, f.message.split(" runs in ")[1].split(":")[0]) for f in merged.findings] == [
        ("RC105", "XPUModelRunner.prepare_model_input")
    ]


def test_a_shared_helper_popping_an_unsent_key_is_one_finding_naming_its_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RC111 is silent on the release; a misspelt key in the shared sampling-metadata
    helper of ``model_runner_base.py`` is one finding at the read, naming every input
    whose rebuild runs it."""
    worker = tmp_path / "vllm" / "worker"
    worker.mkdir(parents=True)
    for path in (source_root("0.6.0") / "vllm" / "worker").glob("*.py"):
        (worker / path.name).write_bytes(path.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert check_paths(["vllm/worker"], select=["RC111"]).findings == []
    base = worker / "model_runner_base.py"
    sent = 'tensor_dict.pop("selected_token_indices", None)'
    text = base.read_text()
    assert text.count(sent) == 1
    base.write_text(text.replace(sent, 'tensor_dict.pop("selected_token_indicesX")'))
    found = check_paths(["vllm/worker"], select=["RC111"]).findings
    assert len(found) == 1, found
    line = 1 + text[: text.index(sent)].count("\n")
    assert (found[0].path, found[0].line) == ("vllm/worker/model_runner_base.py", line)
    assert "'selected_token_indicesX'" in found[0].message
    assert "ModelInputForGPUWithSamplingMetadata" in found[0].message
    assert "(in _init_sampling_metadata_from_tensor_dict)" in found[0].message
