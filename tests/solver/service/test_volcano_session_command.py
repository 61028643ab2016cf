"""``npu-place volcano``: the bundled kubectl dumps played as one Volcano session
against a running extender on loopback; what it prints is what the extender steered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from solver.cli import main
from solver.service.app import ServiceConfig
from solver.service.extender import ExtenderConfig
from tests.solver.service.conftest import running_server

DUMPS = Path(__file__).resolve().parents[3] / "models" / "kube" / "examples"


@pytest.mark.parametrize("example", ["multilevel", "rack-950"])
def test_the_dumps_play_a_session_and_the_bindings_are_printed(
        example: str, capsys: pytest.CaptureFixture[str]) -> None:
    folder = str(DUMPS / example)
    config = ExtenderConfig(configmaps=(folder,), engine="greedy", http_timeout=30.0,
                            predicate_verb=True)
    with running_server(ServiceConfig(warmup=False, extender=config)) as (url, service):
        code = main(["volcano", folder, "--url", f"{url}/volcano", "--format",
                     "json", "--now", "1764400000"])
        core = service.extender
        assert core is not None and core.session is not None
        session = core.session
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["bindings"], "nothing was bound"
    for job, verdict in printed["npu-place"].items():
        plan = session.jobs[job]
        bound = {int(rank): node for rank, node in printed["bindings"][job].items()}
        if verdict == "plan":
            assert bound == plan.ranks
        elif verdict == "planned set":
            assert set(bound.values()) == plan.nodes
        else:
            assert verdict == "left to plugin"
            assert printed["session"]["left-to-plugin"][job] == plan.reason != ""


def test_an_extender_that_does_not_answer_is_named(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["volcano", str(DUMPS / "multilevel"), "--url",
                 "http://127.0.0.1:9/volcano", "--timeout", "2"])
    assert code == 2
    err = capsys.readouterr().err
    assert "--url http://127.0.0.1:9/volcano: the extender does not answer" in err
    (tmp_path / "pods.json").write_text('{"kind": "List", "items": []}')
    code = main(["volcano", str(tmp_path), "--url", "http://127.0.0.1:9/volcano"])
    assert code == 2
    assert "no Node and no PodGroup objects" in capsys.readouterr().err
