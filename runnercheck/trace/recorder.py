"""Record every ``torch.distributed`` collective of this process, with its engine step,
contract method, call site and bytes.

:class:`Recorder` replaces the collectives of the ``torch.distributed`` package
(``broadcast``, ``broadcast_object_list``, ``all_reduce``, ``all_gather``, ``barrier``,
``send``/``recv``, ...) with thin wrappers. A wrapper writes one line (see
:mod:`runnercheck.trace.records`) and then calls the original, so the line exists even if
the call never returns. Calls that torch makes internally (through
``torch.distributed.distributed_c10d``) are not recorded, nor is a collective called from
inside another one.

What a line says is read off the Python stack at the call:

* the step: the outermost frame of a *step method* (by default ``execute_model``, and
  the non-driver step of vLLM's workers, ``_execute_model_non_driver`` in 0.4-0.5.0 and
  the speculative-decoding worker's ``_run_non_driver_rank``); a new frame of it is a new
  step. A wrapper worker's inner ``execute_model`` calls are inside its own, so they do
  not start steps;
* the logical broadcast: the outermost frame of a *logical function*
  (``broadcast_tensor_dict``): its parts (the metadata's ``broadcast_object_list`` and
  one ``broadcast`` per tensor) share one logical index, and their call site is the
  line that called ``broadcast_tensor_dict``;
* the contract method: the innermost frame of a prepare method
  (``prepare_model_input``, ``prepare_worker_input``, ``prepare_input_tensors``), a
  convert method (``as_broadcastable_tensor_dict``, ``from_broadcasted_tensor_dict``,
  ``make_model_input_from_broadcasted_tensor_dict``), ``execute_model`` of a runner
  (``execute``) or of a worker, or another step method (``worker``).

Every result about a code object is computed once; a call costs one walk up the stack.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from types import CodeType, FrameType
from typing import Any

from runnercheck.contract import VLLM, Contract
from runnercheck.trace import records
from runnercheck.trace.records import CollectiveRecord

#: The ``torch.distributed`` functions a recorder wraps (those this torch has).
COLLECTIVES = (
    "broadcast",
    "broadcast_object_list",
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "all_to_all",
    "all_to_all_single",
    "send",
    "recv",
    "isend",
    "irecv",
    "barrier",
)
#: Collectives whose payload is the second argument (the first is where results land).
_PAYLOAD_SECOND = frozenset(
    {
        "all_gather",
        "all_gather_into_tensor",
        "all_gather_object",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "all_to_all",
        "all_to_all_single",
        "gather_object",
    }
)
_OBJECT_OPS = frozenset(
    {"broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list"}
)

#: Step methods: vLLM's worker step on every rank, and its non-driver steps.
DEFAULT_STEP_METHODS = ("execute_model", "_execute_model_non_driver", "_run_non_driver_rank")


@dataclass(frozen=True)
class RecorderOptions:
    """The names a recorder looks for on the stack (defaults: vLLM's)."""

    step_methods: tuple[str, ...] = DEFAULT_STEP_METHODS
    logical_functions: tuple[str, ...] = ("broadcast_tensor_dict",)
    prepare_methods: tuple[str, ...] = (
        "prepare_model_input",
        "prepare_worker_input",
        "prepare_input_tensors",
    )
    convert_methods: tuple[str, ...] = (
        "as_broadcastable_tensor_dict",
        "from_broadcasted_tensor_dict",
        "make_model_input_from_broadcasted_tensor_dict",
    )
    #: ``execute_model``: ``execute`` on a runner (an object with a prepare or make-input
    #: method), ``worker`` on anything else.
    execute_methods: tuple[str, ...] = ("execute_model",)
    worker_methods: tuple[str, ...] = ("execute_worker", "start_worker_execution_loop")

    @classmethod
    def from_contract(
        cls, contract: Contract = VLLM, step_methods: tuple[str, ...] | None = None
    ) -> RecorderOptions:
        """The contract's names, plus vLLM's other prepare/step methods."""
        base = cls()
        steps = step_methods if step_methods else base.step_methods
        return replace(
            base,
            step_methods=tuple(dict.fromkeys(steps)),
            logical_functions=(contract.broadcast_function,),
            prepare_methods=tuple(
                dict.fromkeys((contract.prepare_input_method, *base.prepare_methods[1:]))
            ),
            convert_methods=(
                contract.as_dict_method,
                contract.from_dict_method,
                contract.make_input_method,
            ),
            execute_methods=(contract.execute_method,),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RecorderOptions:
        data = json.loads(text) if text else {}
        return cls(**{key: tuple(value) for key, value in data.items()})


#: Bits of what a code object is (see ``Recorder._code_flags``).
_EXTERNAL = 1  # not torch's, not the recorder's: may be a call site
_STEP = 2  # a step method
_LOGICAL = 4  # a logical broadcast function
_METHOD = 8  # a contract method


@dataclass
class _World:
    key: str
    rank: int
    size: int
    announced: bool = False
    index: int = 0
    step: int = -1
    step_frame: FrameType | None = None
    step_label: str = ""
    logical: int = -1
    logical_frame: FrameType | None = None
    method_frame: FrameType | None = None
    method_label: str = ""


class Sink:
    """Where lines go: a trace file (:class:`FileSink`) or memory (:class:`MemorySink`)."""

    def write(self, line: str) -> None:
        raise NotImplementedError

    def reopen_after_fork(self) -> None:
        """The child of a fork writes on its own."""


class FileSink(Sink):
    """``<directory>/<pid>.trace``, opened on the first line, appended one line a write."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None

    @property
    def path(self) -> str:
        return os.path.join(self.directory, f"{os.getpid()}.trace")

    def write(self, line: str) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, line.encode())

    def reopen_after_fork(self) -> None:
        self._fd = None


class MemorySink(Sink):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, line: str) -> None:
        self.lines.append(line)


def _nbytes(value: Any, objects: bool) -> int:
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int) and hasattr(value, "dtype"):
        return nbytes
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(item, objects) for item in value if item is not None)
    if objects and value is not None:
        try:
            return len(pickle.dumps(value))
        except Exception:  # the collective itself reports what cannot be pickled
            return 0
    return 0


class _Flags(dict[CodeType, int]):
    """Flags per code object, computed on first sight."""

    def __init__(self, compute: Callable[[CodeType], int]) -> None:
        super().__init__()
        self.compute = compute

    def __missing__(self, code: CodeType) -> int:
        return self.compute(code)


class _Local(threading.local):
    busy = False


class Recorder:
    """Wraps ``torch.distributed``'s collectives and records each call to ``sink``.

    As a context manager (in one process, lines kept in memory)::

        with Recorder() as recorder:
            worker.execute_model(request)
        recorder.records()  # [CollectiveRecord, ...]
    """

    def __init__(self, sink: Sink | None = None, options: RecorderOptions | None = None) -> None:
        self.sink = sink if sink is not None else MemorySink()
        self.options = options if options is not None else RecorderOptions()
        self._flags = _Flags(self._code_flags)
        #: Per contract-method code object: its kind (``?``: an execute method whose kind
        #: depends on ``self``); per code object seen as a call site: its file as shown.
        self._code_kinds: dict[CodeType, str] = {}
        self._displays: dict[CodeType, str] = {}
        self._dtypes: dict[Any, str] = {}
        self._local = _Local()
        self._world: _World | None = None
        self._groups: dict[int, tuple[Any, str]] = {}
        self._patches: list[tuple[Any, str, Any]] = []
        self._internal_dirs: tuple[str, ...] = ()
        self._failed = False
        self._fork_hook = False
        o = self.options
        self._steps = frozenset(o.step_methods)
        self._logical = frozenset(o.logical_functions)
        self._kinds: dict[str, str] = {name: "worker" for name in o.worker_methods}
        self._kinds.update({name: "worker" for name in o.step_methods})
        self._kinds.update({name: "?" for name in o.execute_methods})
        self._kinds.update({name: "convert" for name in o.convert_methods})
        self._kinds.update({name: "prepare" for name in o.prepare_methods})
        self._cwd = os.getcwd() + os.sep

    # ------------------------------------------------------------------ install

    @property
    def installed(self) -> bool:
        return bool(self._patches)

    def install(self) -> None:
        """Wrap the collectives of ``torch.distributed`` (imported now if need be)."""
        if self._patches:
            return
        import torch
        import torch.distributed as dist

        here = os.path.dirname(os.path.abspath(__file__))
        # runnercheck.broadcast holds the reference broadcast_tensor_dict (a logical
        # function, which wins) and the wrappers of its collective counter (internal).
        reference = os.path.join(os.path.dirname(here), "broadcast.py")
        self._internal_dirs = (
            os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            here + os.sep,
            reference,
        )
        for name in COLLECTIVES:
            original = getattr(dist, name, None)
            if callable(original):
                self._patch(dist, name, self._wrap(name, original))
        for name, hook in (("init_process_group", self._joined), ("destroy_process_group", None)):
            original = getattr(dist, name, None)
            if callable(original):
                self._patch(dist, name, self._wrap_lifecycle(original, hook))
        if not self._fork_hook and hasattr(os, "register_at_fork"):
            self._fork_hook = True
            os.register_at_fork(after_in_child=self._after_fork)

    def uninstall(self) -> None:
        while self._patches:
            owner, name, original = self._patches.pop()
            setattr(owner, name, original)
        self._world = None

    def __enter__(self) -> Recorder:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def records(self) -> list[CollectiveRecord]:
        """The collectives recorded so far (memory sink only), bytes amended."""
        if not isinstance(self.sink, MemorySink):
            raise TypeError("records() needs a MemorySink")
        return list(parse_lines(self.sink.lines).values())

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    def _after_fork(self) -> None:
        self._world = None
        self._local = _Local()
        self.sink.reopen_after_fork()

    # ------------------------------------------------------------------ worlds

    def _wrap_lifecycle(self, original: Callable[..., Any], hook: Any) -> Callable[..., Any]:
        def lifecycle(*args: Any, **kwargs: Any) -> Any:
            self._world = None
            result = original(*args, **kwargs)
            if hook is not None:
                hook(args, kwargs)
            return result

        lifecycle.__wrapped__ = original  # type: ignore[attr-defined]
        lifecycle.__name__ = getattr(original, "__name__", "collective")
        lifecycle.__doc__ = original.__doc__
        return lifecycle

    def _joined(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        init_method = kwargs.get("init_method", args[1] if len(args) > 1 else None)
        store = kwargs.get("store")
        self._world = self._new_world(_world_key(init_method, store))
        # Announced at once: a rank that joined but runs no collective yet is known.
        try:
            self._current_world()
        except Exception as exc:
            self._fail(exc)

    def _new_world(self, key: str) -> _World:
        import torch.distributed as dist

        return _World(key=key, rank=dist.get_rank(), size=dist.get_world_size())

    def _current_world(self) -> _World | None:
        world = self._world
        if world is None:
            import torch.distributed as dist

            if not dist.is_initialized():
                return None
            world = self._world = self._new_world(_world_key(None, None))
        if not world.announced:
            world.announced = True
            self.sink.write(records.encode_world(world.key, world.rank, world.size))
        return world

    def _group(self, group: Any) -> str:
        if group is None:
            return ""
        known = self._groups.get(id(group))
        if known is None or known[0] is not group:
            import torch.distributed as dist

            try:
                ranks = dist.get_process_group_ranks(group)
                text = ",".join(str(rank) for rank in ranks)
                world = dist.get_world_size()
                if sorted(ranks) == list(range(world)):
                    text = ""
            except Exception:
                text = "?"
            known = self._groups[id(group)] = (group, text)
        return known[1]

    # ------------------------------------------------------------------ calls

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        import inspect

        try:
            parameters = list(inspect.signature(original).parameters)
        except (TypeError, ValueError):
            parameters = []

        def position(*names: str) -> tuple[str, int]:
            for candidate in names:
                if candidate in parameters:
                    return candidate, parameters.index(candidate)
            return "", -1

        peer = position("src", "dst")
        group = position("group")
        payload_index = 1 if name in _PAYLOAD_SECOND else 0
        objects = name in _OBJECT_OPS

        def argument(spec: tuple[str, int], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            key, index = spec
            if not key:
                return None
            if index < len(args):
                return args[index]
            return kwargs.get(key)

        def collective(*args: Any, **kwargs: Any) -> Any:
            if self._local.busy:
                return original(*args, **kwargs)
            state = self._local
            state.busy = True
            try:
                record = None
                try:
                    payload = args[payload_index] if payload_index < len(args) else None
                    record = self._record(
                        name,
                        argument(peer, args, kwargs),
                        argument(group, args, kwargs),
                        payload,
                        objects,
                        sys._getframe(1),
                    )
                except Exception as exc:
                    self._fail(exc)
                result = original(*args, **kwargs)
                if record is not None and objects and record[1]:
                    self._amend(record[0], args[0] if args else None)
                return result
            finally:
                state.busy = False

        collective.__wrapped__ = original  # type: ignore[attr-defined]
        collective.__name__ = getattr(original, "__name__", name)
        collective.__doc__ = original.__doc__
        return collective

    def _record(
        self,
        op: str,
        peer: Any,
        group: Any,
        payload: Any,
        objects: bool,
        frame: FrameType,
    ) -> tuple[int, bool] | None:
        """Write the line of one call; returns (index, bytes known only afterwards)."""
        world = self._world
        if world is None or not world.announced:
            world = self._current_world()
            if world is None:
                return None
        site_frame, logical_frame, method_frame, step_frame = self._walk(frame, world.step_frame)
        if step_frame is None:
            world.step_frame = None
            step = -1
            step_label = ""
        else:
            if step_frame is not world.step_frame:
                world.step += 1
                world.step_frame = step_frame
                world.step_label = _clean(self._label(step_frame))
            step = world.step
            step_label = world.step_label
        logical = -1
        logical_name = ""
        if logical_frame is not None:
            if logical_frame is not world.logical_frame:
                world.logical += 1
                world.logical_frame = logical_frame
            logical = world.logical
            logical_name = logical_frame.f_code.co_name
        kind = method = ""
        if method_frame is not None:
            if method_frame is not world.method_frame:
                world.method_frame = method_frame
                world.method_label = _clean(self._label(method_frame))
            kind = self._kind(method_frame)
            method = world.method_label
        receiving = objects and op == "broadcast_object_list" and peer != world.rank
        nbytes = 0 if receiving else _nbytes(payload, objects)
        if site_frame is not None:
            code = site_frame.f_code
            site = f"{self._displays[code]}:{site_frame.f_lineno}"
            site_function = code.co_qualname
        else:
            site = site_function = ""
        shape = ""
        if not objects and payload is not None:
            dtype = getattr(payload, "dtype", None)
            if dtype is not None:
                text = self._dtypes.get(dtype)
                if text is None:
                    text = self._dtypes[dtype] = str(dtype).removeprefix("torch.")
                shape = f"{text}:{payload.numel()}"
        index = world.index
        world.index += 1
        group_text = self._group(group) if group is not None else ""
        peer_value = peer if isinstance(peer, int) else -1
        self.sink.write(
            f"c\t{index}\t{op}\t{group_text}\t{peer_value}\t{shape}\t{nbytes}\t{step}"
            f"\t{logical}\t{logical_name}\t{kind}\t{method}\t{step_label}\t{site}"
            f"\t{site_function}\n"
        )
        return index, receiving

    def _amend(self, index: int, object_list: Any) -> None:
        try:
            self.sink.write(records.encode_bytes(index, _nbytes(object_list, True)))
        except Exception as exc:
            self._fail(exc)

    def _walk(
        self, frame: FrameType, known_step: FrameType | None
    ) -> tuple[FrameType | None, FrameType | None, FrameType | None, FrameType | None]:
        """(call site, outermost logical broadcast, innermost contract method, outermost
        step method) on the stack above ``frame``. The walk ends at ``known_step``, the
        outermost step frame of the previous call: a live frame keeps its callers, so
        nothing beyond it can have changed."""
        flags_of = self._flags
        site = logical = method = step = None
        current: FrameType | None = frame
        while current is not None:
            flags = flags_of[current.f_code]
            if flags > _EXTERNAL:
                if flags & _LOGICAL:
                    logical = current
                    site = None
                elif site is None and flags & _EXTERNAL:
                    site = current
                if method is None and flags & _METHOD:
                    method = current
                if flags & _STEP:
                    step = current
                    if current is known_step:
                        break
            elif flags and site is None:
                site = current
            current = current.f_back
        return site, logical, method, step

    def _code_flags(self, code: CodeType) -> int:
        filename = os.path.abspath(code.co_filename)
        flags = 0
        if not filename.startswith(self._internal_dirs):
            flags |= _EXTERNAL
            display = filename[len(self._cwd) :] if filename.startswith(self._cwd) else filename
            self._displays[code] = _clean(display)
        if code.co_name in self._steps:
            flags |= _STEP
        if code.co_name in self._logical:
            flags |= _LOGICAL
        kind = self._kinds.get(code.co_name)
        if kind:
            flags |= _METHOD
            self._code_kinds[code] = kind
        self._flags[code] = flags
        return flags

    def _kind(self, frame: FrameType) -> str:
        code = frame.f_code
        kind = self._code_kinds[code]
        if kind == "?":
            this = _self_of(frame)
            o = self.options
            markers = [name for name in o.prepare_methods if name != "prepare_worker_input"]
            markers += o.convert_methods[2:]
            runner = this is not None and any(hasattr(this, name) for name in markers)
            kind = self._code_kinds[code] = "execute" if runner else "worker"
        return kind

    @staticmethod
    def _label(frame: FrameType) -> str:
        this = _self_of(frame)
        code = frame.f_code
        if this is None:
            return code.co_qualname
        cls = this if isinstance(this, type) else type(this)
        return f"{cls.__name__}.{code.co_name}"

    def _fail(self, exc: Exception) -> None:
        if not self._failed:
            self._failed = True
            print(f"runnercheck trace: recorder error: {exc!r}", file=sys.stderr)


def _clean(text: str) -> str:
    return text.replace("\t", " ").replace("\n", " ")


def _self_of(frame: FrameType) -> Any:
    code = frame.f_code
    if code.co_argcount and code.co_varnames[0] in ("self", "cls"):
        return frame.f_locals.get(code.co_varnames[0])
    return None


def _world_key(init_method: Any, store: Any) -> str:
    """What every rank of one world agrees on: the rendezvous address."""
    if isinstance(init_method, str) and init_method and not init_method.startswith("env://"):
        return init_method
    if store is not None:
        host, port = getattr(store, "host", None), getattr(store, "port", None)
        if host is not None and port is not None:
            return f"store://{host}:{port}"
    env = os.environ
    if "MASTER_ADDR" in env or "MASTER_PORT" in env:
        key = f"env://{env.get('MASTER_ADDR', '')}:{env.get('MASTER_PORT', '')}"
        run = env.get("TORCHELASTIC_RUN_ID")
        if run:
            key += f"/{run}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}"
        return key
    return "world"


def parse_lines(lines: Iterator[str] | list[str]) -> dict[int, CollectiveRecord]:
    """Collective records by index, with ``b`` amendments applied (one world)."""
    found: dict[int, CollectiveRecord] = {}
    for line in lines:
        item = records.decode(line)
        if isinstance(item, CollectiveRecord):
            found[item.index] = item
        elif isinstance(item, records.BytesLine) and item.index in found:
            found[item.index] = replace(found[item.index], nbytes=item.nbytes)
    return found


__all__ = [
    "COLLECTIVES",
    "DEFAULT_STEP_METHODS",
    "FileSink",
    "MemorySink",
    "Recorder",
    "RecorderOptions",
    "Sink",
]
