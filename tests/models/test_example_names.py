"""``load_scenario("example:NAME")``: the library loads a bundled example by the name the
command line takes (``npu-place plan --example NAME``, ``validate example:NAME``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.io import bundled_example_names, load_scenario
from models.validation import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "models" / "examples"


@pytest.mark.parametrize("name", ["superpod-850", "rack-950"])
def test_a_bundled_example_loads_by_name(name: str) -> None:
    assert load_scenario(f"example:{name}") == load_scenario(EXAMPLES / f"{name}.yaml")


def test_the_names_are_the_scenarios_not_their_event_files() -> None:
    names = bundled_example_names()
    assert "superpod-850" in names
    assert not any(n.endswith(".events") for n in names)
    assert len(names) == len(list(EXAMPLES.glob("*.yaml"))) - len(
        list(EXAMPLES.glob("*.events.yaml")))


@pytest.mark.parametrize("name", ["superpod-85", "../examples/superpod-850",
                                  "rfc-inference-training.events"])
def test_an_unknown_name_is_refused_with_the_names(name: str) -> None:
    with pytest.raises(InputError) as caught:
        load_scenario(f"example:{name}")
    (message,) = caught.value.messages
    assert message.startswith(f"example:{name}: no bundled example scenario")
    assert "superpod-850" in message
