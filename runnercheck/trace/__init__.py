"""``runnercheck trace``: the collective schedule of a live run, per rank and per step.

* :func:`trace_command` runs a command (``python -m ...``, ``torchrun ...``) with every
  Python process in it recording its ``torch.distributed`` calls (see
  :mod:`runnercheck.trace.recorder`), and returns a :class:`TraceReport`;
* :class:`TraceSession` does the same for the processes a block of code starts;
* :class:`Recorder` records the calls of the current process only.

The report gives broadcasts, collectives and bytes per engine step and per contract
method, checks a budget of broadcasts per step, and names the first collective where
the ranks diverge; a divergence or a hang stops the run (see
:mod:`runnercheck.trace.monitor`). Importing this package does not import torch.
"""

from runnercheck.trace.recorder import DEFAULT_STEP_METHODS, Recorder, RecorderOptions
from runnercheck.trace.records import CollectiveRecord
from runnercheck.trace.report import BudgetViolation, TraceReport, WorldReport
from runnercheck.trace.session import TraceOptions, TraceSession, trace_command

__all__ = [
    "DEFAULT_STEP_METHODS",
    "BudgetViolation",
    "CollectiveRecord",
    "Recorder",
    "RecorderOptions",
    "TraceOptions",
    "TraceReport",
    "TraceSession",
    "WorldReport",
    "trace_command",
]
