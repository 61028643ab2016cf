"""Shared pytest configuration: deterministic, modest hypothesis profiles.

Profiles (choose with ``HYPOTHESIS_PROFILE=<name>``):

* ``ci`` (default): derandomized, no example database, few examples; the whole suite
  must stay fast on 2 cores.
* ``dev``: more examples, still derandomized, for a deeper local run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: What every profile shares: derandomized, no example database, no deadline.
_DETERMINISTIC = settings(
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", _DETERMINISTIC, max_examples=30)
settings.register_profile("dev", _DETERMINISTIC, max_examples=300)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
