"""The one cell-by-cell regression comparison (``sweep --baseline``, ``compare --suite``).

:func:`compare_rows` lists every regression of a run's rows against a baseline's,
:func:`baseline_coverage` counts the cells it actually compared, and
:func:`regression_text` writes the table and the verdict.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.common import markdown_table
from benchmarks.sweep.rows import NO_RESULT, int_column, row_failed


@dataclass
class Finding:
    """One line of a regression comparison: a failure or an informational note."""

    cell: str
    engine: str
    text: str
    failure: bool


def compare_rows(old_rows: Sequence[dict[str, str]], new_rows: Sequence[dict[str, str]]
                 ) -> list[Finding]:
    """Every regression of ``new_rows`` against ``old_rows``, cell by cell.

    Failures: an invalid or failed cell; fewer placed jobs, a lower objective, or fewer
    origin hits without more placed jobs than the baseline's cell (matched by ``cell``);
    a cell the baseline ran that cannot run any more; CP-SAT below greedy on the same
    scenario, overrides, limit and seed.  A changed scenario (``scenario-sha256``) or a
    cell missing from either side is a note.
    """
    old = {r["cell"]: r for r in old_rows if r.get("cell")}
    found: list[Finding] = []
    groups: dict[str, dict[str, dict[str, str]]] = defaultdict(dict)
    for row in new_rows:
        cell, engine = row.get("cell", ""), row.get("engine", "")
        if row_failed(row):
            found.append(Finding(cell, engine, f"invalid or failed run: status "
                                 f"{row.get('status')}; {row.get('error') or row.get('note')}",
                                 True))
            continue
        base = old.get(cell)
        if row.get("status") == "skipped":
            ran_before = base is not None and base.get("status") not in NO_RESULT
            found.append(Finding(cell, engine, f"cannot run: {row.get('note', '')}", ran_before))
            continue
        group = row["cell"].replace(f" | {engine} | ", " | * | ", 1)
        groups[group][engine] = row
        if base is None:
            found.append(Finding(cell, engine, "not in the baseline", False))
            continue
        if base.get("status") in NO_RESULT:
            continue
        if (base.get("scenario-sha256") and row.get("scenario-sha256")
                and base["scenario-sha256"] != row["scenario-sha256"]):
            found.append(Finding(cell, engine, "the scenario changed since the baseline; "
                                 "not compared", False))
            continue
        now_p, old_p = int_column(row, "placed-jobs"), int_column(base, "placed-jobs")
        now_h, old_h = int_column(row, "origin-hits"), int_column(base, "origin-hits")
        now_o, old_o = int_column(row, "objective"), int_column(base, "objective")
        worse = []
        if now_p is not None and old_p is not None and now_p < old_p:
            worse.append(f"placed jobs {now_p} < {old_p}")
        if (now_h is not None and old_h is not None and now_h < old_h
                and (now_p or 0) <= (old_p or 0)):
            worse.append(f"origin hits {now_h} < {old_h}")
        if now_o is not None and old_o is not None and now_o < old_o:
            worse.append(f"objective {now_o} < {old_o}")
        if worse:
            found.append(Finding(cell, engine, "below the baseline: " + ", ".join(worse), True))
        elif now_o is not None and old_o is not None and now_o > old_o:
            found.append(Finding(cell, engine, f"better than the baseline (objective {now_o} "
                                 f"> {old_o})", False))
    seen = {r.get("cell") for r in new_rows}
    missing = [cell for cell in old if cell not in seen]
    if missing:
        found.append(Finding(missing[0], "-", f"{len(missing)} cell(s) of the baseline are not "
                             "in this run (first shown)", False))
    for runs in groups.values():
        g, c = runs.get("greedy"), runs.get("cpsat")
        if g is None or c is None:
            continue
        go, co = int_column(g, "objective"), int_column(c, "objective")
        if go is not None and co is not None and co < go:
            found.append(Finding(c["cell"], "cpsat", f"CP-SAT loses to greedy: objective "
                                 f"{co} < {go}", True))
    return found


@dataclass(frozen=True)
class Coverage:
    """How many cells of a run a baseline comparison actually compared.

    Attributes
    ----------
    compared
        Cells of this run whose baseline cell (same ``cell`` name) produced a result on
        the same scenario content: the cells whose numbers were compared.
    cells
        Cells of this run.
    baseline_only
        Cells of the baseline this run does not have.
    first_unmatched, first_baseline_only
        The first cell name of this run missing from the baseline, and the first baseline
        cell missing from this run ("" when none): they show why keys do not match.
    """

    compared: int
    cells: int
    baseline_only: int
    first_unmatched: str = ""
    first_baseline_only: str = ""

    @property
    def complete(self) -> bool:
        """Every cell of both runs was compared (and there was at least one)."""
        return self.cells > 0 and self.compared == self.cells and self.baseline_only == 0

    def text(self) -> str:
        """``compared N of M cell(s) ...`` with the reason when not complete."""
        line = f"compared {self.compared} of {self.cells} cell(s) with the baseline"
        if self.baseline_only:
            line += f"; {self.baseline_only} baseline cell(s) are not in this run"
        if self.first_unmatched:
            line += f"; first cell not in the baseline: '{self.first_unmatched}'"
        if self.first_baseline_only:
            line += f"; first baseline cell not in this run: '{self.first_baseline_only}'"
        return line


def baseline_coverage(old_rows: Sequence[dict[str, str]],
                      new_rows: Sequence[dict[str, str]]) -> Coverage:
    """Count the cells of ``new_rows`` that :func:`compare_rows` compared with ``old_rows``.

    A cell is compared when the baseline has a cell of the same name that produced a
    result (its status is not one of :data:`NO_RESULT`) on the same scenario content
    (``scenario-sha256``, when both rows carry it).  Cells are matched by name, which
    holds the scenario, the override values, the engine, the time limit, the seed and
    the deterministic time: a baseline swept with another time limit matches nothing.
    """
    old = {r["cell"]: r for r in old_rows if r.get("cell")}
    seen = {r.get("cell", "") for r in new_rows}
    compared = 0
    first_unmatched = ""
    for row in new_rows:
        base = old.get(row.get("cell", ""))
        if base is None:
            first_unmatched = first_unmatched or row.get("cell", "")
            continue
        if base.get("status") in NO_RESULT:
            continue
        if (base.get("scenario-sha256") and row.get("scenario-sha256")
                and base["scenario-sha256"] != row["scenario-sha256"]):
            continue
        compared += 1
    baseline_only = [cell for cell in old if cell not in seen]
    return Coverage(compared, len(new_rows), len(baseline_only), first_unmatched,
                    baseline_only[0] if baseline_only else "")


def regression_text(title: str, new_rows: Sequence[dict[str, str]],
                    old_rows: Sequence[dict[str, str]], findings: Sequence[Finding],
                    full_table: bool = True, coverage: Coverage | None = None,
                    notes_in: str | None = None) -> str:
    """The comparison's text: a table (every cell, or only the regressions), then verdict.

    Parameters
    ----------
    title, new_rows, old_rows, findings
        What was compared and what the comparison found.
    full_table
        Every cell in the table and every note; else only the regressions.
    coverage
        When given, the verdict says how many cells were compared and fails unless
        :attr:`Coverage.complete`.
    notes_in
        Where the notes left out (``full_table`` false) are written, named in the text.
    """

    old = {r["cell"]: r for r in old_rows if r.get("cell")}
    failing = {(f.cell, f.engine) for f in findings if f.failure}
    table = []
    for row in new_rows:
        key = (row.get("cell", ""), row.get("engine", ""))
        if not full_table and key not in failing:
            continue
        base = old.get(row.get("cell", ""), {})
        table.append([row.get("scenario", ""), row.get("engine", ""), row.get("status", ""),
                      f"{row.get('placed-jobs', '')} ({base.get('placed-jobs', '-')})",
                      f"{row.get('origin-hits', '')} ({base.get('origin-hits', '-')})",
                      f"{row.get('objective', '')} ({base.get('objective', '-')})",
                      _seconds_text(row.get("wall-seconds", ""))])
    text = [title, ""]
    if table:
        text += [markdown_table(("scenario", "engine", "status", "placed (baseline)",
                                 "hits (baseline)", "objective (baseline)", "wall s"), table),
                 ""]
    for f in findings:
        if f.failure or full_table:
            text.append(f"{'REGRESSION' if f.failure else 'note'}: {f.cell} [{f.engine}]: "
                        f"{f.text}")
    if not full_table:
        notes = sum(1 for f in findings if not f.failure)
        if notes:
            where = f"; they are in {notes_in}" if notes_in else ""
            text.append(f"({notes} note(s) not shown here: cells new, changed or better than "
                        f"the baseline{where})")
    if coverage is not None:
        text.append(coverage.text())
    text.append(regression_verdict(findings, coverage))
    return "\n".join(text) + "\n"


def _seconds_text(value: str) -> str:
    """Wall seconds as a person reads them (two decimals; the CSV keeps six)."""
    try:
        return f"{float(value):.2f}"
    except ValueError:
        return value


def regression_verdict(findings: Sequence[Finding], coverage: Coverage | None = None) -> str:
    """``OK: ...`` or ``FAILED: ...``: the last line of a comparison."""
    failures = sum(1 for f in findings if f.failure)
    if failures:
        return f"FAILED: {failures} regression(s)"
    if coverage is not None and not coverage.complete:
        if coverage.compared == 0:
            return ("FAILED: nothing was compared (no cell of this run matches a baseline "
                    "cell that ran: another grid, time limit, seed or deterministic time?)")
        return (f"FAILED: only {coverage.compared} of {coverage.cells} cell(s) were compared"
                + (f" and {coverage.baseline_only} baseline cell(s) were not run"
                   if coverage.baseline_only else "")
                + "; no regression among those")
    return "OK: no regression"


def regression_failed(findings: Sequence[Finding], coverage: Coverage | None = None) -> bool:
    """True when a finding is a failure or ``coverage`` is not complete."""
    return (any(f.failure for f in findings)
            or (coverage is not None and not coverage.complete))
