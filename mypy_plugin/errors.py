"""The plugin's mypy error codes, declared once from its rules.

Each RC2xx rule of :mod:`mypy_plugin.rules` becomes one mypy
:class:`~mypy.errorcodes.ErrorCode` whose code is the rule's ``name``, so
``# type: ignore[runner-input-protocol]``, ``disable_error_code`` and
``enable_error_code`` work like they do for mypy's own codes. Creating an
``ErrorCode`` registers it with mypy; mypy validates the configured codes only
after plugins are loaded, so importing this module before that is enough.
"""

from __future__ import annotations

from typing import Final

from mypy.errorcodes import ErrorCode

from mypy_plugin.rules import BY_CODE

#: The category mypy shows for these codes (``mypy --help`` lists none, but error
#: formatters and ``--output json`` carry it).
CATEGORY: Final = "runnercheck"


def _declare(code: str) -> ErrorCode:
    rule = BY_CODE[code]
    return ErrorCode(rule.name, rule.summary, CATEGORY)


RUNNER_INPUT_PROTOCOL: Final = _declare("RC201")
FROM_DICT_FIXED_RETURN: Final = _declare("RC202")
RUNNER_INPUT_COVARIANCE: Final = _declare("RC203")
EXECUTE_INPUT_MISMATCH: Final = _declare("RC204")
UNBROADCASTABLE_VALUE: Final = _declare("RC205")
INTERNAL: Final = _declare("RC206")
RUNNER_INPUT_UNBOUND: Final = _declare("RC207")

#: Rule code (``RC201``) of every error code above.
RULE_CODES: Final[dict[ErrorCode, str]] = {
    RUNNER_INPUT_PROTOCOL: "RC201",
    FROM_DICT_FIXED_RETURN: "RC202",
    RUNNER_INPUT_COVARIANCE: "RC203",
    EXECUTE_INPUT_MISMATCH: "RC204",
    UNBROADCASTABLE_VALUE: "RC205",
    INTERNAL: "RC206",
    RUNNER_INPUT_UNBOUND: "RC207",
}
