"""Workload specs within every bound are replayable in bounded work.

Each bound bounds the work it stands for: gang weights are finite and so is their sum,
pull times are finite, the chips of the vnpu pools and the day's sessions x places x pods
are capped.  A spec beyond them is refused up front (exit 2, the field named), before any
session runs.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.replay.generate import generate_day
from benchmarks.replay.spec import MAX_DAY_WORK, MAX_VNPU_CHIPS, load_spec
from models.errors import InputError
from models.limits import MAX_IMAGE_SIZE_GB
from solver.cli import main
from tests.replay_specs import short_spec


def _vnpu(nodes: int, chips: int, replicas: int, hours: float = 24) -> dict[str, Any]:
    return short_spec(
        hours=hours,
        cluster={"pools": [{"name": "v", "family": "vnpu", "nodes": nodes, "chips": chips}]},
        services=[{"name": "one", "image": "serve", "ai-cores": 1, "min-replicas": replicas,
                   "max-replicas": replicas}],
        training=[])


#: Specs that once took unbounded work (each within every bound documented before) and
#: the field named.
REFUSED = {
    "gang-weights-overflow": (short_spec(training=[
        {"name": "llm", "pool": "sp", "images": ["train"],
         "gang-nodes": {1: 1, 2: 1e308, 4: 1e308}}]), "training.0.gang-nodes"),
    "gang-weight-inf": (short_spec(training=[
        {"name": "llm", "pool": "sp", "images": ["train"],
         "gang-nodes": {1: 1, 2: math.inf}}]), "training.0.gang-nodes"),
    "pull-subnormal": (short_spec(cluster={
        "pools": [{"name": "sp", "family": "850", "nodes": 16, "pod-nodes": 16}],
        "pull-gb-per-minute": 1e-320}), "cluster.pull-gb-per-minute"),
    "image-disk-subnormal": (short_spec(cluster={
        "pools": [{"name": "sp", "family": "850", "nodes": 16, "pod-nodes": 16}],
        "image-disk-gb": 1e-320}), "cluster.image-disk-gb"),
    "vnpu-4096x1024": (_vnpu(4096, 1024, 512), "cluster"),
    "work-4096-nodes-512-replicas-48h-1min": (short_spec(
        hours=48, **{"session-minutes": 1},
        cluster={"pools": [{"name": "o", "family": "ordinary", "nodes": 4096}]},
        services=[{"name": "chat", "image": "serve", "min-replicas": 1,
                   "max-replicas": 512}], training=[]), "hours"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_specs_beyond_the_work_bounds_are_refused_naming_the_field(case: str,
                                                                    tmp_path: Path) -> None:
    data, field = REFUSED[case]
    with pytest.raises(InputError) as info:
        load_spec(data, "day.yaml")
    assert any(m.startswith(f"day.yaml: field '{field}'") for m in info.value.messages), \
        info.value.messages
    path = tmp_path / "day.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", "--workload", str(path), "--out", str(tmp_path / "out"),
                 "--engines", "upstream", "--no-plots", "--no-progress"], out, err)
    # (the YAML reader refuses a written .inf before the spec is read)
    assert code == 2
    assert f"field '{field}'" in err.getvalue() or "non-finite number" in err.getvalue()
    assert not (tmp_path / "out" / "summary.csv").exists()


def test_the_bounds_keep_the_largest_allowed_days() -> None:
    """4,096 vNPU nodes of the default 4 chips with a 512-replica service, 2 hours."""
    spec = load_spec(_vnpu(4096, 4, 512, hours=2), "day.yaml")
    assert spec.cluster.vnpu_chips == MAX_VNPU_CHIPS
    assert spec.sessions * (4096 + MAX_VNPU_CHIPS) * 512 <= MAX_DAY_WORK


#: Floats a YAML file can hold, the extremes included.
EXTREME = st.one_of(st.sampled_from([0.0, 5e-324, 1e-320, 1e-9, 1.0, 1e6, 1e308, math.inf,
                                     -1.0, math.nan]),
                    st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=60, deadline=None)
@given(pull=EXTREME, disk=EXTREME, weight=EXTREME, arrivals=EXTREME, size=EXTREME,
       median=EXTREME)
def test_every_accepted_spec_has_finite_rates_and_a_day(pull: float, disk: float,
                                                        weight: float, arrivals: float,
                                                        size: float, median: float) -> None:
    data = short_spec(
        cluster={"pools": [{"name": "sp", "family": "850", "nodes": 16, "pod-nodes": 16}],
                 "pull-gb-per-minute": pull, "image-disk-gb": disk},
        images=[{"name": "serve", "size-gb": size}, {"name": "train", "size-gb": 30}],
        training=[{"name": "llm", "pool": "sp", "images": ["train"], "initial": 1,
                   "arrivals-per-hour": arrivals, "gang-nodes": {1: 1, 2: weight, 4: weight},
                   "duration-minutes": {"median": median, "min": 1, "max": 10_080}}])
    try:
        spec = load_spec(data, "day.yaml")
    except InputError:
        return
    weights = spec.training[0].gang_nodes.values()
    assert math.isfinite(sum(weights)) and sum(weights) > 0
    assert math.isfinite(MAX_IMAGE_SIZE_GB / spec.cluster.pull_gb_per_minute)
    assert math.isfinite(100.0 * MAX_IMAGE_SIZE_GB / spec.cluster.image_disk_gb)
    day = generate_day(spec, 0)
    assert day.sessions
