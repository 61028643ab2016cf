"""What-if sweeps on Dask: ``npu-place sweep GRID [--scheduler ADDRESS] [--out DIR] [--resume]``.

A *grid* names scenarios (files, globs, or benchmark generator cases) and lists of
configuration overrides, engines, time limits, seeds and CP-SAT deterministic times; a
*cell* is one element of their product and one Dask task.  The same runner serves
``npu-place bench`` (the built-in suites are grids of generator cases) and the regression
mode (``compare --suite``; ``sweep --baseline``): one machinery, one comparison.

Grid format (YAML or JSON; paths relative to the grid file)::

    scenarios: [snapshots/a.yaml, "snapshots/day-*.json"]   # globs allowed
    generate:                                              # optional generator cases
      - {family: 950, nodes: 4096, jobs: 8, seeds: [0, 1, 2]}
    overrides:                                             # contract path -> values
      config.reserve-nodes: [0, 2]
      config.prefer-previous-node: [true, false]
      jobs.*.priority: [0, 10]                             # '*' = every list element
    engines: [greedy, cpsat]                               # default [greedy, cpsat]
    time-limits: [1]                                       # seconds; default [10]
    seeds: [0]                                             # CP-SAT seeds; default [0]
    deterministic-time: 5                                  # optional: a number or a list
    cpsat-workers: 1                                       # CP-SAT workers per cell
    events: events.yaml                                    # optional: run simulate

Runner
------
Without a scheduler address a :class:`distributed.LocalCluster` is started on loopback
(one worker process per core, one thread each: a cell's CP-SAT uses one search worker);
with one, the cells run on that cluster.  Scenario files are read once by the driver and
travel with their cells, so remote workers need no shared file system.  Each finished
cell is appended to ``DIR/results.csv`` at once; a cell that raises, or whose worker dies
(``KilledWorker``), is recorded in its row (``status`` ``error``) and the sweep goes on.

Resume
------
Every row carries ``key``, the SHA-256 of (scenario content, overrides, engine, time limit,
deterministic time, seed, CP-SAT workers, events content, project version).  ``--resume``
keeps the rows of ``results.csv`` whose key is still in the grid and reruns only the rest
(and cells whose worker was lost).

Modules
-------
:mod:`~benchmarks.sweep.grid`
    The grid format validated, its cells and their keys, overrides applied to a scenario.
:mod:`~benchmarks.sweep.runner`
    One cell as a Dask task, the Dask client and the streaming of cells through it, and
    :func:`run_sweep` (the command).
:mod:`~benchmarks.sweep.rows`
    ``results.csv`` written row by row, read back and sorted in grid order.
:mod:`~benchmarks.sweep.compare`
    The cell-by-cell regression comparison with a baseline.
:mod:`~benchmarks.sweep.report`
    ``report.md`` and the plots.

The names others use are re-exported here.
"""

from benchmarks.sweep.compare import (
    Coverage,
    Finding,
    baseline_coverage,
    compare_rows,
    regression_failed,
    regression_text,
    regression_verdict,
)
from benchmarks.sweep.grid import (
    GENERATE_KEYS,
    GRID_KEYS,
    HEAD_FIELDS,
    SCENARIO_KEYS,
    TAIL_FIELDS,
    Cell,
    Grid,
    Source,
    apply_overrides,
    data_digest,
    expand,
    format_value,
    grid_from_data,
    load_grid,
    override_path_error,
    project_version,
)
from benchmarks.sweep.report import PLOT_HINT, render_sweep_report, value_rows, write_sweep_plots
from benchmarks.sweep.rows import NO_RESULT, ResultsFile, read_results, sort_results
from benchmarks.sweep.runner import (
    FAILURES_SHOWN,
    INPROCESS,
    WORKER_LOST,
    Task,
    dask_client,
    describe_client,
    failed_row,
    failure_lines,
    run_cell,
    run_cells,
    run_sweep,
)

__all__ = [
    "FAILURES_SHOWN", "GENERATE_KEYS", "GRID_KEYS", "HEAD_FIELDS", "INPROCESS", "NO_RESULT",
    "PLOT_HINT", "SCENARIO_KEYS", "TAIL_FIELDS", "WORKER_LOST", "Cell", "Coverage", "Finding",
    "Grid", "ResultsFile", "Source", "Task", "apply_overrides", "baseline_coverage",
    "compare_rows", "dask_client", "data_digest", "describe_client", "expand", "failed_row",
    "failure_lines", "format_value", "grid_from_data", "load_grid", "override_path_error",
    "project_version", "read_results", "regression_failed", "regression_text",
    "regression_verdict", "render_sweep_report", "run_cell", "run_cells", "run_sweep",
    "sort_results", "value_rows", "write_sweep_plots",
]
