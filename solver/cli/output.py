"""Text output of the command line: tables, the result summary, ``--output`` files."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from models.compiled import Problem, expired_owners
from models.objective import Metrics, ObjectiveTerm
from models.placement import JobPlacement, MetricsModel
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
        ("objective", str(metrics.objective) if not isinstance(metrics, Metrics)
         or not metrics.terms else objective_sum(metrics.objective, metrics.terms)),
    ]


def objective_sum(objective: int, terms: Sequence[ObjectiveTerm]) -> str:
    """The objective as the sum of its terms, in one line: ``5924 = 1152 placed-jobs
    (2 jobs) + 4788 origin-hits (12 x 399) - 16 fragment-score (16 x 1); 0 from ...``."""
    shown = [t for t in terms if t.value != 0 or t.name == "placed-jobs"]
    parts = []
    for k, term in enumerate(shown):
        if term.weight is not None:
            how = f"{term.count} x {term.weight}"
        elif term.name == "image-hits":  # weighted per node by the job's image size
            how = f"{term.count} node{'s' if term.count != 1 else ''} holding the image"
        else:
            how = f"{term.count} job{'s' if term.count != 1 else ''}"
        sign = ("-" if term.value < 0 else "") if k == 0 else ("- " if term.value < 0
                                                               else "+ ")
        parts.append(f"{sign}{abs(term.value)} {term.name} ({how})")
    zero = [t.name for t in terms if t not in shown]
    return (f"{objective} = " + " ".join(parts)
            + (f"; 0 from {', '.join(zero)}" if zero else ""))


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


#: Marks of the rank map: an origin hit, and a rank of ``fault-ranks`` placed back on its
#: cached node (a fault return).
HIT_MARK = "*"
FAULT_MARK = "!"

#: The legend printed under a job table that has a rank map.
RANK_MAP_LEGEND = (f"rank:node (A-B:n = ranks A to B on node n; A-B:n-X..Y = on nodes n-X to "
                   f"n-Y in order); {HIT_MARK} origin hit, {FAULT_MARK} fault return")

#: The last line of a plan table: where each of its lines is explained.
COLUMNS_NOTE = ("every line of this table is explained in the manual's \"Reading the plan "
                "table\" (docs/plan-output.md)")


def _numbered(name: str) -> tuple[str, str] | None:
    """``("sp0-node-", "12")`` for ``sp0-node-12``: the name's prefix and trailing number."""
    match = re.fullmatch(r"(.*?)([0-9]+)", name)
    return (match.group(1), match.group(2)) if match else None


def rank_map(entries: Sequence[tuple[int, str, str]]) -> list[str]:
    """Every rank and its node, compactly: runs of consecutive ranks on one node
    (``0-7:n0``) or on consecutively numbered nodes (``0-3:sp0-node-0..3``) in one item,
    each item followed by its mark (:data:`HIT_MARK`, :data:`FAULT_MARK` or none).

    Parameters
    ----------
    entries
        ``(rank, node, mark)`` in rank order.

    Returns
    -------
    list of str
        The items, in rank order; no rank is left out.
    """
    items: list[str] = []
    k = 0
    while k < len(entries):
        rank, node, mark = entries[k]
        end = k
        same = k + 1 < len(entries) and entries[k + 1][1] == node
        start_num = _numbered(node)
        while end + 1 < len(entries):
            r2, n2, m2 = entries[end + 1]
            if r2 != entries[end][0] + 1 or m2 != mark:
                break
            if same:
                if n2 != node:
                    break
            else:
                prev, cur = _numbered(entries[end][1]), _numbered(n2)
                if (start_num is None or prev is None or cur is None or cur[0] != prev[0]
                        or int(cur[1]) != int(prev[1]) + 1):
                    break
            end += 1
        if end == k:
            items.append(f"{rank}:{node}{mark}")
        elif same:
            items.append(f"{rank}-{entries[end][0]}:{node}{mark}")
        else:
            last = _numbered(entries[end][1])
            assert start_num is not None and last is not None
            items.append(f"{rank}-{entries[end][0]}:{node}..{last[1]}{mark}")
        k = end + 1
    return items


def wrap_items(items: Sequence[str], width: int = 90) -> list[str]:
    """``items`` joined with ``, `` into lines of at most ``width`` characters (an item
    longer than that gets a line of its own)."""
    lines: list[str] = []
    line = ""
    for item in items:
        candidate = f"{line}, {item}" if line else item
        if line and len(candidate) > width:
            lines.append(line + ",")
            line = item
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


def _rank_entries(problem: Problem, jp: JobPlacement) -> list[tuple[int, str, str]]:
    """``(rank, node, mark)`` of the ranks ``jp`` places, in rank order."""
    vnpu = compile_vnpu(problem)
    if jp.name in vnpu.job_index:
        origin = list(vnpu.jobs[vnpu.job_index[jp.name]].origin)
        fault = [False] * len(origin)
    else:
        job = problem.jobs[problem.job_index[jp.name]]
        origin, fault = job.origin.tolist(), job.fault.tolist()
    entries = []
    for key in sorted(jp.ranks, key=int):
        r, node = int(key), jp.ranks[key]
        mark = ""
        if 0 <= r < len(origin) and origin[r] >= 0 and problem.node_index.get(node) == origin[r]:
            mark = FAULT_MARK if fault[r] else HIT_MARK
        entries.append((r, node, mark))
    return entries


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
    rows: list[list[str]] = []
    vnpu = compile_vnpu(problem)
    for jp in result.placement.jobs:
        if jp.name in vnpu.job_index:  # a vNPU job: its request instead of a policy
            vjob = vnpu.jobs[vnpu.job_index[jp.name]]
            label, tasks = vjob.label, vjob.tasks
        else:
            job = problem.jobs[problem.job_index[jp.name]]
            label, tasks = job.policy.value, job.tasks
        if jp.placed:
            lines = wrap_items(rank_map(_rank_entries(problem, jp)))
            running = tasks - len(jp.ranks)
            if running > 0:  # pod-level rescheduling: the running ranks stay where they are
                lines.append(f"(+{running} running rank{'s' if running != 1 else ''} "
                             "stay on their nodes)")
            rows.append([jp.name, label, str(tasks), "yes",
                         f"{jp.origin_hits}/{jp.origin_candidates}", lines[0]])
            rows += [["", "", "", "", "", line] for line in lines[1:]]
        else:
            rows.append([jp.name, label, str(tasks), "no",
                         f"0/{jp.origin_candidates}", jp.reason or ""])
    parts += ["", table(rows, ["job", "policy", "tasks", "placed", "hits",
                               "rank:node / reason"])]
    if any(jp.placed for jp in result.placement.jobs):
        parts.append(RANK_MAP_LEGEND)
    if result.notes:
        parts += ["", *(f"note: {n}" for n in result.notes)]
    parts += ["", COLUMNS_NOTE]
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
