"""The rule catalog: one place that says what every code means.

A :class:`Rule` holds a code, its name, the tool that reports it, a one-line summary,
why it matters, and a bad and a good example that run as tests (a bad example
produces exactly its code, a good one nothing). The rules of ``runnercheck check``
keep their entries beside their checks (:mod:`runnercheck.check.rules`); the entries
here are the ones the layering keeps central: the errors of ``check`` itself, the
mypy plugin's rules (``name`` is the mypy error code: ``# type: ignore[name]``,
``disable_error_code``), the runtime validator's, and the reasons ``migrate`` refuses
or skips something. ``runnercheck rules`` lists them all.

An example of several files separates them with ``# file: NAME.py`` lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Tool = Literal["check", "mypy", "fuzz", "migrate"]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    tool: Tool
    summary: str
    why: str
    bad: str
    good: str
    #: False when the examples only illustrate (the tool reports the code itself, on
    #: input no example can hold, such as an unreadable file or an internal error).
    runnable: bool = True


_CENTRAL: tuple[Rule, ...] = (
    Rule(
        code="RC001",
        name="syntax-error",
        tool="check",
        summary="A source file could not be read or parsed; it was not analysed.",
        why="A file the tools cannot read may hide any other finding; the run reports it and exits non-zero instead of silently skipping it.",
        bad="""\
def prepare_model_input(self, seq_group_metadata_list:
    return None
""",
        good="""\
def prepare_model_input(self, seq_group_metadata_list):
    return None
""",
    ),
    Rule(
        code="RC002",
        name="internal-error",
        tool="check",
        summary="The checker failed on this file or class; it was not (fully) analysed.",
        why="An internal error must not hide the rest of the run: it is reported for the file it happened in, the other files are still checked, and the run exits non-zero.",
        bad="(reported by runnercheck itself, with the exception)",
        good="(no such finding)",
        runnable=False,
    ),
    Rule(
        code="RC201",
        name="runner-input-protocol",
        tool="mypy",
        summary="A runner's input type does not satisfy the broadcastable protocol.",
        why="The runner's `T` (or its bound) must provide the instance method `as_broadcastable_tensor_dict()` (no required argument, returns a dict) and the classmethod `from_broadcasted_tensor_dict(tensor_dict, ...)` (the dict as its one required argument), or non-driver ranks cannot rebuild it. Reported at the runner, naming the member and why; a `T` outside the base's bound is mypy's [type-var].",
        bad="""\
class ModelRunner(ModelRunnerBase[ModelInput]): ...
# ModelInput.from_broadcasted_tensor_dict is an instance method""",
        good="""\
@classmethod
def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None) -> Self: ...""",
        runnable=False,
    ),
    Rule(
        code="RC202",
        name="from-dict-fixed-return",
        tool="mypy",
        summary="`from_broadcasted_tensor_dict` is declared to return, or builds, a fixed class instead of `Self` / `cls(...)`.",
        why="Subclasses inherit a classmethod typed to return the parent, so every caller needs `cast()`; building `ModelInput(...)` instead of `cls(...)` also loses the subclass at run time. Checked on every class that defines the classmethod.",
        bad="""\
@classmethod
def from_broadcasted_tensor_dict(cls, d) -> 'ModelInput':
    return ModelInput(**d)""",
        good="""\
@classmethod
def from_broadcasted_tensor_dict(cls, d) -> Self:
    return cls(**d)""",
        runnable=False,
    ),
    Rule(
        code="RC203",
        name="runner-input-covariance",
        tool="mypy",
        summary="A runner's `prepare_model_input`/`make_model_input_...` does not return its `T`.",
        why="The worker passes what these return to `execute_model(model_input: T)`; a looser return type (e.g. the input base class) hides a mismatch plain mypy accepts when the base's annotation is loose too. Overrides mypy already rejects are its [override].",
        bad="""\
class ModelRunner(ModelRunnerBase[ModelInputForGPU]):
    def prepare_model_input(self, seqs) -> ModelRunnerInputBase: ...""",
        good="    def prepare_model_input(self, seqs) -> ModelInputForGPU: ...",
        runnable=False,
    ),
    Rule(
        code="RC204",
        name="execute-input-mismatch",
        tool="mypy",
        summary="`execute_model`'s `model_input` parameter does not accept the runner's `T`.",
        why="The worker calls `execute_model` with what `prepare_model_input` produced; a parameter typed for another input class is a latent AttributeError (reported where plain mypy accepts the override, e.g. when the base takes `Any`).",
        bad="def execute_model(self, model_input: CPUModelInput, kv_caches): ...  # T is GPU",
        good="def execute_model(self, model_input: ModelInputForGPU, kv_caches): ...",
        runnable=False,
    ),
    Rule(
        code="RC205",
        name="unbroadcastable-value",
        tool="mypy",
        summary="A value in the broadcast dict has a type that cannot be broadcast.",
        why="Broadcast values must be tensors (torch, numpy), numbers, str, bytes, bool, None, enum members, or containers, dataclasses, msgspec Structs, named tuples and typed dicts of these (plus `broadcastable_types`); functions, classes and other objects fail to pickle or arrive as a different object.",
        bad="return {'stream': torch.cuda.current_stream()}",
        good="return {'input_tokens': self.input_tokens}",
        runnable=False,
    ),
    Rule(
        code="RC206",
        name="runnercheck-internal",
        tool="mypy",
        summary="The plugin met a state it did not expect; the message says where.",
        why="The plugin never crashes mypy: an internal surprise is reported so it can be filed, and the rest of the run goes on.",
        bad="(reported by the plugin itself)",
        good="(no such error)",
        runnable=False,
    ),
    Rule(
        code="RC301",
        name="roundtrip-lost-field",
        tool="fuzz",
        summary="A field arrives on a receiving rank as its default instead of the sent value.",
        why="The field is not in the broadcast dict (or not read back), so non-driver ranks compute with different input from the driver.",
        bad="# as_broadcastable_tensor_dict omits 'lora_mapping'",
        good="# every non-driver-only field is broadcast and read back",
        runnable=False,
    ),
    Rule(
        code="RC302",
        name="roundtrip-exception",
        tool="fuzz",
        summary="Converting, broadcasting or rebuilding the input raised on some rank.",
        why="Recursion, unknown keyword arguments and unpicklable values only fail with several ranks; the fuzzer shows which rank raised what.",
        bad="return cls.from_broadcasted_tensor_dict(tensor_dict)",
        good="return cls(**tensor_dict)",
        runnable=False,
    ),
    Rule(
        code="RC303",
        name="roundtrip-altered-value",
        tool="fuzz",
        summary="A field arrives with another type, dtype, shape, value or device type.",
        why="A silent conversion (e.g. int64 -> int32, a list to a tuple) changes what the model computes on non-driver ranks.",
        bad="'input_positions': self.input_positions.to(torch.int32)",
        good="'input_positions': self.input_positions",
        runnable=False,
    ),
    Rule(
        code="RC304",
        name="roundtrip-nondeterministic",
        tool="fuzz",
        summary="The same input round-tripped twice gives different results.",
        why="Ranks must rebuild identical inputs; order- or time-dependent conversion makes tensor-parallel ranks diverge.",
        bad="return {k: v for k, v in zip(random.sample(keys, len(keys)), values)}",
        good="return {k: getattr(self, k) for k in keys}",
        runnable=False,
    ),
    Rule(
        code="RC305",
        name="roundtrip-mutates-sender",
        tool="fuzz",
        summary="`as_broadcastable_tensor_dict` changes the object it is called on.",
        why="The driver keeps using its input after broadcasting it; a conversion that pops or rewrites its own fields corrupts the driver's step.",
        bad="d = self.__dict__; d.pop('seq_lens'); return d",
        good="d = dict(self.__dict__); d.pop('seq_lens'); return d",
        runnable=False,
    ),
    Rule(
        code="RC306",
        name="rank-failure",
        tool="fuzz",
        summary="A rank died, or a collective missed its deadline.",
        why="A rank that raises or blocks makes the others wait forever in the real engine; the fuzzer reports it instead of hanging.",
        bad="if rank != 0: raise RuntimeError('only on non-driver')",
        good="(every rank completes the round trip)",
        runnable=False,
    ),
    Rule(
        code="MIG001",
        name="syntax-error",
        tool="migrate",
        summary="The file does not parse; it was skipped.",
        why="migrate reads meaning with the same parser as check; a file Python cannot parse is reported and left alone, never guessed at.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG002",
        name="unreadable",
        tool="migrate",
        summary="The file cannot be read or decoded; it was skipped.",
        why="A file that cannot be read or decoded as source is reported by name instead of silently skipped.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG003",
        name="symlink-outside",
        tool="migrate",
        summary="A symbolic link points outside the given paths; skipped.",
        why="migrate writes only inside the paths it was given and never follows a link out of them.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG101",
        name="extra-broadcast",
        tool="migrate",
        summary="A broadcast the planner does not recognise.",
        why="The merged shape has exactly one broadcast per step; a broadcast the planner cannot place (a second one in the runner, one outside the driver/non-driver split) would be lost or duplicated.",
        bad="(see summary)",
        good="One broadcast in the driver branch of the `if self.is_driver_worker:` split and one receive at the top of the other branch; a further one only as `if <cond>: ...; broadcast(<value>)` on the driver and `if <cond>: <d> = broadcast(); ...` on the other ranks, with <cond> read from values the first broadcast carries.",
        runnable=False,
    ),
    Rule(
        code="MIG102",
        name="untraceable-key",
        tool="migrate",
        summary="A broadcast key whose value or use cannot be traced.",
        why="Every broadcast key must become a field of the new input class with a traceable value; a key whose value or use cannot be traced could change what non-driver ranks compute.",
        bad="(see summary)",
        good="Build the broadcast dict as a literal whose values are the values the method returns (or values the tail after the split reads), and read the received dict only by literal key or through one `**dict` call.",
        runnable=False,
    ),
    Rule(
        code="MIG103",
        name="missing-runner",
        tool="migrate",
        summary="A runner the worker drives cannot be found.",
        why="The worker and every runner it drives are rewritten together; a runner outside the given paths would keep the old calling convention.",
        bad="(see summary)",
        good="Give migrate the directory that holds every runner the worker drives.",
        runnable=False,
    ),
    Rule(
        code="MIG104",
        name="missing-worker",
        tool="migrate",
        summary="A runner broadcasts but no worker that drives it was found.",
        why="A runner that broadcasts but that no worker drives cannot be merged into a worker's broadcast.",
        bad="(see summary)",
        good="Give migrate the worker that drives the runner too.",
        runnable=False,
    ),
    Rule(
        code="MIG105",
        name="unrecognised-shape",
        tool="migrate",
        summary="A method does not have the driver/non-driver shape.",
        why="The rewrite moves the driver's and the non-driver's code into new methods; a method without the recognised driver/non-driver shape cannot be split safely.",
        bad="(see summary)",
        good="Write the method as `if self.is_driver_worker: <prepare; dict literal; broadcast> else: <receive; rebuild>`, then any statements every rank runs, then `return (a, b, ...)`.",
        runnable=False,
    ),
    Rule(
        code="MIG106",
        name="non-driver-state",
        tool="migrate",
        summary="The non-driver path reads runner state other than the attention backend.",
        why="Non-driver ranks rebuild the input from the broadcast dict alone; state the non-driver path reads from the runner would be missing there.",
        bad="(see summary)",
        good="Send the value in the broadcast dict instead of reading it from `self` on the other ranks.",
        runnable=False,
    ),
    Rule(
        code="MIG107",
        name="key-collision",
        tool="migrate",
        summary="The worker and a runner broadcast the same key.",
        why="The worker's and the runner's keys travel in one dict after the merge; the same key from both would overwrite one value.",
        bad="(see summary)",
        good="Rename one of the two keys.",
        runnable=False,
    ),
    Rule(
        code="MIG108",
        name="name-taken",
        tool="migrate",
        summary="A name the merged shape needs is already used.",
        why="The merged shape adds classes, methods and a base module; a name already in use would be shadowed.",
        bad="(see summary)",
        good="Rename the existing name (or delete the half-written merged API).",
        runnable=False,
    ),
    Rule(
        code="MIG109",
        name="unmigrated-caller",
        tool="migrate",
        summary="Code outside the group calls a method whose signature changes.",
        why="The runner's prepare and execute methods change signature; callers outside the group would break.",
        bad="(see summary)",
        good="Call the legacy method only from `execute_model`.",
        runnable=False,
    ),
    Rule(
        code="MIG110",
        name="verify-failed",
        tool="migrate",
        summary="The rewritten sources did not re-parse, compile or re-analyse as migrated.",
        why="Nothing is written unless the rewritten sources compile and re-analyse as migrated, with no finding the old sources lacked.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG199",
        name="internal-error",
        tool="migrate",
        summary="The planner failed on this group (a bug; please report it); the group was left alone.",
        why="A planner failure must not take other groups down: the group is left alone and the error is reported.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG201",
        name="parent-not-found",
        tool="migrate",
        summary="The parent class needed by a single-class codemod is not in the given paths.",
        why="The codemod needs the parent's broadcast dict to know which fields travel; it does not guess when the parent is not in the given paths.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG202",
        name="order-dependent",
        tool="migrate",
        summary="The rewrite would change which value wins for a key.",
        why="super() runs the parent's statements first; when the child adds keys before them, or reorders them, the merged dict would change.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG203",
        name="drifted-copy",
        tool="migrate",
        summary="A subclass dict re-lists only part of its parent's keys; calling super() would change what it broadcasts.",
        why="A partial copy of the parent's keys has already drifted; calling super() would start broadcasting keys the subclass dropped.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
)


def central() -> tuple[Rule, ...]:
    """The central entries (every code but the rules of ``runnercheck check``)."""
    return _CENTRAL


_BY_CODE = {rule.code: rule for rule in _CENTRAL}
_BY_NAME = {rule.name: rule for rule in _CENTRAL if rule.tool != "migrate"}


def lookup(rules: tuple[Rule, ...], code_or_name: str) -> Rule:
    """A rule of ``rules`` by code (``RC101``) or name (``recursive-from-dict``);
    KeyError otherwise."""
    key = code_or_name.strip()
    for rule in rules:
        if rule.code == key.upper() or (rule.tool != "migrate" and rule.name == key.lower()):
            return rule
    raise KeyError(code_or_name)


def get(code_or_name: str) -> Rule:
    """A central rule by code or name; KeyError otherwise."""
    key = code_or_name.strip()
    rule = _BY_CODE.get(key.upper()) or _BY_NAME.get(key.lower())
    if rule is None:
        raise KeyError(code_or_name)
    return rule


def for_tool(tool: Tool, rules: tuple[Rule, ...] = _CENTRAL) -> tuple[Rule, ...]:
    return tuple(rule for rule in rules if rule.tool == tool)


def markdown_table(rules: tuple[Rule, ...]) -> str:
    """The README's rule table."""
    lines = ["| code | name | tool | summary |", "| --- | --- | --- | --- |"]
    for rule in rules:
        lines.append(f"| {rule.code} | `{rule.name}` | {rule.tool} | {rule.summary} |")
    return "\n".join(lines)
