"""What the serving process keeps of each stored cluster: its replay log and versions.

A stored cluster lives in one *home* worker process (:mod:`solver.service.pool`).  The
serving process keeps, per cluster, the last full scenario body and the deltas applied
since (compacted every :data:`COMPACT_EVERY` deltas, more for a large cluster:
:data:`COMPACT_EVERY_PER_BYTE`), so that a restarted worker is given back exactly the
cluster it lost (:meth:`ClusterLog.replay`), and the last version of every deleted name,
so that a name's versions never go backwards.

Every change is recorded when the home worker's answer arrives, in the worker's order;
the pool calls :meth:`ClusterLog.put`, :meth:`ClusterLog.patched`,
:meth:`ClusterLog.deleted` and, when a record asks for it
(:meth:`ClusterLog.needs_compaction`), exports the worker's scenario and hands it to
:meth:`ClusterRecord.compacted`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from solver.service.messages import (
    DeleteAnswer,
    ExportAnswer,
    PatchAnswer,
    PatchCluster,
    PutCluster,
    Request,
)

#: Deltas kept per cluster before the log is compacted into one scenario body.
COMPACT_EVERY = 64
#: Bytes of (compact) deltas kept per cluster before the log is compacted, whatever their
#: number.  The log holds each applied delta in compact JSON (only the fields set, no
#: whitespace), never the request body.
COMPACT_BYTES = 8 * 1024 * 1024
#: A PUT body above this size that is mostly whitespace (:func:`mostly_whitespace`) is
#: kept only until the worker has answered its compact scenario.  A body that is compact
#: already is kept as it is: exporting a 65,536-node scenario holds the worker 0.45-0.75 s
#: (0.3-0.5 s of CPU, 7-17 MB of JSON), during which a plan of that worker waits or is
#: refused.
COMPACT_PUT_BYTES = 1024 * 1024
#: Per byte of a cluster's replay base, deltas kept before the log is compacted (at least
#: :data:`COMPACT_EVERY`): compacting exports the whole scenario, which costs in
#: proportion to its size (0.45-0.75 s at 65,536 nodes), while replaying a delta costs
#: milliseconds; a 10 MB base is compacted every 640 deltas instead of every 64.
COMPACT_EVERY_PER_BYTE = 1 / 16384
#: Deleted clusters whose last version is remembered (a re-created name continues it).
RETIRED_VERSIONS_KEPT = 4096


def mostly_whitespace(body: bytes, sample: int = 1 << 20) -> bool:
    """Whether a quarter or more of ``body``'s first ``sample`` bytes are whitespace
    (an indented or padded body, worth replacing by the worker's compact export)."""
    head = body[:sample]
    blanks = (head.count(b" ") + head.count(b"\n") + head.count(b"\t")
              + head.count(b"\r"))
    return 4 * blanks >= len(head)


@dataclass
class ClusterRecord:
    """What the serving process keeps of a stored cluster (to answer GET and to replay).

    ``base`` is the last full scenario (the PUT body, or the compacted scenario with its
    cache states in ``base_states``); ``deltas`` the deltas applied since, each in compact
    form with the time its cache events were stamped with, ``log_bytes`` their size.
    ``info`` is the worker's last summary (``ClusterInfo`` as JSON data).
    """

    name: str
    home: int
    base: bytes
    base_version: int
    deltas: list[tuple[bytes, int | None]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    compacting: bool = False
    base_states: bytes | None = None
    log_bytes: int = 0

    @property
    def version(self) -> int:
        """The cluster's version as its worker last answered it."""
        return int(self.info["version"])

    def compacted(self, reply: ExportAnswer) -> None:
        """The worker's export replaces the base and the log.

        A worker answers in order: every delta logged before the export's answer was
        applied before the export, so the export holds them all.
        """
        self.base = reply.scenario
        self.base_states = reply.states
        self.base_version = int(reply.version)
        self.deltas = []
        self.log_bytes = 0
        self.compacting = False

    def replay(self) -> list[Request]:
        """The requests that rebuild this cluster in a fresh worker: the base, then every
        logged delta with its stamp."""
        return [PutCluster(self.name, self.base, self.base_version, self.base_states),
                *(PatchCluster(self.name, delta, stamp) for delta, stamp in self.deltas)]


class ClusterLog(Mapping[str, ClusterRecord]):
    """The stored clusters by name (a read-only mapping to their records) and the last
    versions of deleted names."""

    def __init__(self) -> None:
        self._records: dict[str, ClusterRecord] = {}
        #: last versions of deleted clusters, so a name's versions never go backwards
        self.retired: OrderedDict[str, int] = OrderedDict()

    def __getitem__(self, name: str) -> ClusterRecord:
        return self._records[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)

    def held_by(self, home: int) -> list[ClusterRecord]:
        """The records of the clusters worker ``home`` holds."""
        return [record for record in self._records.values() if record.home == home]

    def next_version(self, name: str) -> int:
        """The version a full body for ``name`` gets: one past the stored cluster's (or the
        deleted one's), 1 for a name never seen.  A daemon using ``expect-version`` can so
        never accept a delta meant for a cluster that was replaced."""
        record = self._records.get(name)
        if record is not None:
            return record.version + 1
        return self.retired.get(name, 0) + 1

    def put(self, name: str, home: int, body: bytes, info: dict[str, Any]) -> ClusterRecord:
        """Record a stored (or replaced) cluster: ``body`` is its replay base."""
        record = ClusterRecord(name, home, body, int(info["version"]), [], info)
        self._records[name] = record
        return record

    def deleted(self, name: str, reply: DeleteAnswer) -> None:
        """Forget a deleted cluster (the worker no longer holds the name, whatever it
        held) and remember its last version."""
        record = self._records.pop(name, None)
        versions = [int(v) for v in (reply.version,
                                     record.info.get("version") if record else None)
                    if v is not None]
        if versions:
            self._retire_version(name, max(versions))

    def patched(self, name: str, reply: PatchAnswer) -> ClusterRecord | None:
        """Record an applied delta (compact, with its stamp); the cluster's record, or
        ``None`` when the name is no longer stored."""
        record = self._records.get(name)
        if record is None:
            return None
        info = reply.info
        if info.get("version") != record.info.get("version"):
            record.deltas.append((reply.log, reply.stamp))
            record.log_bytes += len(reply.log)
        record.info = info
        return record

    @staticmethod
    def compact_at_put(body: bytes) -> bool:
        """Whether a PUT body is replaced by the worker's compact scenario at once (above
        :data:`COMPACT_PUT_BYTES` and mostly whitespace)."""
        return len(body) > COMPACT_PUT_BYTES and mostly_whitespace(body)

    @staticmethod
    def needs_compaction(record: ClusterRecord) -> bool:
        """Whether a record's log holds enough deltas (:data:`COMPACT_EVERY`, more for a
        large base) or bytes (:data:`COMPACT_BYTES`) to be compacted."""
        every = max(COMPACT_EVERY, int(len(record.base) * COMPACT_EVERY_PER_BYTE))
        return len(record.deltas) >= every or record.log_bytes >= COMPACT_BYTES

    def _retire_version(self, name: str, version: int) -> None:
        """Remember a deleted cluster's last version (the newest
        :data:`RETIRED_VERSIONS_KEPT` names)."""
        self.retired[name] = max(version, self.retired.get(name, 0))
        self.retired.move_to_end(name)
        while len(self.retired) > RETIRED_VERSIONS_KEPT:
            self.retired.popitem(last=False)
