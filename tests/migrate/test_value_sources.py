"""The step semantics' value sources: at every entry point and on each role, where each
value that reaches the model call, the sampler and the cache operations comes from."""

from __future__ import annotations

from pathlib import Path

from codemods.facts.sources import Reach, Source, ValueSources, changed_sources
from codemods.facts.values import ValueFacts
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project

LEGACY = """
from vllm.distributed import broadcast_tensor_dict


class SamplingMetadata:
    def __init__(self, seq_groups, tokens, perform_sampling=True):
        self.perform_sampling = perform_sampling


class ModelRunner:
    def prepare_input_tensors(self, seqs):
        if self.is_driver_worker:
            tokens = self._tokens(seqs)
            sampling = self._sampling(seqs, tokens)
            broadcast_tensor_dict({"tokens": tokens}, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            tokens = data.pop("tokens")
            sampling = SamplingMetadata(seq_groups=None, tokens=tokens, perform_sampling=False)
        return tokens, sampling

    def _sampling(self, seqs, tokens):
        return SamplingMetadata(seq_groups=seqs, tokens=tokens)

    def execute_model(self, seqs, kv_caches):
        tokens, sampling = self.prepare_input_tensors(seqs)
        hidden = self.model(input_ids=tokens, kv_caches=kv_caches)
        return self.sampler(hidden, sampling)

    def profile_run(self):
        self.execute_model([], [None, None])


class Worker:
    def __init__(self):
        self.model_runner = ModelRunner()

    def execute_model(self, seqs=None, blocks_to_copy=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"blocks_to_copy": blocks_to_copy}, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            blocks_to_copy = data["blocks_to_copy"]
        self.cache_engine.copy(blocks_to_copy)
        return self.model_runner.execute_model(seqs, self.gpu_cache)
"""


def reaches(source: str) -> dict[tuple[str, str, str, str], str]:
    project = Project([extract_source(source, "runner.py")])
    return {
        (r.entry, r.role, r.sink, r.slot): r.source.describe()
        for r in ValueSources(project, ValueFacts({Path("runner.py"): source})).reaches()
    }


def test_each_role_gets_its_values_from_its_own_path() -> None:
    found = reaches(LEGACY)
    step = "Worker.execute_model with ModelRunner"
    model = "model self.model"
    assert found[(step, "non-driver", model, "input_ids")] == (
        "key 'tokens' received by broadcast_tensor_dict in ModelRunner.prepare_input_tensors"
    )
    assert found[(step, "driver", model, "input_ids")] == ("a local value (self._tokens(...))")
    copy = "cache self.cache_engine.copy"
    assert found[(step, "non-driver", copy, "#0")] == (
        "key 'blocks_to_copy' received by broadcast_tensor_dict in Worker.execute_model"
    )
    assert found[(step, "driver", copy, "#0")] == "the argument blocks_to_copy"
    # an object built on the path gives each keyword's source, defaults included
    sampler = "sampler self.sampler"
    assert found[(step, "non-driver", sampler, "#1.perform_sampling")] == "the constant False"
    assert found[(step, "driver", sampler, "#1.perform_sampling")] == "the default True"
    assert found[(step, "driver", sampler, "#1.seq_groups")] == "the argument seqs"


def test_a_profile_run_passes_its_own_values_into_the_step() -> None:
    found = reaches(LEGACY)
    model = "model self.model"
    assert found[("ModelRunner.profile_run", "driver", model, "kv_caches")] == (
        "a local value (computed in ModelRunner.profile_run)"
    )
    assert found[("ModelRunner.profile_run", "non-driver", model, "input_ids")] == (
        "key 'tokens' received by broadcast_tensor_dict in ModelRunner.prepare_input_tensors"
    )


MERGED_WORKER = """
from vllm.distributed import broadcast_tensor_dict


class WorkerInput:
    def as_broadcastable_tensor_dict(self):
        return {"blocks_to_copy": self.blocks_to_copy}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(blocks_to_copy=tensor_dict.pop("blocks_to_copy"))


class ModelRunner:
    def execute_model(self, model_input, kv_caches):
        return self.model(model_input.tokens)


class Worker:
    def __init__(self):
        self.model_runner = ModelRunner()

    def execute_model(self, request=None):
        if self.is_driver_worker:
            worker_input = WorkerInput(blocks_to_copy=request.blocks_to_copy)
            broadcast_tensor_dict(worker_input.as_broadcastable_tensor_dict(), src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            worker_input = WorkerInput.from_broadcasted_tensor_dict(data)
        self.cache_engine.copy(worker_input.blocks_to_copy)
"""


def test_a_rebuilt_input_names_the_class_that_produced_the_key() -> None:
    found = reaches(MERGED_WORKER)
    key = ("Worker.execute_model with ModelRunner", "non-driver", "cache self.cache_engine.copy")
    assert found[(*key, "#0")] == (
        "key 'blocks_to_copy' of WorkerInput.as_broadcastable_tensor_dict, received by "
        "broadcast_tensor_dict in Worker.execute_model"
    )


def _reach(source: Source, slot: str = "#0") -> Reach:
    return Reach("W.execute_model", "non-driver", "cache copy", slot, source)


def test_a_value_that_becomes_fixed_is_a_change_received_or_local_is_not() -> None:
    received = Source("received", "blocks_to_copy", "broadcast_tensor_dict in W")
    local = Source("local", "self._blocks(...)", "W")
    none = Source("constant", "None")
    false, default = Source("constant", "False"), Source("default", "True")
    assert changed_sources([_reach(received)], [_reach(none)]) == [(_reach(received), _reach(none))]
    assert changed_sources([_reach(received)], [_reach(local)]) == []
    assert changed_sources([_reach(local)], [_reach(received)]) == []
    # a rank without the data held None; the driver's own value replacing it is the merge
    assert changed_sources([_reach(none)], [_reach(local)]) == []
    assert changed_sources([_reach(false)], [_reach(default)]) == [(_reach(false), _reach(default))]
    assert changed_sources([_reach(default)], [_reach(Source("constant", "True"))]) == []


def test_a_helper_whose_return_calls_itself_ends() -> None:
    """A helper that returns its own call (a retry, a bucket search) is followed to the
    bounded depth, not forever."""
    source = LEGACY.replace(
        "        return SamplingMetadata(seq_groups=seqs, tokens=tokens)",
        "        if not tokens:\n"
        "            return SamplingMetadata(seq_groups=seqs, tokens=tokens)\n"
        "        return self._sampling(seqs, tokens)",
    )
    found = reaches(source)
    sampler = ("ModelRunner.profile_run", "driver", "sampler self.sampler", "#1")
    assert found[sampler] == "a local value (self._sampling(...))"
    # the other rank's path never calls the helper: its values are read as before
    assert found[(sampler[0], "non-driver", sampler[2], "#1.perform_sampling")] == (
        "the constant False"
    )


class _Reads(dict[Path, str]):
    """Sources that record each file read out of them."""

    def __init__(self, sources: dict[Path, str]) -> None:
        super().__init__(sources)
        self.read: list[str] = []

    def __getitem__(self, path: Path) -> str:
        self.read.append(path.name)
        return super().__getitem__(path)


UNRELATED = """
class Tokenizer:
    def encode(self, text):
        ids = self.vocab.lookup(text)
        return self.model(ids)
"""


def test_values_are_read_only_for_the_files_the_walk_reaches_each_once() -> None:
    """``check`` never reads the values: ``migrate`` reads a method's the first time the
    walk reaches it, parsing its file once; a changed version reads its own files and
    leaves the unchanged ones to the version it changes."""
    runner, other = Path("runner.py"), Path("tokenizer.py")
    sources = _Reads({runner: LEGACY, other: UNRELATED})
    project = Project([extract_source(LEGACY, str(runner)), extract_source(UNRELATED, str(other))])
    values = ValueFacts(sources)
    first = ValueSources(project, values).reaches()
    assert first and sources.read == ["runner.py"]
    ValueSources(project, values).reaches()
    assert sources.read == ["runner.py"]
    # the class's facts never carry them
    cls = project.resolve_class("ModelRunner", str(runner))
    assert cls is not None
    method = cls.methods["execute_model"]
    assert not hasattr(method, "bindings") and not hasattr(method, "sinks")

    changed = _Reads({other: UNRELATED + "\n"})
    again = ValueSources(project, values.changed(changed)).reaches()
    assert again == first and changed.read == [] and sources.read == ["runner.py"]
