"""The ``scale`` benchmark suite and the anytime batches at 16,384-65,536 nodes."""

from __future__ import annotations

import pytest

from benchmarks.anytime import default_instances
from benchmarks.generators import FAMILIES
from benchmarks.suite import LARGE_SCALES, SCALE_SEED, suite_instances
from solver.cli.main import build_parser


def test_the_scale_suite_is_every_family_at_three_scales_in_16_job_batches() -> None:
    instances = suite_instances("scale")
    assert [(i.params.nodes, i.params.family) for i in instances] == [
        (nodes, family) for nodes in (16384, 32768, 65536) for family in FAMILIES]
    assert LARGE_SCALES == (16384, 32768, 65536)
    assert {(i.params.jobs, i.params.seed) for i in instances} == {(16, SCALE_SEED)}
    assert len({i.name for i in instances}) == len(instances)


def test_an_unknown_suite_names_the_three() -> None:
    with pytest.raises(ValueError, match="quick, full or scale"):
        suite_instances("huge")


def test_bench_accepts_the_scale_suite() -> None:
    args = build_parser().parse_args(["bench", "--suite", "scale"])
    assert args.suite == "scale"


def test_anytime_batches_at_large_scales_have_16_jobs() -> None:
    instances = default_instances([65536], [37], ["950"])
    assert [(i.nodes, i.jobs, i.params.seed) for i in instances] == [(65536, 16, 37)]
