"""The prefilter (:mod:`runnercheck.analysis.prefilter`): which files can matter to the
contract, decided on their bytes (a contract name or the driver-only marker, a
subclass of a class read so far, round after round), and which classes' subclasses
can take part at all."""

from __future__ import annotations

from runnercheck.analysis.prefilter import (
    class_bases,
    extensible_classes,
    might_matter,
    names_a_role,
    needles,
    select_sources,
)
from runnercheck.contract import VLLM, Contract
from tests.analysis.sources import facts_of


def test_a_file_matters_when_it_names_the_contract() -> None:
    wanted = needles(VLLM)
    assert might_matter(b"x = broadcast_tensor_dict(d)", wanted)
    assert might_matter(b"class R(ModelRunnerBase): pass", wanted)
    assert might_matter(b'F = {"driver_only": True}', wanted)
    assert might_matter(b'M = {"runnercheck": "driver-only"}', wanted)
    assert not might_matter(b"def unrelated():\n    return 1\n", wanted)
    renamed = needles(Contract(broadcast_function="send_step"))
    assert might_matter(b"send_step(d)", renamed)
    assert not might_matter(b"send_step(d)", wanted)


def test_class_bases_by_a_byte_scan_of_class_lines() -> None:
    data = b"class A(B, mod.C):\n    class Inner(D): pass\n# class E(F)\nx = 'class G(H)'\n"
    assert class_bases(data) == {"B", "mod", "C", "D"}
    assert class_bases(b"class\tA(B): pass\n") == frozenset()  # ``class`` then a tab


def test_subclasses_are_taken_round_after_round_in_the_original_order() -> None:
    sources = {
        "a.py": b"class Unrelated: pass\n",
        "c.py": b"class GrandChild(Child): pass\n",
        "b.py": b"class Child(MyRunner): pass\n",
        "runner.py": b"class MyRunner(ModelRunnerBase): pass\n",
        "d.py": b"class Other(Unrelated): pass\n",
    }
    assert select_sources(sources, VLLM) == ["c.py", "b.py", "runner.py"]


def test_a_file_that_names_a_role_only_when_runners_are_asked_for() -> None:
    data = b"class NeuronModelRunner:\n    def execute_model(self): ...\n"
    assert names_a_role(data)
    assert not names_a_role(b"# see the model runner\nclass Plain: pass\n")
    assert select_sources({"n.py": data}, VLLM) == []
    assert select_sources({"n.py": data}, VLLM, runners=True) == ["n.py"]


def test_extensible_classes_are_those_that_take_part_and_what_they_hold() -> None:
    modules = [
        facts_of(
            """\
            from vllm.attention import AttentionBackend

            class Metadata:
                pass

            class Holder:
                pass

            class MyRunner:
                def __init__(self, holder: Holder):
                    self.holder = holder

                def execute_model(self, model_input):
                    return model_input

            class Helper:
                def __init__(self, anything):
                    self.value = anything

            class Backend(AttentionBackend):
                pass
            """,
            "acme/runner.py",
        )
    ]
    names = extensible_classes(modules, VLLM)
    # the runner takes part; what it holds by annotation; a class holding a parameter of
    # no type (it may hold anything); a base the modules do not show
    assert {"MyRunner", "Holder", "Helper", "Backend"} <= names
    assert "Metadata" not in names
