"""The rule catalog: one place that says what every code means.

``runnercheck check``, the mypy plugin, ``runnercheck fuzz``, the README's rule
table and the SARIF output all read their codes, names and texts from here, so
a code never means two things. For rules run by the mypy plugin, ``name`` is the
mypy error code (``# type: ignore[name]``, ``disable_error_code``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Engine = Literal["check", "mypy", "fuzz"]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    engine: Engine
    summary: str
    why: str
    bad: str
    good: str


RULES: tuple[Rule, ...] = (
    # ------------------------------------------------------------------ check
    Rule(
        code="RC001",
        name="syntax-error",
        engine="check",
        summary="A source file could not be read or parsed; it was not analysed.",
        why="A file the tools cannot read may hide any other finding; the run reports it "
        "and exits non-zero instead of silently skipping it.",
        bad="def prepare_model_input(self, seq_group_metadata_list:\n    ...",
        good="def prepare_model_input(self, seq_group_metadata_list):\n    ...",
    ),
    Rule(
        code="RC002",
        name="internal-error",
        engine="check",
        summary="The checker failed on this file or class; it was not (fully) analysed.",
        why="An internal error must not hide the rest of the run: it is reported for the file "
        "it happened in, the other files are still checked, and the run exits non-zero.",
        bad="(reported by runnercheck itself, with the exception)",
        good="(no such finding)",
    ),
    Rule(
        code="RC003",
        name="half-applied-migration",
        engine="check",
        summary="An interrupted `runnercheck migrate` left a worker/runner group half-applied.",
        why="Some files of the group are in the merged shape and some are not: every file "
        "compiles, but the old worker calls the new runner with the old arguments and fails "
        "at run time. `runnercheck migrate --recover` puts the old contents back.",
        bad="# worker.py still calls execute_model(seq_group_metadata_list, kv_caches)\n"
        "# model_runner.py already defines execute_model(model_input, kv_caches)",
        good="# both files old, or both files migrated",
    ),
    Rule(
        code="RC101",
        name="recursive-from-dict",
        engine="check",
        summary="`from_broadcasted_tensor_dict` calls itself on its own class.",
        why="The classmethod recurses until RecursionError, but only on non-driver ranks, "
        "so single-GPU tests never see it.",
        bad="@classmethod\ndef from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):\n"
        "    return cls.from_broadcasted_tensor_dict(tensor_dict)",
        good="@classmethod\ndef from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):\n"
        "    return cls(**tensor_dict)",
    ),
    Rule(
        code="RC102",
        name="unaccepted-broadcast-key",
        engine="check",
        summary="A key is broadcast that the receiving `cls(**tensor_dict)` does not accept.",
        why="The receiver raises TypeError (unexpected keyword argument), and only at "
        "tensor-parallel size > 1.",
        bad="def as_broadcastable_tensor_dict(self):\n"
        "    return {'input_tokens': self.input_tokens, 'num_prefills': 3}\n"
        "# ... from_broadcasted_tensor_dict: return cls(**tensor_dict)",
        good="def as_broadcastable_tensor_dict(self):\n"
        "    return {'input_tokens': self.input_tokens}",
    ),
    Rule(
        code="RC103",
        name="unbroadcast-field",
        engine="check",
        summary="A dataclass field is neither broadcast nor declared driver-only.",
        why="Non-driver ranks silently see the field's default (usually None) and compute "
        "something different from the driver.",
        bad="@dataclass(frozen=True)\nclass ModelInput(ModelRunnerInputBase):\n"
        "    input_tokens: torch.Tensor\n    lora_mapping: object = None\n"
        "    def as_broadcastable_tensor_dict(self):\n"
        "        return {'input_tokens': self.input_tokens}",
        good="    lora_mapping: object = field(default=None, "
        "metadata={'runnercheck': 'driver-only'})",
    ),
    Rule(
        code="RC104",
        name="parent-dict-drift",
        engine="check",
        summary="A subclass re-lists its parent's broadcast keys instead of calling `super()`.",
        why="The copy drifts: a key later added to the parent is never broadcast by the "
        "subclass, and one the subclass dropped goes unnoticed.",
        bad="def as_broadcastable_tensor_dict(self):\n"
        "    return {'input_tokens': self.input_tokens, 'pooling': self.pooling}",
        good="def as_broadcastable_tensor_dict(self):\n"
        "    d = super().as_broadcastable_tensor_dict()\n    d['pooling'] = self.pooling\n"
        "    return d",
    ),
    Rule(
        code="RC105",
        name="collective-in-prepare",
        engine="check",
        summary="`prepare_model_input` (or a method it calls) runs a collective.",
        why="Only the driver prepares inputs; a collective there is matched by nothing on "
        "the other ranks, so they deadlock or pair it with the wrong broadcast.",
        bad="def prepare_model_input(self, seq_group_metadata_list):\n"
        "    ...\n    broadcast_tensor_dict(metadata, src=0)",
        good="def prepare_model_input(self, seq_group_metadata_list):\n"
        "    ...\n    return ModelInput(...)  # the worker broadcasts once",
    ),
    Rule(
        code="RC106",
        name="paired-broadcast",
        engine="check",
        summary="More than one step-metadata broadcast per step (worker and runner both "
        "broadcast); run `runnercheck migrate`.",
        why="Each broadcast is a pickled metadata round plus one collective per tensor; "
        "merging the worker's and runner's dicts into one broadcast measured +1.3% "
        "throughput on 8xH100 in vLLM 0.5.1.",
        bad="# worker.execute_model\nbroadcast_tensor_dict({'num_seq_groups': n, ...}, src=0)\n"
        "# model_runner.prepare_input_tensors\nbroadcast_tensor_dict(metadata_dict, src=0)",
        good="# worker.execute_model\nbroadcast_tensor_dict({**worker_input.as_broadcastable_"
        "tensor_dict(), **model_input.as_broadcastable_tensor_dict()}, src=0)",
    ),
    Rule(
        code="RC107",
        name="missing-contract-method",
        engine="check",
        summary="A concrete worker or runner leaves an abstract contract method unimplemented.",
        why="The class fails at instantiation (or at the first step) instead of at review; "
        "vLLM's NeuronWorker shipped without `execute_worker`.",
        bad="class NeuronWorker(LocalOrDistributedWorkerBase):\n"
        "    def prepare_worker_input(self, execute_model_req): ...",
        good="class NeuronWorker(LocalOrDistributedWorkerBase):\n"
        "    def prepare_worker_input(self, execute_model_req): ...\n"
        "    def execute_worker(self, worker_input): ...",
    ),
    Rule(
        code="RC108",
        name="unpicklable-broadcast-value",
        engine="check",
        summary="A value put in the broadcast dict cannot be pickled or broadcast.",
        why="Lambdas, generators, locks, open files, CUDA streams and modules fail in "
        "`broadcast_object_list` on the driver, only when tensor parallelism is on.",
        bad="return {'input_tokens': self.input_tokens, 'sampler': lambda x: x.argmax(-1)}",
        good="return {'input_tokens': self.input_tokens, 'greedy': True}",
    ),
    # ------------------------------------------------------------------- mypy
    Rule(
        code="RC201",
        name="runner-input-protocol",
        engine="mypy",
        summary="A runner's input type does not satisfy the broadcastable protocol.",
        why="The runner's `T` (or its bound) must provide the instance method "
        "`as_broadcastable_tensor_dict()` (no required argument, returns a dict) and the "
        "classmethod `from_broadcasted_tensor_dict(tensor_dict, ...)` (the dict as its one "
        "required argument), or non-driver ranks cannot rebuild it. Reported at the runner, "
        "naming the member and why; a `T` outside the base's bound is mypy's [type-var].",
        bad="class ModelRunner(ModelRunnerBase[ModelInput]): ...\n"
        "# ModelInput.from_broadcasted_tensor_dict is an instance method",
        good="@classmethod\ndef from_broadcasted_tensor_dict(cls, tensor_dict, "
        "attn_backend=None) -> Self: ...",
    ),
    Rule(
        code="RC202",
        name="from-dict-fixed-return",
        engine="mypy",
        summary="`from_broadcasted_tensor_dict` is declared to return, or builds, a fixed class "
        "instead of `Self` / `cls(...)`.",
        why="Subclasses inherit a classmethod typed to return the parent, so every caller "
        "needs `cast()`; building `ModelInput(...)` instead of `cls(...)` also loses the "
        "subclass at run time. Checked on every class that defines the classmethod.",
        bad="@classmethod\ndef from_broadcasted_tensor_dict(cls, d) -> 'ModelInput':\n"
        "    return ModelInput(**d)",
        good="@classmethod\ndef from_broadcasted_tensor_dict(cls, d) -> Self:\n    return cls(**d)",
    ),
    Rule(
        code="RC203",
        name="runner-input-covariance",
        engine="mypy",
        summary="A runner's `prepare_model_input`/`make_model_input_...` does not return its `T`.",
        why="The worker passes what these return to `execute_model(model_input: T)`; a looser "
        "return type (e.g. the input base class) hides a mismatch plain mypy accepts when the "
        "base's annotation is loose too. Overrides mypy already rejects are its [override].",
        bad="class ModelRunner(ModelRunnerBase[ModelInputForGPU]):\n"
        "    def prepare_model_input(self, seqs) -> ModelRunnerInputBase: ...",
        good="    def prepare_model_input(self, seqs) -> ModelInputForGPU: ...",
    ),
    Rule(
        code="RC204",
        name="execute-input-mismatch",
        engine="mypy",
        summary="`execute_model`'s `model_input` parameter does not accept the runner's `T`.",
        why="The worker calls `execute_model` with what `prepare_model_input` produced; a "
        "parameter typed for another input class is a latent AttributeError (reported where "
        "plain mypy accepts the override, e.g. when the base takes `Any`).",
        bad="def execute_model(self, model_input: CPUModelInput, kv_caches): ...  # T is GPU",
        good="def execute_model(self, model_input: ModelInputForGPU, kv_caches): ...",
    ),
    Rule(
        code="RC205",
        name="unbroadcastable-value",
        engine="mypy",
        summary="A value in the broadcast dict has a type that cannot be broadcast.",
        why="Broadcast values must be tensors (torch, numpy), numbers, str, bytes, bool, None, "
        "enum members, or containers, dataclasses, msgspec Structs, named tuples and typed "
        "dicts of these (plus `broadcastable_types`); functions, classes and other objects "
        "fail to pickle or arrive as a different object.",
        bad="return {'stream': torch.cuda.current_stream()}",
        good="return {'input_tokens': self.input_tokens}",
    ),
    Rule(
        code="RC206",
        name="runnercheck-internal",
        engine="mypy",
        summary="The plugin met a state it did not expect; the message says where.",
        why="The plugin never crashes mypy: an internal surprise is reported so it can be "
        "filed, and the rest of the run goes on.",
        bad="(reported by the plugin itself)",
        good="(no such error)",
    ),
    # ------------------------------------------------------------------- fuzz
    Rule(
        code="RC301",
        name="roundtrip-lost-field",
        engine="fuzz",
        summary="A field arrives on a receiving rank as its default instead of the sent value.",
        why="The field is not in the broadcast dict (or not read back), so non-driver ranks "
        "compute with different input from the driver.",
        bad="# as_broadcastable_tensor_dict omits 'lora_mapping'",
        good="# every non-driver-only field is broadcast and read back",
    ),
    Rule(
        code="RC302",
        name="roundtrip-exception",
        engine="fuzz",
        summary="Converting, broadcasting or rebuilding the input raised on some rank.",
        why="Recursion, unknown keyword arguments and unpicklable values only fail with "
        "several ranks; the fuzzer shows which rank raised what.",
        bad="return cls.from_broadcasted_tensor_dict(tensor_dict)",
        good="return cls(**tensor_dict)",
    ),
    Rule(
        code="RC303",
        name="roundtrip-altered-value",
        engine="fuzz",
        summary="A field arrives with another type, dtype, shape, value or device type.",
        why="A silent conversion (e.g. int64 -> int32, a list to a tuple) changes what the "
        "model computes on non-driver ranks.",
        bad="'input_positions': self.input_positions.to(torch.int32)",
        good="'input_positions': self.input_positions",
    ),
    Rule(
        code="RC304",
        name="roundtrip-nondeterministic",
        engine="fuzz",
        summary="The same input round-tripped twice gives different results.",
        why="Ranks must rebuild identical inputs; order- or time-dependent conversion makes "
        "tensor-parallel ranks diverge.",
        bad="return {k: v for k, v in zip(random.sample(keys, len(keys)), values)}",
        good="return {k: getattr(self, k) for k in keys}",
    ),
    Rule(
        code="RC305",
        name="roundtrip-mutates-sender",
        engine="fuzz",
        summary="`as_broadcastable_tensor_dict` changes the object it is called on.",
        why="The driver keeps using its input after broadcasting it; a conversion that pops "
        "or rewrites its own fields corrupts the driver's step.",
        bad="d = self.__dict__; d.pop('seq_lens'); return d",
        good="d = dict(self.__dict__); d.pop('seq_lens'); return d",
    ),
    Rule(
        code="RC306",
        name="rank-failure",
        engine="fuzz",
        summary="A rank died, or a collective missed its deadline.",
        why="A rank that raises or blocks makes the others wait forever in the real engine; "
        "the fuzzer reports it instead of hanging.",
        bad="if rank != 0: raise RuntimeError('only on non-driver')",
        good="(every rank completes the round trip)",
    ),
)

_BY_CODE = {rule.code: rule for rule in RULES}
_BY_NAME = {rule.name: rule for rule in RULES}


def get(code_or_name: str) -> Rule:
    """A rule by code (``RC101``) or name (``recursive-from-dict``); KeyError otherwise."""
    key = code_or_name.strip()
    rule = _BY_CODE.get(key.upper()) or _BY_NAME.get(key.lower())
    if rule is None:
        raise KeyError(code_or_name)
    return rule


def for_engine(engine: Engine) -> tuple[Rule, ...]:
    return tuple(rule for rule in RULES if rule.engine == engine)


def markdown_table() -> str:
    """The README's rule table, generated from the catalog."""
    lines = ["| code | name | engine | summary |", "| --- | --- | --- | --- |"]
    for rule in RULES:
        lines.append(f"| {rule.code} | `{rule.name}` | {rule.engine} | {rule.summary} |")
    return "\n".join(lines)
