"""``runnercheck migrate`` on real vLLM releases (wheels downloaded once and cached).

0.5.0 is the last two-broadcast release: its GPU, embedding and CPU worker/runner
pairs are rewritten, the result compiles and re-analyses clean, the mypy plugin
reports nothing new, and the keys broadcast per step are exactly the two old dicts'
keys less the duplicates the report names. 0.5.1 is already merged: nothing changes.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck import catalog
from runnercheck.check import check_paths
from tests.vllm_wheels import vllm_source

pytestmark = pytest.mark.vllm
REPO = Path(__file__).resolve().parents[2]
MYPY_INI = """\
[mypy]
plugins = mypy_plugin
ignore_missing_imports = True
follow_imports = silent

[mypy-torch.*]
follow_imports = skip
"""
PLUGIN_CODES = {rule.name for rule in catalog.for_tool("mypy")}


def source_root(version: str) -> Path:
    try:
        return vllm_source(version)
    except RuntimeError as exc:  # no package index: say so instead of failing obscurely
        pytest.skip(f"vllm=={version} not available: {exc}")


def _keys_built(node: ast.AST) -> list[str]:
    """String keys of the dict literals under ``node`` and of ``d["key"] = ...``."""
    out = []
    for d in ast.walk(node):
        if isinstance(d, ast.Dict):
            out += [
                k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
        elif isinstance(d, ast.Assign):
            out += [
                t.slice.value
                for t in d.targets
                if isinstance(t, ast.Subscript)
                and isinstance(t.slice, ast.Constant)
                and isinstance(t.slice.value, str)
            ]
    return out


def _class_in(directory: Path, cls: str) -> tuple[Path, ast.ClassDef] | None:
    """The module of ``directory`` that defines the class ``cls``, and the class."""
    for module in sorted(directory.glob("*.py")):
        for node in ast.parse(module.read_bytes()).body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                return module, node
    return None


def _bases_of(directory: Path, cls: str) -> list[tuple[Path, ast.ClassDef]]:
    """The classes of ``directory`` that ``cls`` derives from (directly)."""
    found = _class_in(directory, cls)
    assert found is not None, cls
    parents = [_class_in(directory, b.id) for b in found[1].bases if isinstance(b, ast.Name)]
    return [p for p in parents if p is not None]


def dict_keys(path: Path, cls: str, method: str) -> list[str]:
    """String keys of the dicts built in ``cls.method`` (read with ``ast``), in the
    helpers of the base module beside it that the method calls, and in the method of
    the class's base (a class of the same directory) that it calls through ``super()``
    or inherits."""
    tree = ast.parse(path.read_bytes())
    base = path.parent / "model_runner_base.py"
    helpers = {
        f.name: f
        for f in (ast.parse(base.read_bytes()).body if base.exists() else [])
        if isinstance(f, ast.FunctionDef)
    }
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    assert node is not None, f"{cls} not found in {path}"
    parents = [_class_in(path.parent, b.id) for b in node.bases if isinstance(b, ast.Name)]
    inherited = [found for found in parents if found is not None]
    item = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == method), None)
    if item is None:
        assert inherited, f"{cls}.{method} not found in {path}"
        module, parent = inherited[0]
        return dict_keys(module, parent.name, method)
    called = [
        helpers[c.func.id]
        for c in ast.walk(item)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in helpers
    ]
    keys = [k for n in [item, *called] for k in _keys_built(n)]
    if f"super().{method}(" in ast.unparse(item):
        module, parent = inherited[0]
        keys += dict_keys(module, parent.name, method)
    return keys


def plugin_errors(root: Path, package: str) -> set[str]:
    config = root / "mypy.ini"
    config.write_text(MYPY_INI)
    proc = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--config-file", str(config),
            "--cache-dir", str(root / ".mypy_cache"), "--show-error-codes", package,
        ],
        cwd=root, capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert "runnercheck mypy plugin: error" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), proc.stderr
    return {
        line.split(":", 2)[0] + ":" + line.rsplit("[", 1)[1]
        for line in proc.stdout.splitlines()
        if any(line.endswith(f"[{code}]") for code in PLUGIN_CODES)
    }


@pytest.fixture(scope="module")
def migrated_050(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """(original vllm/, migrated copy of vllm/, JSON report)."""
    original = source_root("0.5.0") / "vllm"
    root = tmp_path_factory.mktemp("vllm050")
    copy = root / "vllm"
    shutil.copytree(original, copy)
    out = root / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", "--format", "json", str(copy / "worker")],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out.write_text(proc.stdout)
    return original, copy, json.loads(proc.stdout)


def test_050_rewrites_the_gpu_embedding_and_cpu_pairs(migrated_050) -> None:
    original, copy, report = migrated_050
    changed = sorted(Path(c["path"]).name for c in report["changes"])
    assert changed == [
        "cpu_model_runner.py", "cpu_worker.py", "embedding_model_runner.py",
        "model_runner.py", "model_runner_base.py", "worker.py", "worker_input.py",
    ]  # fmt: skip
    assert report["refusals"] == []
    groups = {g["group"] for g in report["groups"]}
    assert groups == {"Worker/EmbeddingModelRunner/ModelRunner", "CPUWorker/CPUModelRunner"}
    notes = [n for n in report["notes"] if "Neuron" in n["pair"]]
    assert notes and "no broadcast" in notes[0]["message"]
    for name in ("neuron_worker.py", "neuron_model_runner.py", "cache_engine.py"):
        assert (copy / "worker" / name).read_bytes() == (original / "worker" / name).read_bytes()
    for path in (copy / "worker").glob("*.py"):
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)


def test_050_migrated_worker_reanalyses_without_paired_broadcast(migrated_050) -> None:
    original, copy, _ = migrated_050
    before = check_paths([original / "worker"]).findings
    after = check_paths([copy / "worker"]).findings
    assert {f.code for f in before} >= {"RC106"}
    assert [f for f in after if f.code == "RC106"] == []
    assert {f.code for f in after} <= {f.code for f in before} - {"RC106"}


def test_050_keys_per_step_are_the_old_union_less_the_named_duplicates(migrated_050) -> None:
    original, copy, report = migrated_050
    old, new = original / "worker", copy / "worker"
    runners = {r["runner"]: r for g in report["groups"] for r in g["runners"]}
    cases = [
        ("worker.py", "Worker", "model_runner.py", "ModelRunner", "ModelRunnerInput"),
        ("worker.py", "Worker", "embedding_model_runner.py", "EmbeddingModelRunner",
         "EmbeddingModelRunnerInput"),
        ("cpu_worker.py", "CPUWorker", "cpu_model_runner.py", "CPUModelRunner",
         "CPUModelRunnerInput"),
    ]  # fmt: skip
    # the GPU and CPU workers share one WorkerInput, holding every field either sends
    shared = set(dict_keys(new / "worker_input.py", "WorkerInput", "as_broadcastable_tensor_dict"))
    for wfile, worker, rfile, runner, rinput in cases:
        own = set(dict_keys(old / wfile, worker, "execute_model"))
        old_keys = own | set(dict_keys(old / rfile, runner, "prepare_input_tensors"))
        new_keys = shared | set(dict_keys(new / rfile, rinput, "as_broadcastable_tensor_dict"))
        dropped = {d["key"] for d in runners[runner]["dropped"]}
        # and the fields of the other worker's (None on these ranks): the CPU worker
        # sends no blocks to swap
        assert new_keys == (old_keys - dropped) | (shared - own), runner
        assert dropped <= old_keys
        # the attention metadata's own dict still travels in the same broadcast: in
        # the input's own body, or through the helper the inputs share
        text = "".join(
            (new / f).read_text() for f in {rfile, *(m.name for m, _ in _bases_of(new, rinput))}
        )
        assert "asdict_zerocopy()" in text or (
            re.search(r"_add_attn_metadata_broadcastable_dict\(\s*tensor_dict,\s*self\.attn", text)
            and "attn_metadata.asdict_zerocopy()" in (new / "model_runner_base.py").read_text()
        ), rfile
    assert shared - set(dict_keys(old / "cpu_worker.py", "CPUWorker", "execute_model")) == {
        "blocks_to_swap_in", "blocks_to_swap_out",
    }  # fmt: skip
    # the GPU and embedding inputs repeated the attention metadata's (de)serialisation:
    # it is one pair of helpers in the generated base module, called once, by the base
    # input the two share (in the GPU runner's module, which the embedding one imports)
    base = (new / "model_runner_base.py").read_text()
    for helper in ("_add_attn_metadata_broadcastable_dict", "_init_attn_metadata_from_tensor_dict"):
        assert base.count(f"\ndef {helper}(") == 1, helper
        calls = {
            rfile: (new / rfile).read_text().count(f"{helper}(")
            for rfile in ("model_runner.py", "embedding_model_runner.py")
        }
        assert calls == {"model_runner.py": 1, "embedding_model_runner.py": 0}, helper
    assert (
        "class EmbeddingModelRunnerInput(CommonModelRunnerInput):"
        in (new / "embedding_model_runner.py").read_text()
    )
    # the GPU and CPU inputs send the sampling metadata's indices alike: one helper;
    # they rebuild it with different arguments (the CPU runner's older signature): each
    # keeps its own statements
    helper = "_add_sampling_metadata_broadcastable_dict"
    assert base.count(f"\ndef {helper}(") == 1
    for rfile in ("model_runner.py", "cpu_model_runner.py"):
        text = (new / rfile).read_text()
        # (laid out by yapf's pep8 style, which the release's files follow)
        assert re.search(rf"{helper}\(\s*tensor_dict,\s*self\.sampling_metadata\s*\)", text), rfile
        assert '"selected_token_indices":' not in text and "SamplingMetadata(" in text, rfile
    assert "_init_sampling_metadata_from_tensor_dict" not in base
    for rfile, rinput in (
        ("model_runner.py", "ModelRunnerInput"),
        ("embedding_model_runner.py", "EmbeddingModelRunnerInput"),
    ):
        body = (new / rfile).read_text().split(f"\nclass {rinput}(")[1].split("\nclass ")[0]
        assert "make_metadata(" not in body and "asdict_zerocopy(" not in body, rfile
    assert {d["key"] for d in runners["ModelRunner"]["dropped"]} == {
        "num_prefill_tokens", "num_decode_tokens", "slot_mapping", "num_prefills",
    }  # fmt: skip
    assert runners["EmbeddingModelRunner"]["driver_only"] == ["pooling_metadata"]
    defined = [
        (path.name, line)
        for path in sorted(new.glob("*.py"))
        for line in path.read_text().splitlines()
        if line.startswith("class ") and "WorkerInput" in line
    ]
    assert defined == [("worker_input.py", "class WorkerInput:")]


@pytest.mark.slow
def test_050_plugin_reports_nothing_the_input_did_not(migrated_050, tmp_path: Path) -> None:
    original, copy, _ = migrated_050
    before_root = tmp_path / "before"
    shutil.copytree(original, before_root / "vllm")
    before = plugin_errors(before_root, "vllm/worker")
    after = plugin_errors(copy.parent, "vllm/worker")
    assert after <= before


def test_051_merge_changes_nothing(tmp_path: Path) -> None:
    original = source_root("0.5.1") / "vllm"
    copy = tmp_path / "vllm"
    shutil.copytree(original / "worker", copy / "worker")
    proc = subprocess.run(
        [
            sys.executable, "-m", "runnercheck", "migrate", "--select", "merge-broadcasts",
            "--format", "json", str(copy / "worker"),
        ],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    assert report["changes"] == []
    for path in (copy / "worker").glob("*.py"):
        assert path.read_bytes() == (original / "worker" / path.name).read_bytes()
    # the XPU runner broadcasts inside prepare_model_input: refused, not rewritten
    assert {r["code"] for r in report["refusals"]} <= {"MIG105"}


@pytest.mark.slow
def test_050_worker_dir_copied_alone_still_resolves_its_imports(tmp_path: Path) -> None:
    """``vllm.worker.model_runner`` imports resolve when only ``worker/`` is given, under
    another name (the nearest module with the same tail)."""
    original = source_root("0.5.0") / "vllm" / "worker"
    copy = tmp_path / "worker050"
    shutil.copytree(original, copy)
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", "--format", "json", str(copy)],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    report = json.loads(proc.stdout)
    assert report["refusals"] == []
    assert len(report["changes"]) == 7  # five rewritten, the base and the worker input
    assert check_paths([copy]).findings == []


def test_050_every_note_with_a_line_cites_the_line_of_the_new_file(migrated_050) -> None:
    """Each note that names a line points at what it talks about in the rewritten file."""
    report = migrated_050[2]
    notes = [
        *report["notes"],
        *(n for g in report["groups"] for n in g["notes"]),
        *(n for g in report["groups"] for r in g["runners"] for n in r["notes"]),
    ]
    cited = [(Path(n["path"]), n["line"], n["message"]) for n in notes if n.get("line")]
    expected = {
        "now derives from": lambda line: line.startswith("class EmbeddingModelRunner("),
        "outside the worker's step": lambda line: (
            "self.execute_model(self.prepare_model_input(" in line
        ),
        "the NamedTuple": lambda line: line == "class ModelInput(NamedTuple):",
        "returns False here": lambda line: line == "return False",
        "on a path the other ranks take": lambda line: line.startswith("execute_model_kwargs"),
        "left alone": lambda line: line.startswith("class Neuron"),
        "keeps its own execute_model": lambda line: "execute_model_req is" in line,
        "goes on with its own": lambda line: line.startswith("blocks_to_copy = torch.tensor("),
    }
    # ``(file.py:N)`` inside a message: what the words before it name
    inner = {
        "instead of sending the stop signal": "assert execute_model_req is not None",
        "never checks the stop signal": "broadcast_tensor_dict(src=0)",
        "runs inside `execute_model`": "def execute_model(",
        "broadcasts `{}` without a request": "if execute_model_req is None:",
        "leaves on the stop signal": "if not data:",
        "path is `_execute_model_non_driver`": "def _execute_model_non_driver(",
    }
    seen = set()
    for path, number, message in cited:
        line = path.read_text().splitlines()[number - 1].strip()
        kinds = [k for k in expected if k in message]
        assert len(kinds) == 1, f"a note this test does not know: {message}"
        assert expected[kinds[0]](line), (path.name, number, line, message)
        seen.add(kinds[0])
        for before, name, ref in re.findall(r"([^;(]*)\((\w+\.py):(\d+)\)", message):
            words = [w for w in inner if w in before]
            assert len(words) == 1, f"a line this test does not know: {before}"
            text = (path.parent / name).read_text().splitlines()[int(ref) - 1]
            assert inner[words[0]] in text, (name, ref, text, before)
            seen.add(words[0])
    assert seen == set(expected) | set(inner)


def test_050_whole_tree_migrated_passes_check_and_migrate_check(tmp_path: Path) -> None:
    """The documented CI set-up on a tree ``runnercheck migrate vllm/`` migrated: the
    speculative-decoding wrapper's control broadcast, which the fold refuses (MIG204, a
    note of ``migrate``), is no error of ``check`` (an RC110 note): ``migrate`` and
    ``migrate --check`` exit 0, and ``check`` reports no RC106 nor RC110 error."""
    from runnercheck.cli import main

    copy = tmp_path / "vllm"
    shutil.copytree(source_root("0.5.0") / "vllm", copy)
    assert main(["migrate", "--no-cache", str(copy)]) == 0
    assert main(["migrate", "--no-cache", "--check", str(copy)]) == 0
    assert main(["check", "--no-cache", "--select", "RC106,RC110", str(copy)]) == 0
    checked = check_paths([copy])
    assert [f for f in checked.findings if f.code in ("RC106", "RC110")] == []
    assert [f.code for f in checked.notes if f.code == "RC110"] == ["RC110"]


def _causes(root: Path) -> set[tuple[str, str]]:
    """``check``'s errors on ``root/vllm`` as (file below vllm/, code): a finding that
    moved with a rewrite (its lines, or the broadcasts an inner step now sends) is the
    same cause."""
    result = check_paths([root / "vllm"])
    return {(Path(f.path).as_posix().rsplit("vllm/", 1)[-1], f.code) for f in result.findings}


#: What ``check`` still reports on each release once ``migrate vllm/`` ran: real bugs
#: of the release that no codemod removes (docs/check.md's table), nothing else.
LEFT_AFTER_MIGRATE = {
    "0.5.0": {("spec_decode/spec_decode_worker.py", "RC112")},
    "0.5.1": {
        ("spec_decode/spec_decode_worker.py", "RC112"),
        ("worker/neuron_worker.py", "RC107"),
        ("worker/worker_base.py", "RC109"),
        ("worker/xpu_model_runner.py", "RC103"),
        ("worker/xpu_model_runner.py", "RC105"),
    },
    "0.6.0": {("worker/worker_base.py", "RC109")},
}


#: The refusals ``migrate`` leaves for a person on each release (a real bug, not a
#: shape it fails to recognise as done): 0.5.1's XPU runner broadcasts inside
#: ``prepare_model_input`` (RC105), which needs a fix by hand.
REFUSED = {"0.5.0": [], "0.5.1": ["worker/xpu_model_runner.py: MIG105"], "0.6.0": []}


@pytest.mark.slow
@pytest.mark.parametrize("version", sorted(LEFT_AFTER_MIGRATE))
def test_whole_release_migrated_leaves_only_its_own_bugs(
    tmp_path: Path, version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``runnercheck migrate vllm/`` on a copy of the whole release, then the documented
    CI set-up: ``migrate --check`` has nothing to change and refuses only what needs a
    person (a shape migrate produced, or already had, is done, not a refusal), and
    every error ``check`` still reports was an error of the release before, one of its
    real bugs that no codemod removes: on 0.5.0, ``migrate --check`` exits 0 and
    ``check``'s only error is the speculative-decoding wrapper's hang (RC112)."""
    from runnercheck.cli import main

    shutil.copytree(source_root(version) / "vllm", tmp_path / "vllm")
    before = _causes(tmp_path)
    expected = 1 if REFUSED[version] else 0
    main(["migrate", "--no-cache", str(tmp_path / "vllm")])
    capsys.readouterr()
    assert main(["migrate", "--no-cache", "--check", str(tmp_path / "vllm")]) == expected
    out = capsys.readouterr().out
    assert "would migrate" not in out and "would create" not in out
    refused = [f"{m[1]}: {m[2]}" for m in re.finditer(r"vllm/(\S+\.py):\d+: (MIG1\d\d) ", out)]
    assert refused == REFUSED[version]
    after = _causes(tmp_path)
    assert after <= before, after - before
    assert after == LEFT_AFTER_MIGRATE[version]
