"""The extender's ``/sessions`` list names how each session ended.

A session a newer one replaced before its plan was ready was listed with no error and no
counts, as if it had been served; it is listed as ``superseded`` with that reason.
"""

from __future__ import annotations

from solver.service.extender import ExtenderConfig, ExtenderCore
from solver.service.extender.session import SUPERSEDED


def test_each_session_is_listed_with_how_it_ended() -> None:
    core = ExtenderCore(ExtenderConfig())  # not started: no device source, no plan thread
    try:
        core.begin()  # its snapshot is still being read or planned ...
        planned = core.begin()  # ... when the next session opens
        planned.count("prioritize-steered")
        planned.ready.set()
        core.close_session()
        replaced = core.begin()
        replaced.ready.set()
        core.begin()
        listed = [(h["session"], h["state"], h["error"]) for h in core.history]
        assert listed == [(1, "superseded", SUPERSEDED), (2, "closed", None),
                          (3, "replaced", None)]
        assert core.history[1]["counts"] == {"prioritize-steered": 1}
    finally:
        core.close()
