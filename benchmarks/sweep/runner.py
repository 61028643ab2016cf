"""Running a sweep: one cell in a worker, the cells on a Dask cluster, the whole command.

:func:`run_cell` is the Dask task (one cell to one ``results.csv`` row, every failure
recorded in the row); :func:`dask_client` and :func:`run_cells` start or reach a cluster
and stream the cells through it; :func:`run_sweep` is ``npu-place sweep``: grid, resume,
runner, ``results.csv``, report, plots and the baseline comparison.
"""

from __future__ import annotations

import contextlib
import csv
import gc
import io
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from benchmarks.common import MemoryProbe, Progress
from benchmarks.generators import GenParams, generate_case
from benchmarks.outputs import check_out_dir, write_output
from benchmarks.sweep.compare import (
    baseline_coverage,
    compare_rows,
    regression_failed,
    regression_text,
)
from benchmarks.sweep.grid import (
    Cell,
    apply_overrides,
    expand,
    format_number,
    format_value,
    load_grid,
    project_version,
)
from benchmarks.sweep.report import import_plotting, render_sweep_report, write_sweep_plots
from benchmarks.sweep.rows import ResultsFile, read_results, row_failed, sort_results
from models.check import check
from models.compiled import compile_scenario
from models.documents import read_text
from models.io import scenario_from_data
from models.joblist import job_count
from models.validation import InputError
from solver.doors import require_extra
from solver.facade import InvalidAnswer, Result, solve

#: Error text prefix of a cell whose worker was lost (such cells rerun on ``--resume``).
WORKER_LOST = "worker lost"
#: ``--scheduler`` value that runs the cells in this process (one at a time, threads).
INPROCESS = "inprocess"

log = logging.getLogger("npu_place.sweep")


# --------------------------------------------------------------------------- one cell


def _base_row(cell: Cell) -> dict[str, str]:
    row = {
        "key": cell.key, "cell": cell.cell_id, "scenario": cell.source.label,
        "scenario-sha256": cell.source.digest, "engine": cell.engine,
        "time-limit": format_number(cell.time_limit), "seed": str(cell.seed),
        "deterministic-time": format_number(cell.deterministic_time),
        "cpsat-workers": str(cell.cpsat_workers),
    }
    for path, value in cell.overrides:
        row[path] = format_value(value)
    params = cell.source.params
    if params is not None:
        row.update({"family": str(params["family"]), "scale": str(params["nodes"]),
                    "mix": "single" if params["jobs"] == 1 else "batch",
                    "gen-seed": str(params["seed"]), "depth": str(params.get("depth") or "")})
    return row


def failed_row(cell: Cell, status: str, error: str) -> dict[str, str]:
    """The row of a cell that produced no result."""
    return {**_base_row(cell), "status": status, "valid": "no" if status != "skipped" else "",
            "error": error[:500]}


def _ratio(num: int, den: int) -> str:
    return format_number(num / den, 4) if den else ""


def _result_columns(problem: Any, result: Result) -> dict[str, str]:
    m = result.metrics
    violations = check(problem, result.placement)
    bug = [n for n in result.notes if n.startswith("BUG:")]
    return {
        "answer-engine": result.engine, "status": result.status.value,
        "valid": "no" if violations or bug else "yes",
        "placed-jobs": str(m.placed_jobs), "origin-hits": str(m.origin_hits),
        "origin-candidates": str(m.origin_candidates),
        "achievable-origin-hits": str(m.achievable_origin_hits),
        "hit-rate": _ratio(m.origin_hits, m.origin_candidates),
        "fault-returns": str(m.fault_returns), "subhealthy-nodes": str(m.subhealthy_nodes),
        "reserve-used": str(m.reserve_used), "fragment-score": str(m.fragment_score),
        "affinity-spill": str(m.affinity_spill), "objective": str(result.objective),
        "bound": "" if result.bound is None else str(result.bound),
        "gap": format_number(result.gap),
        "solver-wall-seconds": format_number(result.solver_wall_seconds),
        "solver-deterministic-seconds": format_number(result.solver_deterministic_seconds),
        "note": "; ".join([str(v) for v in violations[:3]] + bug)[:500],
    }


def _simulate_columns(scenario: Any, events: Any, cell: Cell) -> dict[str, str]:
    from solver.simulate import simulate

    kwargs: dict[str, Any] = {"engine": cell.engine, "time_limit": cell.time_limit,
                              "workers": cell.cpsat_workers, "seed": cell.seed,
                              "scenario_source": cell.source.label,
                              "events_source": "events"}
    if cell.deterministic_time is not None:
        kwargs["deterministic_time"] = cell.deterministic_time
    report = simulate(scenario, events, **kwargs)
    totals = report.totals()
    placed = sum(len(s.placed) for s in report.sessions)
    return {
        "status": "simulated", "answer-engine": cell.engine, "valid": "yes",
        "sessions": str(totals["sessions"]), "placed-jobs": str(placed),
        "origin-hits": str(totals["hits"]), "origin-candidates": str(totals["candidates"]),
        "achievable-origin-hits": str(totals["achievable"]),
        "hit-rate": _ratio(int(totals["hits"]), int(totals["candidates"])),
        "fault-returns": str(totals["fault-returns"]),
        "note": f"pending after the last session: {totals['pending-after-last']}, image "
                f"pulls avoided: {totals['pulls-avoided-gb']} GB",
    }


#: Generated scenarios a worker process keeps (their plain data), by generator parameters:
#: the cells of one generated scenario (engines, seeds, limits, overrides) generate it once
#: per worker instead of once per cell (0.1-0.2 s of CPU at 4,096 nodes, a few percent of
#: a cell that solves under deterministic time 1-2).
GENERATED_KEPT = 8
_generated: dict[str, tuple[str, dict[str, Any]]] = {}


def generated_data(params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(history engine, scenario data)`` of the generator case ``params``, generated
    once per process for the last :data:`GENERATED_KEPT` cases.  The data is shared
    between cells: callers copy before changing it (:func:`apply_overrides` does)."""
    key = json.dumps(params, sort_keys=True)
    found = _generated.pop(key, None)
    if found is None:
        case = generate_case(GenParams(**params))
        found = (case.history_engine, case.scenario.to_dict())
    _generated[key] = found  # newest last
    while len(_generated) > GENERATED_KEPT:
        _generated.pop(next(iter(_generated)))
    return found


def run_cell(cell: Cell, data: dict[str, Any] | None = None, events: Any = None
             ) -> dict[str, str]:
    """Run one cell (the Dask task); every failure becomes the row's ``error``.

    Parameters
    ----------
    cell
        What to run.
    data
        The scenario's plain data (``file`` and ``inline`` sources).
    events
        The events document: the cell runs ``simulate`` instead of ``plan``.

    Returns
    -------
    dict
        The ``results.csv`` row (strings); with ``_scenario`` (JSON text of the generated
        scenario) when the cell asks for it.
    """

    row = _base_row(cell)
    with contextlib.suppress(Exception):
        from distributed import get_worker

        row["worker"] = str(get_worker().address)
    if cell.not_after is not None and time.time() + 2 * cell.time_limit > cell.not_after:
        return {**row, "status": "skipped",
                "note": "skipped: the time budget of the run was used up"}
    probe = MemoryProbe()
    started = time.perf_counter()
    cpu_started = time.process_time()
    try:
        if cell.source.kind == "generate":
            assert cell.source.params is not None
            history, scenario_data = generated_data(cell.source.params)
            row["history"] = history
            if cell.want_scenario:
                row["_scenario"] = json.dumps(scenario_data, indent=1)
        else:
            if data is None:
                raise ValueError(f"no data for scenario '{cell.source.label}'")
            scenario_data = data
        source = cell.source.label
        if cell.overrides:
            scenario_data = apply_overrides(scenario_data, cell.overrides)
            source += " with " + ", ".join(f"{k}={format_value(v)}" for k, v in cell.overrides)
        scenario = scenario_from_data(scenario_data, source)
        row["nodes"] = str(len(scenario.nodes))
        row["jobs"] = str(job_count(scenario))
        if events is not None:
            before = probe.reset()
            started = time.perf_counter()
            row.update(_simulate_columns(scenario, events, cell))
        else:
            problem = compile_scenario(scenario, source)
            before = probe.reset()
            started = time.perf_counter()  # the whole solve call, as the bench always timed
            solve_cpu = time.process_time()
            result = solve(problem, engine=cell.engine, time_limit=cell.time_limit,
                           workers=cell.cpsat_workers, seed=cell.seed,
                           deterministic_time=cell.deterministic_time)
            row["solve-cpu-seconds"] = format_number(time.process_time() - solve_cpu)
            row.update(_result_columns(problem, result))
        row["wall-seconds"] = format_number(time.perf_counter() - started)
        row["cell-cpu-seconds"] = format_number(time.process_time() - cpu_started)
        peak = probe.peak()
        row["peak-rss-mb"] = format_number(peak, 1)
        row["peak-delta-mb"] = format_number(max(0.0, peak - before), 1)
    except InvalidAnswer as exc:
        row.update({"status": "invalid", "valid": "no", "error": str(exc)[:500],
                    "wall-seconds": format_number(time.perf_counter() - started)})
    except InputError as exc:
        row.update({"status": "error", "valid": "no",
                    "error": ("invalid input: " + "; ".join(exc.messages[:3]))[:500]})
    except Exception as exc:  # a crashing cell is a result of the sweep, not its end
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        row.update({"status": "error", "valid": "no",
                    "error": f"{type(exc).__name__}: {exc}{where}"[:500],
                    "wall-seconds": format_number(time.perf_counter() - started)})
    return row


# --------------------------------------------------------------------------- runner


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None,
                option: str = "--dask-workers") -> Iterator[Any]:
    """A :class:`distributed.Client` for the sweep, closed (with its cluster) on exit.

    Parameters
    ----------
    scheduler
        ``None``: a new :class:`distributed.LocalCluster` on loopback, ``workers`` worker
        processes (default: the cores), one thread each.  ``"inprocess"``: one worker
        thread in this process (no parallelism; for debugging and tests).  Otherwise the
        address of a running Dask scheduler (``tcp://host:8786``).
    workers
        Worker processes of the local cluster (at most four per core, at least 8).
    option
        The command-line option that gave ``workers`` (named in the error message).

    Raises
    ------
    InputError
        When the scheduler cannot be reached.
    CliError
        When Dask is not installed (the ``sweep`` extra; exit 2).
    """
    require_extra("sweep", "the Dask runner (sweep, bench, compare --suite, replay --seeds)")
    import dask
    from distributed import Client, LocalCluster

    cores = os.cpu_count() or 1
    if workers is not None and not 1 <= workers <= max(8, 4 * cores):
        raise InputError([f"{option} {workers}: a local cluster takes 1 to {max(8, 4 * cores)} "
                          f"worker processes on this machine ({cores} cores); give a "
                          "--scheduler address for more"])
    if scheduler not in (None, INPROCESS):
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError([f"--scheduler {scheduler}: cannot reach the Dask scheduler: "
                              f"{exc}"]) from None
        try:
            yield client
        finally:
            client.close()
        return
    # the configuration holds for the cluster's whole life: a worker a nanny restarts
    # after a cell killed it is spawned with it too
    with dask.config.set(local_cluster_config()):
        try:
            if scheduler == INPROCESS:
                cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                       dashboard_address="127.0.0.1:0",
                                       silence_logs=logging.ERROR)
            else:
                cluster = LocalCluster(**local_cluster_options(workers or cores))
            client = Client(cluster)
        except KeyboardInterrupt:
            _abandon_starting_clusters()
            raise
        try:
            yield client
        finally:
            client.close()
            cluster.close()


def local_cluster_config() -> dict[str, Any]:
    """The Dask configuration of a sweep's own cluster (set while it starts and runs).

    * A cell that kills its worker is retried once elsewhere, then recorded as lost; a
      worker holds only the cell it runs (``worker-saturation`` 1), so no innocent cell
      dies with it.
    * No periodic work the sweep does not use.  Dask's defaults sample each busy
      worker's stack every 10 ms for the dashboard's profile (a thread that takes the GIL
      from the cell's model build), and the scheduler, the nannies and the workers wake
      every 20-500 ms to time their event loops, poll the processes' memory and CPU and
      look for work to steal.  An idle cluster of two workers spent about 0.13 s of CPU
      a second on it (a few percent of a 2-core machine, taken from the cells); with the
      values below 0.013 s.  The nanny still polls its worker's memory every second
      against the memory limit.
    * The worker processes start with the environment of a plain process.  Dask's
      default sets ``MALLOC_TRIM_THRESHOLD_`` before it spawns a worker; that fixes
      glibc's mmap threshold at 128 KiB, so every large array a model build allocates is
      mapped and unmapped afresh: a 950 cell of 4,096 nodes faulted 3x the pages of a
      plain ``plan`` process (2.3·10^5 against 7.4·10^4) and spent 0.35 s more CPU in the
      kernel.  Each cell is single-threaded, as OpenMP and BLAS are told.
    """
    return {"distributed.scheduler.allowed-failures": 1,
            "distributed.scheduler.worker-saturation": 1.0,
            "distributed.scheduler.work-stealing": False,
            "distributed.worker.profile.enabled": False,
            "distributed.admin.tick.interval": "1s",
            "distributed.admin.system-monitor.interval": "5s",
            "distributed.worker.memory.monitor-interval": "1s",
            "distributed.nanny.pre-spawn-environ": {"OMP_NUM_THREADS": 1,
                                                    "MKL_NUM_THREADS": 1,
                                                    "OPENBLAS_NUM_THREADS": 1}}


def local_cluster_options(workers: int) -> dict[str, Any]:
    """The :class:`distributed.LocalCluster` arguments of a sweep's own cluster: ``workers``
    single-threaded worker processes on loopback, each running :func:`dask_setup` as it
    starts, so that it imports the cells' code while the cluster starts rather than in
    its first cell.  The scheduler's HTTP server (the dashboard when bokeh is installed)
    takes a free port: with no address it would take 8787, which a second cluster on
    the machine finds taken.  Start it under :func:`local_cluster_config`."""
    return {"n_workers": workers, "threads_per_worker": 1, "processes": True,
            "host": "127.0.0.1", "dashboard_address": "127.0.0.1:0",
            "silence_logs": logging.ERROR, "preload": [__name__]}


def warm_worker() -> None:
    """Ready a worker process for its cells: import what :func:`run_cell` runs, then
    freeze the heap so far (:func:`gc.freeze`).

    The imports (OR-Tools, the models, numpy; about 0.5 s of CPU) are paid once while the
    cluster starts instead of inside each worker's first cell.  Freezing moves every
    object made so far (modules, classes, Dask's own state: about 8·10^4 objects) out of
    the collector's reach, so the full collection each cell makes before it measures its
    peak memory (:class:`benchmarks.common.MemoryProbe`), and every automatic one, no
    longer walks them: 40-50 ms of CPU less per cell at 4,096 nodes.  The frozen objects
    live as long as the process, as modules do anyway.
    """
    from solver.facade import preload

    preload("cpsat")
    gc.collect()
    gc.freeze()


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in each worker process of a local cluster as it starts
    (this module is named in the cluster's ``preload``): :func:`warm_worker`."""
    warm_worker()


def _abandon_starting_clusters() -> None:
    """Ctrl-C while a local cluster starts: stop what has started, quietly.

    The interrupt leaves half-started nannies behind; distributed's own exit hook then
    tries to close them and prints an ``AssertionError: Status.init`` traceback, and the
    nannies' failed start tasks print "Nanny failed to start" tracebacks: noise that
    looks like a crash after the CLI's one "interrupted" line.  The worker processes are
    daemonic children and end with this process.
    """
    import atexit

    from distributed.deploy.spec import SpecCluster, close_clusters

    for name in ("distributed", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    for cluster in list(SpecCluster._instances):
        with contextlib.suppress(Exception):  # a half-started cluster cannot close cleanly
            cluster.close(timeout=5)
    atexit.unregister(close_clusters)


def describe_client(client: Any) -> str:
    """Workers and threads of a connected client (for reports)."""
    try:
        threads = client.nthreads()
        address = client.scheduler.address
        return (f"Dask scheduler {address}: {len(threads)} worker(s), "
                f"{sum(threads.values())} thread(s)")
    except Exception:  # pragma: no cover - informational only
        return "Dask"


#: The task a runner submits (tests substitute their own).
Task = Callable[[Cell, Any, Any], dict[str, str]]


def _threads(client: Any) -> int:
    try:
        return max(1, sum(client.nthreads().values()))
    except Exception:  # pragma: no cover - a scheduler without the usual info
        return 1


def run_cells(client: Any, cells: Sequence[Cell], data: dict[str, Any] | None = None,
              events: Any = None, on_row: Callable[[dict[str, str]], None] | None = None,
              task: Task = run_cell, window: int | None = None) -> list[dict[str, str]]:
    """Run ``cells`` on ``client``'s cluster; return their rows in completion order.

    Cells are submitted in grid order, at most ``window`` at a time (default: four per
    worker thread, at least 8), so the scheduler never holds the whole grid; each task
    carries its scenario's data, so a worker that dies loses nothing another worker
    cannot redo (scattered data would be lost with it).  Each row is handed to
    ``on_row`` as soon as it arrives.  A cell whose task fails (its worker died, or the
    task raised despite :func:`run_cell`'s guard) is recorded with status ``error``.
    """
    from distributed import as_completed

    data = data or {}
    window = window or max(8, 4 * _threads(client))
    pending = iter(enumerate(cells))
    futures: dict[Any, Cell] = {}

    def submit_next(done: Any) -> bool:
        item = next(pending, None)
        if item is None:
            return False
        i, cell = item
        future = client.submit(task, cell, data.get(cell.source.label), events, pure=False,
                               priority=-i, key=f"npu-cell-{i}-{cell.key[:16]}")
        futures[future] = cell
        done.add(future)
        return True

    rows: list[dict[str, str]] = []
    done = as_completed()
    try:
        for _ in range(window):
            if not submit_next(done):
                break
        for future in done:
            cell = futures.pop(future)
            try:
                # a result lost with its worker before it was fetched is recomputed (the
                # future is still wanted): result() waits for that
                row = future.result()
            except Exception as exc:  # the task failed: KilledWorker, cancelled, ...
                row = failed_row(cell, "error", f"{WORKER_LOST}: {type(exc).__name__}: {exc}")
            future.release()
            rows.append(row)
            submit_next(done)
            if on_row is not None:
                on_row(row)
    finally:
        for future in futures:
            future.cancel()
    return rows


# --------------------------------------------------------------------------- command


def run_sweep(grid_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
              out: TextIO, err: TextIO, resume: bool = False,
              baseline: str | os.PathLike[str] | None = None,
              deterministic_time: float | None = None, scheduler: str | None = None,
              workers: int | None = None, show_progress: bool = True,
              workers_option: str = "--dask-workers", force: bool = False) -> int:
    """Run (or resume) a what-if sweep and write its results, report and plots.

    Parameters
    ----------
    grid_path
        The grid file.
    out_dir
        Where ``results.csv``, ``report.md`` and the plots go; a folder that is not empty
        is refused unless ``resume`` (continue its ``results.csv``) or ``force`` (start
        over, writing over the files of the same names) is given.
    out, err
        The headline and the progress bar go to ``out`` (the bar only on a terminal),
        notes and the interruption message to ``err``.
    resume
        Continue the sweep in ``out_dir``; finished cells are not rerun, and when every
        cell is finished no Dask cluster is started.
    baseline
        An earlier sweep's ``results.csv`` to compare cell by cell; the comparison fails
        unless every cell of both runs was compared (:class:`Coverage`).  Its notes go to
        ``report.md``.
    deterministic_time
        Replaces the grid's ``deterministic-time`` for every cell.
    scheduler, workers
        A Dask scheduler address, or the worker processes of a local cluster.
    show_progress
        Show the progress bar (on a terminal).
    workers_option
        The command-line option that gave ``workers`` (named in its error message).
    force
        Write into a folder that is not empty (see ``out_dir``).

    Returns
    -------
    int
        1 when a cell failed or the baseline comparison failed, 130 when interrupted
        (Ctrl-C: the message is written here, once), else 0.
    """

    grid = load_grid(grid_path)
    if deterministic_time is not None:
        grid.deterministic_times = [float(deterministic_time)]
    baseline_rows = None
    if baseline:
        baseline_rows = read_results(Path(baseline))
    out_dir = Path(out_dir)
    check_out_dir(out_dir, force=force, resume=resume)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = out_dir / "results.csv"
    cells = expand(grid)
    keep: list[dict[str, str]] = []
    if results.exists() and resume:
        with io.StringIO(read_text(results), newline="") as handle:  # bounded
            header = next(csv.reader(handle), [])
        if header and header != grid.fieldnames():
            raise InputError([f"{results}: its columns are not this grid's (different "
                              "overrides); choose another --out"])
        wanted = {c.key for c in cells}
        old = read_results(results)
        keep = [r for r in old if r.get("key") in wanted
                and not r.get("error", "").startswith(WORKER_LOST)]
        stale = [r for r in old if r.get("key") not in wanted]
        if stale:  # another grid or another npu-place version: set aside, never lost
            aside = out_dir / "results.stale.csv"
            ResultsFile(aside, header, stale).close()
            err.write(f"note: {len(stale)} row(s) of {results} are not cells of this grid "
                      f"(the grid or the npu-place version changed); moved to {aside}\n")
    done = {r["key"] for r in keep}
    todo = [c for c in cells if c.key not in done]

    tty = bool(getattr(out, "isatty", lambda: False)())
    count = len(keep)
    started = time.perf_counter()
    closing = Closing()
    if not todo:  # every cell is finished: no cluster to start
        where = "no runner (every cell was already in results.csv)"
        ready = started
        ResultsFile(results, grid.fieldnames(), keep).close()
    else:
        progress = Progress(out, len(cells), tty and show_progress)
        with contextlib.ExitStack() as stack:
            try:
                client = stack.enter_context(dask_client(scheduler, workers, workers_option))
            except KeyboardInterrupt:  # Ctrl-C while the cluster starts: one message
                progress.close()
                err.write(f"interrupted while the Dask cluster started: no cell was run "
                          f"({count} of {len(cells)} cells were finished before)\n")
                return 130
            where = describe_client(client)
            ready = time.perf_counter()
            writer = ResultsFile(results, grid.fieldnames(), keep)

            threads = _threads(client)

            def on_row(row: dict[str, str]) -> None:
                nonlocal count
                writer.write(row)
                count += 1
                progress.update(count, row.get("cell", "")[:60])
                if len(cells) - count == threads - 1:  # the last cells leave a core free
                    threading.Thread(target=import_plotting, name="npu-place-sweep-plots",
                                     daemon=True).start()

            try:
                progress.update(count, f"{len(todo)} cell(s) to run")
                run_cells(client, todo, grid.data, grid.events, on_row)
            except KeyboardInterrupt:
                progress.close()
                err.write(f"interrupted: {count} of {len(cells)} cells are in {results}; add "
                          "--resume to continue\n")
                return 130
            finally:
                writer.close()
            # every cell is in: the cluster closes (about 1 s, mostly waiting for its
            # processes to end) while the report and the plots are written
            closing.start(stack.pop_all())
        progress.close()
    elapsed = time.perf_counter() - started
    with closing:
        rows = sort_results(results, cells)
        plots = write_sweep_plots(rows, grid.override_keys, out_dir, err)
        meta = {"grid": str(grid_path), "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "runner": where, "project version": project_version(),
                "wall time": f"{elapsed:.1f} s for {len(todo)} cell(s) "
                             f"({len(keep)} kept from an earlier run), of which "
                             f"{ready - started:.1f} s to start or reach the cluster"}
        report = out_dir / "report.md"
        comparison = baseline_text = ""
        failed_comparison = False
        if baseline_rows is not None:
            findings = compare_rows(baseline_rows, rows)
            coverage = baseline_coverage(baseline_rows, rows)
            title = f"against baseline {baseline}:"
            comparison = regression_text(title, rows, baseline_rows, findings, full_table=False,
                                         coverage=coverage, notes_in=str(report))
            failed_comparison = regression_failed(findings, coverage)
            baseline_text = regression_text(title, rows, baseline_rows, findings,
                                            full_table=True, coverage=coverage)
        write_output(report, render_sweep_report(rows, grid.override_keys, meta, plots,
                                                 baseline_text))
        failed = [r for r in rows if row_failed(r)]
    out.write(f"sweep {grid_path}: {len(rows)} cells ({len(todo)} run now, {len(keep)} kept, "
              f"{len(failed)} failed) in {elapsed:.1f} s ({ready - started:.1f} s to start or "
              f"reach the cluster) on {where}\n"
              f"wrote {results}, {report}" + "".join(f", {p}" for p in plots) + "\n")
    out.write(failure_lines(failed, results))
    out.write(comparison)
    return 1 if failed or failed_comparison else 0


class Closing:
    """Closes a finished sweep's Dask client and cluster in a thread, so that the report
    and the plots are written meanwhile; leaving the ``with`` block waits for the close
    and re-raises what it raised.  Without :meth:`start` it does nothing."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, stack: contextlib.ExitStack) -> None:
        """Close ``stack`` (the client and its cluster) in a new thread."""

        def close() -> None:
            try:
                stack.close()
            except BaseException as exc:  # re-raised in the caller's thread
                self._error = exc

        self._thread = threading.Thread(target=close, name="npu-place-sweep-close",
                                        daemon=True)
        self._thread.start()

    def __enter__(self) -> Closing:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


#: Failed cells whose reason the sweep's summary prints (the rest are counted).
FAILURES_SHOWN = 10


def failure_lines(failed: Sequence[dict[str, str]], results: Path) -> str:
    """The summary's lines of the failed cells: cell, engine, status and reason (the
    ``error`` column, or the validator's ``note``), at most :data:`FAILURES_SHOWN`."""
    from models.limits import escape_text

    lines = []
    for row in failed[:FAILURES_SHOWN]:
        reason = row.get("error") or row.get("note") or "no reason recorded"
        lines.append(f"  failed: {row.get('cell', '?')} [{row.get('engine', '?')}] "
                     f"{row.get('status', '?')}: {escape_text(reason, 500)}\n")
    hidden = len(failed) - FAILURES_SHOWN
    if hidden > 0:
        lines.append(f"  ... and {hidden} more failed cell(s): see {results}\n")
    return "".join(lines)
