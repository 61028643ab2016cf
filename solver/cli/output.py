"""Text output of the command line: tables, the result summary, ``--output`` files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from models.compiled import Problem, expired_owners
from models.objective import Metrics
from solver.doors import CliError
from solver.facade import Result


def metrics_rows(metrics: Metrics) -> list[tuple[str, str]]:
    """Rows of the metrics table."""
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
    for jp in result.placement.jobs:
        job = problem.jobs[problem.job_index[jp.name]]
        if jp.placed:
            if jp.blocks:
                where = "; ".join(f"{b}: {_compress(nodes, 4)}"
                                  for b, nodes in list(jp.blocks.items())[:3])
                if len(jp.blocks) > 3:
                    where += f"; ... ({len(jp.blocks)} blocks)"
            else:
                where = _compress([jp.ranks[str(r)] for r in range(job.tasks)])
            rows.append([jp.name, job.policy.value, str(job.tasks), "yes",
                         f"{jp.origin_hits}/{jp.origin_candidates}", where])
        else:
            rows.append([jp.name, job.policy.value, str(job.tasks), "no",
                         f"0/{jp.origin_candidates}", jp.reason or ""])
    parts += ["", table(rows, ["job", "policy", "tasks", "placed", "hits", "nodes / reason"])]
    if result.notes:
        parts += ["", *(f"note: {n}" for n in result.notes)]
    return "\n".join(parts) + "\n"


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
