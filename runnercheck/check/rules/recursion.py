"""RC101 recursive-from-dict: ``from_broadcasted_tensor_dict`` calling itself on its class."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.findings import Finding


def recursive_from_dict(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    name = project.contract.from_dict_method
    func = cls.methods.get(name)
    if func is None or not func.params:
        return
    own = {f"{func.params[0]}.{name}", f"{cls.name}.{name}"}
    for call in func.calls:
        if call.callee in own and not call.nested:
            receiver = call.callee.rsplit(".", 1)[0]
            yield Finding(
                func.path,
                call.line,
                call.col,
                "RC101",
                f"{cls.name}.{name} calls itself on `{receiver}`: infinite recursion "
                "on every non-driver rank",
            )
