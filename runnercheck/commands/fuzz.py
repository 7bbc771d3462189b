"""Round-trip input classes through a real multi-process broadcast and compare every field.

Each TARGET is ``module:Class``, a module, or a path (every input class defined there:
a dataclass with as_broadcastable_tensor_dict() and classmethod
from_broadcasted_tensor_dict()), or a composed step ``A+B+extra:NAME``: the inputs
merged into one dict and consumed in that order on the receiving ranks, as a worker
does (:mod:`runnercheck.fuzz.steps`). Hypothesis generates instances from the dataclass
annotations; each goes driver -> as_broadcastable_tensor_dict() -> broadcast ->
from_broadcasted_tensor_dict() on every other rank, and is compared field by field
(type, dtype, shape, values with NaN, device type) with the original. Failures are
shrunk to a minimal example; --seed replays them.

The ranks are spawned on 127.0.0.1 (--world-size); under torchrun (RANK and WORLD_SIZE
set) every process runs the same command, rank 0 reports, and the run may span nodes.

Each target's module is first imported in a child held to --deadline: one that exits,
kills itself or hangs while imported is one line naming it. Every process the targets
or the ranks start, also one that left its group or session, is ended when the run
ends; stderr names what was ended, and any process that could not be. The deadline
holds even when the code under test stops this process (SIGSTOP to its parent): a
watchdog process ends the run then, with one line.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runnercheck.catalog import Rule
from runnercheck.commands.options import check_number
from runnercheck.console import is_color_terminal
from runnercheck.errors import EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE, ConfigError, UsageError
from runnercheck.processes import Overrun, Sweep, Watchdog

#: What ``fuzz`` reports (RC3xx), on input no example can hold: the examples illustrate.
#: The rules live with the command, not in :mod:`runnercheck.fuzz`, whose import loads
#: torch: ``runnercheck rules`` reads them without it.
RULES: tuple[Rule, ...] = (
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
)

HELP = "round-trip input classes through a real multi-process broadcast (Hypothesis)"

EPILOG = (
    "exit status: 0 every class round-trips, 1 problems found (RC301-RC306), 2 usage or input "
    "error, or a class of a swept path that cannot run (and no problem found)"
)

#: Examples per class by default, and when a target is a path (every class there).
DEFAULT_EXAMPLES = 100
SWEEP_EXAMPLES = 20


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="module:Class, module, path, or a composed step mod:A+mod:B[+extra:NAME[=TYPE]]",
    )
    parser.add_argument("--world-size", type=int, default=2, help="ranks to spawn (default 2)")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where tensors live (cuda: NCCL when each rank has a GPU)",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=None,
        help=f"examples per class (default {DEFAULT_EXAMPLES}; {SWEEP_EXAMPLES} when a target "
        "is a directory or a .py file)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="replay the run that printed this seed"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=60.0,
        help="seconds one example's round trip may take on any rank, and importing each "
        "target's module (default 60)",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME[=TYPE]",
        help="a key the worker adds to every composed step's dict (TYPE: tensor (default), "
        "int, float, bool, str, bytes or module:attr); popped where a step names it "
        "(+extra:NAME), else after its last part",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--config", type=Path, default=None, help="pyproject.toml to read")
    parser.add_argument(
        "--stub-imports",
        action="append",
        default=[],
        metavar="PKG[,PKG...]|*",
        help="serve a stub module for these top-level packages when they are not installed "
        "('*': every missing package the targets' own modules import), so that a class whose "
        "module imports an engine's heavy dependencies can be fuzzed without them; each stubbed "
        "package is named on stderr, and its names are placeholders (a field typed with one "
        "needs a strategy in fuzz_strategies)",
    )
    parser.add_argument(
        "--attn-backend",
        default=None,
        metavar="MODULE:ATTR",
        help="passed as attn_backend to from_broadcasted_tensor_dict, which engines use to "
        "rebuild the attention metadata of the received dict (a failure of a method that "
        "takes one, when none is given, says so); e.g. "
        "runnercheck.demo.engine.attention:TinyAttentionBackend for the demo's merged engine",
    )


def load_object(spec: str, what: str) -> Any:
    module_name, colon, attr = spec.partition(":")
    if not module_name or not colon or not attr:
        raise UsageError(f"{what} {spec!r}: expected module:attribute")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:
        raise UsageError(f"{what} {spec!r}: cannot load it: {type(exc).__name__}: {exc}") from None
    return obj


#: Bounds of the numeric options (inclusive).
WORLD_SIZE = (1, 64)
EXAMPLES = (1, 1_000_000)
DEADLINE = (0.1, 86_400)
SEED = (0, 2**64 - 1)


@contextlib.contextmanager
def _naming_the_file(source: Path | None) -> Iterator[None]:
    """Errors in the configuration's fuzz_strategies and fuzz_extras (found when they are
    loaded) name the file they come from, as every other configuration error does."""
    try:
        yield
    except (ConfigError, UsageError) as exc:
        text = str(exc)
        if source is None or not text.startswith(("fuzz_strategies", "[tool.runnercheck]")):
            raise
        text = text.removeprefix("[tool.runnercheck] ")
        raise ConfigError(f"{source}: [tool.runnercheck] key {text}") from None


def _replay_options(args: argparse.Namespace) -> tuple[str, ...]:
    """The options a run needs again to replay an example: the stubs, the backend."""
    options: list[str] = []
    if args.stub_imports:
        options += ["--stub-imports", ",".join(_stubs(args.stub_imports))]
    if args.attn_backend is not None:
        options += ["--attn-backend", args.attn_backend]
    if args.config is not None:
        options += ["--config", str(args.config)]
    return tuple(options)


def _stubs(values: list[str]) -> tuple[str, ...]:
    """The packages ``--stub-imports`` names (``*``: every missing one)."""
    names: list[str] = []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if name != "*" and not name.isidentifier():
                raise UsageError(
                    f"--stub-imports {value!r}: {name!r} is not a top-level package name (or '*')"
                )
            names.append(name)
    return tuple(names)


def _is_path(spec: str) -> bool:
    """A target that is a directory or a file, not ``module:Class`` nor a step."""
    path = Path(spec)
    return spec.endswith(".py") or path.is_dir() or (path.exists() and ":" not in spec)


def _check_numbers(args: argparse.Namespace) -> None:
    """Every numeric option finite and within its bounds (one line naming it otherwise)."""
    if args.examples is None:
        sweep = any(_is_path(t) for t in args.targets)
        args.examples = SWEEP_EXAMPLES if sweep else DEFAULT_EXAMPLES
    check_number("--world-size", args.world_size, *WORLD_SIZE)
    check_number("--examples", args.examples, *EXAMPLES)
    check_number("--deadline", args.deadline, *DEADLINE, unit="seconds")
    check_number("--seed", args.seed, *SEED)


def start_fork_server(preload: tuple[str, ...] = ("runnercheck.fuzz.ranks",)) -> None:
    """Start the fork server of the local ranks now, before this process imports torch:
    it imports torch (and ``preload``) for the ranks while this process imports torch
    and Hypothesis for the examples, instead of after (the group uses the server that
    is running)."""
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))
    try:
        forkserver.ensure_running()
    except OSError:  # the group starts it (and reports what fails) when it needs it
        pass


def run(args: argparse.Namespace) -> int:
    from runnercheck.extras import require_fuzz_extra

    require_fuzz_extra("runnercheck fuzz")
    _check_numbers(args)
    with _output_kept_apart(args.format == "json") as out:
        args._report_stream = out
        return _run_guarded(args)


@contextlib.contextmanager
def _output_kept_apart(apart: bool) -> Iterator[Any]:
    """With ``apart``, what the code under test writes to stdout (an engine's log lines,
    in this process and in the ranks forked from it) goes to stderr while the run lasts,
    and the stream yielded writes to the real stdout (the JSON report); else stdout."""
    if not apart:
        yield sys.stdout
        return
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a stream of Python's own (captured)
        descriptor = None
    if descriptor != 1:
        out = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            yield out
        return
    sys.stdout.flush()
    real = os.dup(1)
    os.dup2(2, 1)
    stream = os.fdopen(os.dup(real), "w")
    try:
        yield stream
    finally:
        sys.stdout.flush()
        stream.flush()
        stream.close()
        os.dup2(real, 1)
        os.close(real)


def _run_guarded(args: argparse.Namespace) -> int:
    # the deadline, kept where the code under test cannot stop it with this process
    watchdog = Watchdog(
        args.deadline, interrupt=True, last_resort=getattr(args, "_command_line", False)
    )
    # every process the targets or the ranks start, however it leaves, is ended at the end
    sweep = Sweep()
    group = None
    try:
        try:
            if not ("RANK" in os.environ and "WORLD_SIZE" in os.environ):  # not torchrun
                group = _launch_ranks(args)
            code = _run(args, group)
        except BaseException:
            if group is not None:
                group.close(force=True)
            raise
        finally:
            from runnercheck.fuzz.group import helper_pids

            if group is not None:
                group.close()
            sweep.spare(helper_pids())
            _say_ended(sweep)
    except Overrun as overrun:  # the watchdog has ended every process of the run
        from runnercheck.console import echo

        sweep.end()  # reaps them (unless the sweep above did)
        echo(
            f"runnercheck: RC306 {overrun.describe('the code under test')}: the run was ended",
            stderr=True,
        )
        code = EXIT_FINDINGS
    finally:
        watchdog.close()
    return code


def _options(args: argparse.Namespace) -> Any:
    from runnercheck.fuzz import FuzzOptions

    return FuzzOptions(
        world_size=args.world_size,
        device=args.device,
        examples=args.examples,
        seed=args.seed,
        deadline=args.deadline,
    )


def _launch_ranks(args: argparse.Namespace) -> Any:
    """The local ranks, forked from this process as soon as it has imported torch,
    before it starts a thread or touches CUDA (as a fork server would be, without a
    second interpreter importing torch again): they join the group while this process
    loads the targets."""
    from runnercheck.fuzz import LocalGroup

    group = LocalGroup(_options(args).settings())
    group.launch(fork=True)
    return group


def _say_ended(sweep: Sweep) -> None:
    from runnercheck.console import echo

    leftovers = sweep.living()
    survivors = {survivor.pid for survivor in sweep.end()}
    ended = [
        f"{pid} ({stat[0]})" for pid, stat in sorted(leftovers.items()) if pid not in survivors
    ]
    if ended:
        echo(f"runnercheck fuzz: ended what the run left running: {', '.join(ended)}", stderr=True)
    for pid in sorted(survivors):
        name = leftovers.get(pid, ("?",))[0]
        echo(
            f"runnercheck fuzz: process {pid} ({name}) that the run started could not be ended",
            stderr=True,
        )


def _run(args: argparse.Namespace, group: Any) -> int:
    from runnercheck.config import find_pyproject, load_config
    from runnercheck.console import echo
    from runnercheck.fuzz import FuzzOptions, fuzz
    from runnercheck.fuzz.group import GroupLost, run_receiver, torchrun_rank
    from runnercheck.fuzz.importing import guard
    from runnercheck.fuzz.steps import declared_extras, resolve_targets

    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is available")
    options = _options(args)
    rank = torchrun_rank()
    if rank is not None and rank != 0:
        return run_receiver(options.settings())
    start = next((Path(t) for t in args.targets if Path(t).exists()), Path.cwd())
    config = load_config(start, args.config)
    source = args.config if args.config is not None else find_pyproject(start)
    with _naming_the_file(source):
        extras = declared_extras(args.extra, config.fuzz_extras)
    with guard(deadline=args.deadline, stubs=_stubs(args.stub_imports)):
        targets = resolve_targets(list(args.targets), config.contract(), extras)
    if args.attn_backend is not None:
        options = FuzzOptions(
            **{**options.__dict__, "attn_backend": load_object(args.attn_backend, "--attn-backend")}
        )
    # everything imported so far lives to the end: Hypothesis's first run collects
    # garbage once in full, which then skips torch's objects
    gc.freeze()
    try:
        with _naming_the_file(source):
            report = fuzz(targets, options, config, group)
        report.replay_options = _replay_options(args)
    except GroupLost as lost:  # the ranks could not even start
        echo(f"runnercheck: RC306 the ranks could not start: {lost.message}", stderr=True)
        return EXIT_FINDINGS
    out = getattr(args, "_report_stream", sys.stdout)
    if args.format == "json":
        print(json.dumps(report.as_json(), indent=2), file=out, flush=True)
    elif report.sweep and is_color_terminal(sys.stdout):
        _show_on_terminal(report)
    else:
        echo(report.text())
    if report.found:
        return EXIT_FINDINGS
    return EXIT_USAGE if report.errors else EXIT_CLEAN


def _show_on_terminal(report: Any) -> None:
    """A swept path's report: each class's lines, then the table in rich."""
    from rich.table import Table
    from rich.text import Text

    from runnercheck.console import echo, make_console

    text = report.text().splitlines()
    table_start = text.index("") if "" in text else len(text) - 1
    echo("\n".join(text[:table_start]))
    table = Table(title="runnercheck fuzz", title_justify="left")
    for column in ("status", "class", "examples", "found"):
        table.add_column(column, overflow="fold")
    styles = {"PASS": "green", "FAIL": "red", "ERROR": "yellow"}
    for status, name, examples, found in report.rows():  # as written, never as markup
        table.add_row(Text(status, style=styles[status]), Text(name), examples, Text(found))
    console = make_console()
    console.print(table)
    console.print(report.summary())
