"""Text output of the command line: tables, the result summary, ``--output`` files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from models.compiled import Problem, expired_owners
from models.objective import Metrics
from models.placement import MetricsModel
from models.vnpu import compile_vnpu
from solver.doors import CliError
from solver.facade import Result


def metrics_rows(metrics: Metrics | MetricsModel) -> list[tuple[str, str]]:
    """Rows of the metrics table (of computed metrics or the contract's object)."""
    rate = (f"{100.0 * metrics.origin_hits / metrics.origin_candidates:.1f} %"
            if metrics.origin_candidates else "-")
    return [
        ("placed-jobs", str(metrics.placed_jobs)),
        ("origin-hits", f"{metrics.origin_hits} / {metrics.origin_candidates} candidates "
                        f"(achievable {metrics.achievable_origin_hits}; hit rate {rate})"),
        ("fault-returns", str(metrics.fault_returns)),
        ("subhealthy-nodes", str(metrics.subhealthy_nodes)),
        ("reserve-used", str(metrics.reserve_used)),
        ("fragment-score", str(metrics.fragment_score)),
        ("affinity-spill", str(metrics.affinity_spill)),
        *([("image-hits", f"{metrics.image_hits} hosting nodes already hold the job's image "
                          f"({metrics.image_hit_gb:.1f} GB not pulled)")]
          if isinstance(metrics, Metrics) and metrics.image_hits else []),
        ("objective", str(metrics.objective)),
    ]


def table(rows: Sequence[Sequence[str]], header: Sequence[str] | None = None) -> str:
    """Left-aligned columns, with a rule under ``header`` when given."""
    data = [list(header)] if header else []
    data += [list(r) for r in rows]
    if not data:
        return ""
    widths = [max(len(r[i]) for r in data) for i in range(len(data[0]))]
    lines = []
    for k, row in enumerate(data):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if header and k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _compress(nodes: list[str], limit: int = 6) -> str:
    if len(nodes) <= limit:
        return ", ".join(nodes)
    return ", ".join(nodes[:limit]) + f", ... (+{len(nodes) - limit})"


def render_result_table(problem: Problem, result: Result) -> str:
    """A readable summary of one result."""
    head = [
        ("engine", result.engine),
        ("status", result.status.value),
        ("objective", str(result.objective)),
        ("bound", "-" if result.bound is None else str(result.bound)),
        ("gap", "-" if result.gap is None else f"{100 * result.gap:.3f} %"),
        ("wall-seconds", f"{result.wall_seconds:.3f}"),
    ]
    if result.greedy_objective is not None and result.engine != "greedy":
        head.append(("greedy objective", str(result.greedy_objective)))
    parts = [table(head), "", table(metrics_rows(result.metrics))]
    rows = []
    vnpu = compile_vnpu(problem)
    for jp in result.placement.jobs:
        if jp.name in vnpu.job_index:  # a vNPU job: its request instead of a policy
            vjob = vnpu.jobs[vnpu.job_index[jp.name]]
            label, tasks = vjob.label, vjob.tasks
        else:
            job = problem.jobs[problem.job_index[jp.name]]
            label, tasks = job.policy.value, job.tasks
        if jp.placed:
            if jp.blocks:
                where = "; ".join(f"{b}: {_compress(nodes, 4)}"
                                  for b, nodes in list(jp.blocks.items())[:3])
                if len(jp.blocks) > 3:
                    where += f"; ... ({len(jp.blocks)} blocks)"
            else:
                where = _compress([jp.ranks[str(r)] for r in range(tasks)])
            rows.append([jp.name, label, str(tasks), "yes",
                         f"{jp.origin_hits}/{jp.origin_candidates}", where])
        else:
            rows.append([jp.name, label, str(tasks), "no",
                         f"0/{jp.origin_candidates}", jp.reason or ""])
    parts += ["", table(rows, ["job", "policy", "tasks", "placed", "hits", "nodes / reason"])]
    if result.notes:
        parts += ["", *(f"note: {n}" for n in result.notes)]
    return "\n".join(parts) + "\n"


#: Output formats by ``--output`` file suffix.
SUFFIX_FORMATS = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}


def output_format(fmt: str | None, output: str | None, default: str = "table") -> str:
    """The format of a command's answer from ``--format`` and ``--output``.

    Without ``--format``, an ``--output`` file ending in ``.json``, ``.yaml`` or ``.yml``
    gets that format (as ``import`` does) and any other file ``default``.  A ``--format``
    that contradicts the file's suffix (``--format table --output p.json``) is refused.

    Raises
    ------
    CliError
        Naming both options.
    """
    by_suffix = SUFFIX_FORMATS.get(Path(output).suffix.lower()) if output else None
    if fmt is None:
        return by_suffix or default
    if by_suffix is not None and fmt != by_suffix:
        raise CliError(f"--format {fmt} contradicts --output {output} (a {by_suffix} file "
                       f"name): drop --format to write {by_suffix}, or name the file to match")
    return fmt


def emit(text: str, output: str | None, stream: TextIO) -> None:
    """Write ``text`` to ``output`` (a file) or to ``stream``."""
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:  # a bad --output path is the user's input, not a crash
            raise CliError(f"cannot write --output file '{output}': {exc.strerror}") from None
    else:
        stream.write(text)


def expired_cache_note(problem: Problem) -> str | None:
    """A note naming the cache owners whose entries are older than the TTL, if any."""
    owners = expired_owners(problem.scenario, problem.now)
    if not owners:
        return None
    ttl = problem.scenario.affinity_cache.ttl_seconds
    shown = ", ".join(owners[:10]) + (f", ... ({len(owners) - 10} more)" if len(owners) > 10
                                      else "")
    return (f"affinity cache: the entries of {len(owners)} owner(s) ({shown}) were last "
            f"updated before now - ttl-seconds ({problem.now} - {ttl}): expired, so no rank "
            "counts them as candidates (simulate evicts them before its first session)")
