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
import mmap
import os
import pickle
import sys
import threading
import time
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
    """``<directory>/<pid>.trace``, created on the first line and written through a shared
    memory map: a line costs a copy, no system call, and is in the file (the page cache
    every reader sees) as soon as it is copied, even if the process then hangs or is
    killed. The file grows in chunks; the unwritten rest of it reads as NUL bytes, which
    end the data (:func:`readable_part`), and :meth:`close` cuts it off."""

    CHUNK = 1 << 20

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._size = 0
        self._position = 0

    @property
    def path(self) -> str:
        return os.path.join(self.directory, f"{os.getpid()}.trace")

    def write(self, line: str) -> None:
        data = line.encode()
        end = self._position + len(data)
        if self._map is None or end > self._size:
            self._grow(end)
        assert self._map is not None
        self._map[self._position : end] = data
        self._position = end

    def _grow(self, end: int) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        size = max(self.CHUNK, 2 * self._size)
        while size < end:
            size *= 2
        os.ftruncate(self._fd, size)
        if self._map is not None:
            self._map.close()
        self._map = mmap.mmap(self._fd, size)
        self._size = size

    def close(self) -> None:
        """Cut the file at its last line (at the process's exit)."""
        if self._fd is None:
            return
        if self._map is not None:
            self._map.close()
            self._map = None
        os.ftruncate(self._fd, self._position)
        os.close(self._fd)
        self._fd = None

    def reopen_after_fork(self) -> None:
        # The parent's map and descriptor stay the parent's; this process starts a file.
        self._fd = None
        self._map = None
        self._size = self._position = 0


def readable_part(data: bytes) -> bytes:
    """The written part of what was read from a trace file (up to the first NUL)."""
    end = data.find(b"\0")
    return data if end < 0 else data[:end]


class MemorySink(Sink):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, line: str) -> None:
        self.lines.append(line)


def _nbytes(value: Any) -> int:
    """Bytes of a tensor or of a list of tensors."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int) and hasattr(value, "dtype"):
        return nbytes
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(item) for item in value if item is not None)
    return 0


def _pickled_nbytes(objects: list[Any]) -> int:
    """Bytes of a list of objects once pickled one by one, as torch sends them."""
    total = 0
    for item in objects:
        if item is not None:
            try:
                total += len(pickle.dumps(item))
            except Exception:  # the collective itself reports what cannot be pickled
                pass
    return total


class _Local(threading.local):
    busy = False
    #: Bytes torch pickled or unpickled in the current object collective.
    object_bytes = 0


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
        # Keyed by ``id(code)``: hashing a code object hashes its constants, every time.
        # ``_codes`` keeps every code object seen alive, so an id is never reused.
        self._flags: dict[int, int] = {}
        self._codes: list[CodeType] = []
        #: Per contract-method code object: its kind (``?``: an execute method whose kind
        #: depends on ``self``); per code object seen as a call site: its file as shown.
        self._code_kinds: dict[int, str] = {}
        self._displays: dict[int, str] = {}
        self._dtypes: dict[Any, str] = {}
        self._local = _Local()
        self._world: _World | None = None
        self._groups: dict[int, tuple[Any, str]] = {}
        self._patches: list[tuple[Any, str, Any]] = []
        self._internal_dirs: tuple[str, ...] = ()
        self._failed = False
        self._fork_hook = False
        self._object_hooks = False
        #: Time spent recording (not in the collectives themselves), and calls recorded.
        self.seconds = 0.0
        self.calls = 0
        o = self.options
        self._steps = frozenset(o.step_methods)
        self._logical = frozenset(o.logical_functions)
        self._kinds: dict[str, str] = {name: "worker" for name in o.worker_methods}
        self._kinds.update({name: "worker" for name in o.step_methods})
        self._kinds.update({name: "?" for name in o.execute_methods})
        self._kinds.update({name: "convert" for name in o.convert_methods})
        self._kinds.update({name: "prepare" for name in o.prepare_methods})
        self._cwd = os.path.realpath(os.getcwd()) + os.sep

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
        self._count_object_bytes(sys.modules.get("torch.distributed.distributed_c10d"))
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
        self._object_hooks = False

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

    def finish(self) -> None:
        """At the process's exit: tell the trace file what recording cost, close it."""
        try:
            if self.calls:
                self.sink.write(records.encode_cost(self.seconds, self.calls))
            if isinstance(self.sink, FileSink):
                self.sink.close()
        except Exception as exc:
            self._fail(exc)

    def _after_fork(self) -> None:
        self.seconds = 0.0
        self.calls = 0
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

        clock = time.thread_time
        now = time.monotonic_ns

        def collective(*args: Any, **kwargs: Any) -> Any:
            if self._local.busy:
                return original(*args, **kwargs)
            started = clock()
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
                state.object_bytes = 0
                called = clock()
                result = original(*args, **kwargs)
                ended = now()
                returned = clock()
                if record is not None:
                    # Written at once: a rank killed later must not look stuck in it.
                    try:
                        self.sink.write(f"e\t{record[0]}\t{ended}\n")
                    except Exception as exc:
                        self._fail(exc)
                    if record[1]:
                        self._amend(record[0], state.object_bytes, args)
                self.seconds += called - started + clock() - returned
                self.calls += 1
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
        # What an object collective moves is known afterwards: torch pickles it (see
        # ``_count_object_bytes``), or, without those hooks, the recorder does.
        later = objects
        nbytes = 0 if later else _nbytes(payload)
        if site_frame is not None:
            code = site_frame.f_code
            site = f"{self._displays[id(code)]}:{site_frame.f_lineno}"
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
            f"\t{site_function}\t{time.monotonic_ns()}\n"
        )
        return index, later

    def _amend(self, index: int, counted: int, args: tuple[Any, ...]) -> None:
        try:
            if not self._object_hooks:
                counted = sum(_pickled_nbytes(arg) for arg in args[:2] if isinstance(arg, list))
            self.sink.write(records.encode_bytes(index, counted))
        except Exception as exc:
            self._fail(exc)

    def _count_object_bytes(self, dist_c10d: Any) -> None:
        """Count the bytes torch pickles (``_object_to_tensor``) and unpickles
        (``_tensor_to_object``) inside the object collectives, instead of pickling again."""
        to_tensor = getattr(dist_c10d, "_object_to_tensor", None)
        to_object = getattr(dist_c10d, "_tensor_to_object", None)
        if not (callable(to_tensor) and callable(to_object)):
            return

        def object_to_tensor(*args: Any, **kwargs: Any) -> Any:
            result = to_tensor(*args, **kwargs)
            try:
                self._local.object_bytes += int(result[0].numel())
            except Exception:
                pass
            return result

        def tensor_to_object(tensor: Any, tensor_size: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                self._local.object_bytes += int(tensor_size)
            except Exception:
                pass
            return to_object(tensor, tensor_size, *args, **kwargs)

        self._patch(dist_c10d, "_object_to_tensor", object_to_tensor)
        self._patch(dist_c10d, "_tensor_to_object", tensor_to_object)
        self._object_hooks = True

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
            code = current.f_code
            flags = flags_of.get(id(code))
            if flags is None:
                flags = self._code_flags(code)
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
        key = id(code)
        self._codes.append(code)
        filename = os.path.abspath(code.co_filename)
        flags = 0
        if not filename.startswith(self._internal_dirs):
            flags |= _EXTERNAL
            # the file itself, not a link to it (an editable install links the packages)
            real = os.path.realpath(filename)
            display = real[len(self._cwd) :] if real.startswith(self._cwd) else real
            self._displays[key] = _clean(display)
        if code.co_name in self._steps:
            flags |= _STEP
        if code.co_name in self._logical:
            flags |= _LOGICAL
        kind = self._kinds.get(code.co_name)
        if kind:
            flags |= _METHOD
            self._code_kinds[key] = kind
        self._flags[key] = flags
        return flags

    def _kind(self, frame: FrameType) -> str:
        key = id(frame.f_code)
        kind = self._code_kinds[key]
        if kind == "?":
            this = _self_of(frame)
            o = self.options
            markers = [name for name in o.prepare_methods if name != "prepare_worker_input"]
            markers += o.convert_methods[2:]
            runner = this is not None and any(hasattr(this, name) for name in markers)
            kind = self._code_kinds[key] = "execute" if runner else "worker"
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
    """Collective records by index, with ``b`` and ``e`` amendments applied (one world)."""
    found: dict[int, CollectiveRecord] = {}
    for line in lines:
        item = records.decode(line)
        if isinstance(item, CollectiveRecord):
            found[item.index] = item
        elif isinstance(item, records.BytesLine) and item.index in found:
            found[item.index] = replace(found[item.index], nbytes=item.nbytes)
        elif isinstance(item, records.EndLine) and item.index in found:
            found[item.index] = replace(found[item.index], end_ns=item.end_ns)
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
