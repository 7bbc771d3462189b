"""The step walk (:mod:`runnercheck.analysis.stepwalk`): the step-metadata broadcasts
on each role's path of one engine step, through ``self``/``super()`` calls and into
the runner the worker drives, and the collectives a method reaches."""

from __future__ import annotations

from runnercheck.analysis.project import Project
from tests.analysis.sources import class_named, project_of

#: A legacy pair: the worker broadcasts its own metadata, then its runner the input.
LEGACY = """\
from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def __init__(self, is_driver_worker=False):
        self.is_driver_worker = is_driver_worker

    def prepare_input_tensors(self, seq_group_metadata_list):
        if self.is_driver_worker:
            tokens = self._prepare(seq_group_metadata_list)
            broadcast_tensor_dict({"input_tokens": tokens}, src=0)
        else:
            tokens = broadcast_tensor_dict(src=0)["input_tokens"]
        return tokens

    def execute_model(self, seq_group_metadata_list, kv_caches):
        tokens = self.prepare_input_tensors(seq_group_metadata_list)
        output = self.model(tokens, kv_caches)
        broadcast_tensor_dict({"output": output}, src=0)
        return output


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker
        self.model_runner = ModelRunner(is_driver_worker)

    def execute_model(self, seq_group_metadata_list=None):
        if self.is_driver_worker:
            if seq_group_metadata_list is None:
                broadcast_tensor_dict({}, src=0)
                return []
            num_seq_groups = len(seq_group_metadata_list)
            broadcast_tensor_dict({"num_seq_groups": num_seq_groups}, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            if not data:
                return []
            num_seq_groups = data["num_seq_groups"]
        if num_seq_groups == 0:
            return []
        return self.model_runner.execute_model(seq_group_metadata_list, None)
"""


def project(source: str = LEGACY) -> Project:
    return project_of({"acme/legacy.py": source})


def test_each_role_broadcasts_twice_a_step_the_worker_s_then_the_runner_s() -> None:
    p = project()
    worker, runner = class_named(p, "Worker"), class_named(p, "ModelRunner")
    counts = p.steps.broadcasts_per_step(worker, runner)
    assert {role: c.count for role, c in counts.items()} == {"driver": 2, "non-driver": 2}
    assert [s.line for s in counts["driver"].sites] == [34, 11]
    assert [s.line for s in counts["non-driver"].sites] == [36, 13]
    assert counts["driver"].sites[1].where == "ModelRunner.prepare_input_tensors"
    # the path runs the model (the stop signal's path does not, so it is not the step);
    # the broadcast after the model call carries its result, not metadata for the step
    assert counts["driver"].stage == 2


def test_a_merged_worker_broadcasts_once() -> None:
    merged = LEGACY.replace(
        '            broadcast_tensor_dict({"num_seq_groups": num_seq_groups}, src=0)\n', ""
    ).replace(
        "            data = broadcast_tensor_dict(src=0)\n"
        "            if not data:\n"
        "                return []\n"
        '            num_seq_groups = data["num_seq_groups"]\n',
        "            num_seq_groups = 1\n",
    )
    p = project(merged)
    counts = p.steps.broadcasts_per_step(class_named(p, "Worker"), class_named(p, "ModelRunner"))
    assert {role: c.count for role, c in counts.items()} == {"driver": 1, "non-driver": 1}


def test_a_constant_that_switches_the_broadcast_off_is_followed() -> None:
    source = LEGACY.replace(
        "class Worker:\n",
        "class Worker:\n    do_metadata_broadcast = False\n\n",
    ).replace(
        "    def execute_model(self, seq_group_metadata_list=None):\n",
        "    def execute_model(self, seq_group_metadata_list=None):\n"
        "        if not self.do_metadata_broadcast:\n"
        "            return self.model_runner.execute_model(seq_group_metadata_list, None)\n",
    )
    p = project(source)
    counts = p.steps.broadcasts_per_step(class_named(p, "Worker"), class_named(p, "ModelRunner"))
    # the worker's own broadcasts are never reached: only the runner's are left
    assert [s.line for s in counts["driver"].sites] == [11]
    assert [s.line for s in counts["non-driver"].sites] == [13]


def test_the_collectives_a_method_reaches_with_the_chain_and_the_side() -> None:
    p = project()
    runner = class_named(p, "ModelRunner")
    reached = p.steps.collectives_reachable(runner, "execute_model")
    assert [(r.site.line, r.chain, r.non_driver, r.driver_only) for r in reached] == [
        (
            11,
            ("ModelRunner.execute_model", "ModelRunner.prepare_input_tensors"),
            False,
            True,
        ),
        (
            13,
            ("ModelRunner.execute_model", "ModelRunner.prepare_input_tensors"),
            True,
            False,
        ),
        (19, ("ModelRunner.execute_model",), False, False),
    ]
    assert p.steps.collectives_reachable(runner, "missing") == []


def test_a_path_that_returns_before_the_step_is_not_the_step() -> None:
    """A warm-up path broadcasts three times and never reaches the runner: the step is
    the path that runs the model, though it broadcasts less."""
    source = LEGACY.replace(
        "        if self.is_driver_worker:\n            if seq_group_metadata_list is None:",
        "        if self.warming_up:\n"
        "            broadcast_tensor_dict({}, src=0)\n"
        "            broadcast_tensor_dict({}, src=0)\n"
        "            broadcast_tensor_dict({}, src=0)\n"
        "            return []\n"
        "        if self.is_driver_worker:\n            if seq_group_metadata_list is None:",
    )
    p = project(source)
    counts = p.steps.broadcasts_per_step(class_named(p, "Worker"), class_named(p, "ModelRunner"))
    assert {role: (c.count, c.stage) for role, c in counts.items()} == {
        "driver": (2, 2),
        "non-driver": (2, 2),
    }


def test_a_collective_reached_through_a_call_only_the_driver_makes_is_driver_only() -> None:
    p = project_of(
        {
            "acme/send.py": """\
            from vllm.distributed import broadcast_tensor_dict

            class Worker:
                def execute_model(self, request=None):
                    if self.is_driver_worker:
                        self._send(request)
                    self._always()

                def _send(self, request):
                    broadcast_tensor_dict({"n": request.n}, src=0)

                def _always(self):
                    broadcast_tensor_dict(src=0)
            """
        }
    )
    reached = p.steps.collectives_reachable(class_named(p, "Worker"), "execute_model")
    assert [(r.site.line, r.chain[-1], r.driver_only, r.non_driver) for r in reached] == [
        (10, "Worker._send", True, False),
        (13, "Worker._always", False, False),
    ]
