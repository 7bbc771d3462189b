"""RC105: a send and its receive on the two sides of one driver split are one finding."""

from __future__ import annotations

from runnercheck.check import check_sources

SOURCE = """\
from engine.distributed import broadcast_tensor_dict


class AccelModelRunner:
    def prepare_model_input(self, seq_group_metadata_list):
        if self.is_driver_worker:
            data = self._prepare(seq_group_metadata_list)
{driver}
        else:
{other}
        return data
"""


def rc105(driver: str, other: str) -> list[tuple[int, str]]:
    text = SOURCE.format(driver=driver, other=other)
    result = check_sources({"accel.py": text})
    return [(f.line, f.message) for f in result.findings if f.code == "RC105"]


def test_the_receive_of_a_split_is_named_in_the_send_finding() -> None:
    found = rc105(
        "            broadcast_tensor_dict(data, src=0)",
        "            data = broadcast_tensor_dict(src=0)",
    )
    assert [line for line, _ in found] == [8]
    assert found[0][1].endswith("its non-driver side runs `broadcast_tensor_dict` too (line 10)")


def test_a_receive_alone_on_the_non_driver_side_is_still_a_finding() -> None:
    found = rc105("            pass", "            data = broadcast_tensor_dict(src=0)")
    assert [line for line, _ in found] == [10]
    assert "non-driver side" not in found[0][1]
