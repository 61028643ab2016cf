"""What ``simulate`` reports: per job, per session and for the whole run, with the table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from models.scenario import Scenario


@dataclass
class JobSessionResult:
    """One pending job of one session."""

    name: str
    ranks: list[int]  # the job's ranks placed in this session (real rank numbers)
    placed: bool
    nodes: list[str] = field(default_factory=list)
    hits: int = 0
    candidates: int = 0
    achievable: int = 0
    moved: int = 0
    new: int = 0
    fault_returns: int = 0
    pulls_avoided_gb: float = 0.0
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data with the report's key names."""
        data: dict[str, Any] = {"name": self.name, "ranks": span_text(self.ranks),
                                "placed": self.placed}
        if self.placed:
            data["nodes"] = {str(r): n for r, n in zip(self.ranks, self.nodes, strict=True)}
        data.update({"hits": self.hits, "candidates": self.candidates,
                     "achievable": self.achievable, "moved": self.moved, "new": self.new,
                     "fault-returns": self.fault_returns,
                     "pulls-avoided-gb": round(self.pulls_avoided_gb, 3)})
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass
class SessionReport:
    """The numbers of one session."""

    index: int
    name: str | None
    now: int
    elapsed: int  # seconds since the first session
    events: list[str]
    cache_start: str  # "cold" or "warm"
    cache_rebuilt: int
    cache_evicted: list[str]
    cache_entries: int
    cache_states: dict[str, int]
    engine: str
    status: str
    jobs: list[JobSessionResult]

    @property
    def placed(self) -> list[JobSessionResult]:
        """Jobs placed in this session."""
        return [j for j in self.jobs if j.placed]

    @property
    def pending(self) -> list[JobSessionResult]:
        """Jobs left pending."""
        return [j for j in self.jobs if not j.placed]

    def _sum(self, attr: str, placed_only: bool = False) -> int:
        return sum(getattr(j, attr) for j in self.jobs if j.placed or not placed_only)

    @property
    def hits(self) -> int:
        """Ranks placed back on their previous node."""
        return self._sum("hits")

    @property
    def candidates(self) -> int:
        """Non-fault ranks with a live previous node (all pending jobs)."""
        return self._sum("candidates")

    @property
    def placed_candidates(self) -> int:
        """Candidates of the placed jobs."""
        return self._sum("candidates", placed_only=True)

    @property
    def achievable(self) -> int:
        """Candidates whose previous node could take them at the session start."""
        return self._sum("achievable")

    @property
    def moved(self) -> int:
        """Placed ranks with a previous node that landed elsewhere."""
        return self._sum("moved")

    @property
    def new(self) -> int:
        """Placed ranks without a previous node."""
        return self._sum("new")

    @property
    def fault_returns(self) -> int:
        """Fault ranks placed back on their old node."""
        return self._sum("fault_returns")

    @property
    def pulls_avoided_gb(self) -> float:
        """Image gigabytes not pulled thanks to returning pods."""
        return float(sum(j.pulls_avoided_gb for j in self.jobs))

    @property
    def hit_rate(self) -> float | None:
        """``hits / placed_candidates`` or ``None`` when nothing had a previous node."""
        return self.hits / self.placed_candidates if self.placed_candidates else None

    def to_dict(self) -> dict[str, Any]:
        """Plain data with the report's key names."""
        rate = self.hit_rate
        return {
            "session": self.index,
            "name": self.name,
            "now": self.now,
            "elapsed-seconds": self.elapsed,
            "events": list(self.events),
            "engine": self.engine,
            "status": self.status,
            "placed-jobs": len(self.placed),
            "pending-jobs": len(self.pending),
            "hits": self.hits,
            "placed-candidates": self.placed_candidates,
            "achievable": self.achievable,
            "candidates": self.candidates,
            "hit-rate": None if rate is None else round(rate, 6),
            "pulls-avoided": self.hits,
            "pulls-avoided-gb": round(self.pulls_avoided_gb, 3),
            "moved": self.moved,
            "new": self.new,
            "fault-returns": self.fault_returns,
            "pending": [{"name": j.name, "reason": j.reason} for j in self.pending],
            "cache": {"start": self.cache_start, "rebuilt": self.cache_rebuilt,
                      "evicted-owners": list(self.cache_evicted),
                      "entries": self.cache_entries, "states": dict(self.cache_states)},
            "jobs": [j.to_dict() for j in self.jobs],
        }


@dataclass
class SimulationReport:
    """Every session of a simulation and the state after the last one."""

    scenario_source: str
    events_source: str
    engine: str
    sessions: list[SessionReport]
    final_state: Scenario

    @property
    def hits(self) -> int:
        """Hits over all sessions."""
        return sum(s.hits for s in self.sessions)

    @property
    def placed_candidates(self) -> int:
        """Placed candidates over all sessions."""
        return sum(s.placed_candidates for s in self.sessions)

    @property
    def hit_rate(self) -> float | None:
        """Overall ``hits / placed_candidates``."""
        return self.hits / self.placed_candidates if self.placed_candidates else None

    def totals(self) -> dict[str, Any]:
        """Sums over all sessions."""
        rate = self.hit_rate
        return {
            "sessions": len(self.sessions),
            "hits": self.hits,
            "placed-candidates": self.placed_candidates,
            "achievable": sum(s.achievable for s in self.sessions),
            "candidates": sum(s.candidates for s in self.sessions),
            "hit-rate": None if rate is None else round(rate, 6),
            "pulls-avoided": self.hits,
            "pulls-avoided-gb": round(sum(s.pulls_avoided_gb for s in self.sessions), 3),
            "moved": sum(s.moved for s in self.sessions),
            "new": sum(s.new for s in self.sessions),
            "fault-returns": sum(s.fault_returns for s in self.sessions),
            "pending-after-last": len(self.sessions[-1].pending) if self.sessions else 0,
        }

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--format json|yaml``."""
        return {
            "scenario": self.scenario_source,
            "events": self.events_source,
            "engine": self.engine,
            "sessions": [s.to_dict() for s in self.sessions],
            "totals": self.totals(),
        }

    def render_table(self) -> str:
        """A readable report: one row per session, totals, then each session's details."""
        header = ["#", "session", "+time", "placed", "pending", "hits", "placed-cand",
                  "achievable", "cand", "hit-rate", "moved", "new", "avoided-GB"]
        rows = []
        for s in self.sessions:
            rows.append([str(s.index), s.name or "", duration_text(s.elapsed), str(len(s.placed)),
                         str(len(s.pending)), str(s.hits), str(s.placed_candidates),
                         str(s.achievable), str(s.candidates), rate_text(s.hit_rate),
                         str(s.moved), str(s.new), f"{s.pulls_avoided_gb:g}"])
        t = self.totals()
        rows.append(["", "total", "", "", "", str(t["hits"]), str(t["placed-candidates"]),
                     str(t["achievable"]), str(t["candidates"]), rate_text(self.hit_rate),
                     str(t["moved"]), str(t["new"]), f"{t['pulls-avoided-gb']:g}"])
        lines = [f"simulate: {self.scenario_source} + {self.events_source} "
                 f"(engine {self.engine})", "", _table(rows, header), ""]
        for s in self.sessions:
            lines.append(f"{s.index}. {s.name or 'session'}  [{s.engine}, {s.status}; cache "
                         f"{s.cache_start}"
                         + (f", rebuilt {s.cache_rebuilt} entries" if s.cache_rebuilt else "")
                         + (f", TTL evicted {', '.join(s.cache_evicted)}"
                            if s.cache_evicted else "")
                         + f"; {s.cache_entries} entries after]")
            for text in s.events:
                lines.append(f"   event: {text}")
            for job in s.jobs:
                if job.placed:
                    lines.append(
                        f"   placed {job.name}[{span_text(job.ranks)}]: {job.hits}/{job.candidates}"
                        f" back, {job.moved} moved, {job.new} new -> "
                        f"{_compress(job.nodes)}")
                else:
                    lines.append(f"   pending {job.name}[{span_text(job.ranks)}]: {job.reason}")
        return "\n".join(lines) + "\n"


def rate_text(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.1f} %"


def duration_text(seconds: int) -> str:
    if seconds % 86400 == 0 and seconds:
        return f"+{seconds // 86400}d"
    if seconds % 3600 == 0 and seconds:
        return f"+{seconds // 3600}h"
    if seconds % 60 == 0 and seconds:
        return f"+{seconds // 60}m"
    return f"+{seconds}s"


def span_text(ranks: Sequence[int]) -> str:
    """``0..5`` for a contiguous run, else the list."""
    if not ranks:
        return ""
    if list(ranks) == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}..{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])
    return ",".join(str(r) for r in ranks)


def _compress(nodes: list[str], limit: int = 8) -> str:
    if len(nodes) <= limit:
        return ", ".join(nodes)
    return ", ".join(nodes[:limit]) + f", ... (+{len(nodes) - limit})"


def _table(rows: list[list[str]], header: list[str]) -> str:
    data = [header, *rows]
    widths = [max(len(r[i]) for r in data) for i in range(len(header))]
    lines = []
    for k, row in enumerate(data):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
