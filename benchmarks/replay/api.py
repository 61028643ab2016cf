"""Entry points of ``npu-place replay`` (the CLI only parses arguments and calls these).

* :func:`replay_one`: one day (spec + seed) with every engine, written to ``--out``.
* :func:`replay_many`: many seeds of one spec, one Dask task per (seed, engine) through
  the sweep runner's client (:func:`benchmarks.sweep.dask_client`), per-engine means with
  95 % intervals.
* :data:`EXAMPLES` / :func:`example_path`: the bundled days.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from benchmarks.common import Progress
from benchmarks.outputs import write_output
from benchmarks.replay.generate import generate_day
from benchmarks.replay.report import (
    SUMMARY_FIELDS,
    render_seeds_report,
    summary_row,
    write_csv,
    write_replay,
)
from benchmarks.replay.run import ReplayOptions, replay_day, replay_engine
from benchmarks.replay.spec import WorkloadSpec, load_spec
from models.errors import InputError
from models.io import read_document

#: Bundled days: name -> one-line description (files in ``benchmarks/replay/examples``).
EXAMPLES: dict[str, str] = {
    "sharing-850": "inference and training share 3 Atlas 850 super pods + 16 ordinary nodes "
                   "(diurnal inference, reclaim, returns)",
    "faults-950-multilevel": "an Atlas 950 super pod and a multilevel tree with node, "
                             "sub-health and pod faults",
    "vnpu-inference-day": "diurnal inference on dynamic vNPU slices (16 Ascend310P servers) next "
                      "to whole-card training on 16 ordinary nodes",
}
_EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
#: Most seeds one many-seed run takes.
MAX_SEEDS = 1024


def example_path(name: str) -> Path:
    """The spec file of a bundled day.

    Raises
    ------
    InputError
        Naming ``--example`` and listing the bundled days.
    """
    if name not in EXAMPLES:
        raise InputError([f"--example: unknown day '{name}'; bundled days: "
                          f"{', '.join(EXAMPLES)}"])
    return _EXAMPLES_DIR / f"{name}.yaml"


def read_spec(path: str | Path) -> WorkloadSpec:
    """Read and validate a workload spec file (errors name the file and the field)."""
    return load_spec(read_document(path), str(path))


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """``"0-31"``, ``"3"`` or ``"0,2,5-7"`` as a sorted list of distinct seeds.

    Raises
    ------
    InputError
        Naming ``option`` when the text is not a list of seeds in ``0..2^31-1``.
    """
    seeds: set[int] = set()
    for part in text.split(","):
        match = re.fullmatch(r"\s*([0-9]{1,10})\s*(?:-\s*([0-9]{1,10})\s*)?", part)
        if match is None:
            raise InputError([f"{option} '{text}': expected seeds such as 0-31 or 0,2,5-7"])
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        if low > high or high > 2**31 - 1:
            raise InputError([f"{option} '{text}': the range {low}-{high} is empty or beyond "
                              "2^31-1"])
        if high - low + 1 + len(seeds) > MAX_SEEDS:
            raise InputError([f"{option} '{text}': more than {MAX_SEEDS} seeds"])
        seeds.update(range(low, high + 1))
    return sorted(seeds)


def _progress(stream: TextIO | None, total: int, enabled: bool | None) -> Progress:
    """A progress bar on ``stream`` (default stderr), on by default only on a terminal."""
    stream = stream if stream is not None else sys.stderr
    if enabled is None:
        isatty = getattr(stream, "isatty", None)
        enabled = bool(isatty is not None and isatty())
    return Progress(stream, total, enabled)


def replay_one(spec: WorkloadSpec, seed: int, options: ReplayOptions, out: Path, *,
               plots: bool = True, command: str | None = None,
               stream: TextIO | None = None, progress: bool | None = None
               ) -> list[dict[str, Any]]:
    """Replay one day with every engine and write the report; returns the summary rows."""
    day = generate_day(spec, seed)
    bar = _progress(stream, len(day.sessions) * len(options.engines), progress)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        bar.update(done, f"{spec.name} seed {seed}")

    replay = replay_day(day, options, tick)
    bar.close()
    return write_replay(replay, out, plots=plots, command=command)


def replay_series(directory: Path, options: ReplayOptions, out: Path, *,
                  interval: int, plots: bool = True, command: str | None = None,
                  stream: TextIO | None = None, progress: bool | None = None
                  ) -> list[dict[str, Any]]:
    """Replay a recorded snapshot series with every engine and write the report."""
    from benchmarks.replay.snapshots import series_day

    day = series_day(directory, interval=interval)
    bar = _progress(stream, len(day.sessions) * len(options.engines), progress)
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        bar.update(done, day.settings.name)

    replay = replay_day(day, options, tick)
    bar.close()
    return write_replay(replay, out, plots=plots, command=command)


def _seed_task(spec: WorkloadSpec, seed: int, engine: str, options: ReplayOptions
               ) -> dict[str, Any]:
    """One Dask task: one seed's day with one engine, as a ``summary.csv`` row."""
    return summary_row(replay_engine(generate_day(spec, seed), engine, options), seed)


@dataclass
class SeedsResult:
    """Rows of a many-seed run (sorted by seed, then engine order) and the failures."""

    rows: list[dict[str, Any]]
    failures: list[str]


def replay_many(spec: WorkloadSpec, seeds: list[int], options: ReplayOptions, client: Any,
                out: Path, *, command: str | None = None, runner: str = "",
                stream: TextIO | None = None, progress: bool | None = None,
                task: Callable[[WorkloadSpec, int, str, ReplayOptions], dict[str, Any]]
                = _seed_task) -> SeedsResult:
    """Replay ``seeds`` of ``spec`` on ``client``'s cluster and write the report."""
    from distributed import as_completed

    out.mkdir(parents=True, exist_ok=True)
    bar = _progress(stream, len(seeds) * len(options.engines), progress)
    futures = {}
    for seed in seeds:
        for engine in options.engines:
            future = client.submit(task, spec, seed, engine, options, pure=False,
                                   key=f"npu-replay-{spec.name}-{seed}-{engine}")
            futures[future] = (seed, engine)
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    for future in as_completed(list(futures)):
        seed, engine = futures[future]
        try:
            rows.append(future.result())
        except Exception as exc:
            failures.append(f"seed {seed}, {engine}: {type(exc).__name__}: {exc}")
        future.release()
        bar.update(len(rows) + len(failures), f"{spec.name}: seed {seed} {engine}")
    bar.close()
    order = {name: i for i, name in enumerate(options.engines)}
    rows.sort(key=lambda r: (int(r["seed"]), order[str(r["engine"])]))
    write_csv(out / "summary.csv", rows, ("seed", "engine", *SUMMARY_FIELDS))
    write_output(out / "report.md", render_seeds_report(spec.name, rows, options.engines,
                                                        failures, command, runner))
    return SeedsResult(rows, failures)
