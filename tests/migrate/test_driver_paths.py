"""Which rank runs each statement of a step (``codemods.merge_broadcasts.driver_paths.locate``)."""

from __future__ import annotations

import libcst as cst

from codemods.merge_broadcasts.driver_paths import locate

STEP = """\
def execute_model(self, request):
    if self.is_driver_worker:
        match request.kind:
            case "prefill":
                sent = self.prefill(request)
            case _:
                sent = self.decode(request)
        for item in sent:
            self.note(item)
    else:
        with self.lock:
            received = self.receive()
    return self.model(received)
"""


def test_every_statement_has_the_path_of_the_blocks_around_it() -> None:
    func = cst.ensure_type(cst.parse_module(STEP).body[0], cst.FunctionDef)
    paths = {
        cst.Module([]).code_for_node(item.statement).splitlines()[0].strip(): item.path
        for item in locate(func, "is_driver_worker")
    }
    assert paths == {
        "if self.is_driver_worker:": "both",
        "match request.kind:": "driver",
        "sent = self.prefill(request)": "driver",
        "sent = self.decode(request)": "driver",
        "for item in sent:": "driver",
        "self.note(item)": "driver",
        "with self.lock:": "non-driver",
        "received = self.receive()": "non-driver",
        "return self.model(received)": "both",
    }
