"""A recorded day: a series of ``kubectl`` dumps diffed into sessions (``--snapshots DIR``).

``DIR`` holds one subdirectory per snapshot, in time order by name (``t000``, ``t001``, ...;
numbers compare as numbers), each what ``npu-place import`` reads (``kubectl get ... -o
json`` of nodes, pods, PodGroups, PriorityClasses, the scheduler ConfigMap and the device
ConfigMaps).  A snapshot's time is the unix seconds (or RFC 3339 time) in its file
``now`` when there is one, else ``interval`` seconds after the previous snapshot.

The first snapshot is the starting cluster (its running jobs where they run, its pending
jobs, its cache: the import's cold-start cache).  Each next snapshot becomes one session
whose events are the differences from the one before:

In this order (jobs by name within each kind):

* a node whose health changed: ``node`` (a node turning unhealthy reschedules the jobs
  that run on it in each engine's day);
* a job gone: ``delete-job`` (its cache entries go with it);
* a job whose desired size changed: ``scale``;
* ranks that ran and are not running now (the job is still wanted): ``evict`` of those
  ranks, with ``fault: true`` and the import's fault ranks when it found failed pods or a
  reschedule record;
* a new job: ``submit`` (pending: each engine places it, whatever the real scheduler did).

What the real scheduler placed between two snapshots is not replayed: each engine places
the pending jobs itself, and its placements feed its own next sessions, as for a
generated day.  Images: each job's image is its first pod's first container image; its
size is the ``sizeBytes`` of that image in any node's ``status.images``, else the job's
``image-size-gb``.  The nodes' image stores start with the first snapshot's
``status.images``.  vNPU jobs (``huawei.com/npu-core``) are not followed: the starting
cluster keeps its vNPU nodes but no vNPU job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.replay.generate import DAY_START, Day, DaySettings, JobInfo
from benchmarks.replay.images import (
    DEFAULT_IMAGE_DISK_GB,
    DEFAULT_PULL_GB_PER_MINUTE,
    GcPolicy,
)
from models.documents import read_text
from models.errors import InputError
from models.kube import ClusterImport, Diagnostics
from models.kube.jobs import GROUP_ANNOTATION, parse_time
from models.kube.source import read_dumps
from models.limits import MAX_STAMP_FILE_BYTES, MAX_TIMESTAMP, escape_text
from models.numbers import is_ascii_digits, natural_key, parse_int
from models.scenario import Job, Scenario
from models.validation import running_spec
from solver.simulate.events import (
    AdvanceEvent,
    DeleteJobEvent,
    EvictEvent,
    NodeEvent,
    ScaleEvent,
    SessionSpec,
    SubmitEvent,
)

#: Default seconds between snapshots without a ``now`` file.
DEFAULT_INTERVAL_SECONDS = 300
#: Most snapshots one series may have.
MAX_SNAPSHOTS = 2000


@dataclass
class _Images:
    """Images seen in one snapshot's objects."""

    of_job: dict[str, str] = field(default_factory=dict)  # job name -> image
    size_gb: dict[str, float] = field(default_factory=dict)  # image name -> GB
    on_node: dict[str, list[tuple[list[str], float]]] = field(default_factory=dict)

    def collect(self, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            return
        if kind == "Pod":
            group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
            containers = (obj.get("spec") or {}).get("containers") or []
            if isinstance(group, str) and containers and isinstance(containers[0], dict):
                image = containers[0].get("image")
                job = f"{meta.get('namespace', 'default')}/{group}"
                if isinstance(image, str) and image and job not in self.of_job:
                    self.of_job[job] = image
        elif kind == "Node":
            held: list[tuple[list[str], float]] = []
            for entry in (obj.get("status") or {}).get("images") or []:
                if not isinstance(entry, dict):
                    continue
                names = [n for n in entry.get("names") or [] if isinstance(n, str)]
                size = entry.get("sizeBytes")
                if not names or not isinstance(size, int | float) or size <= 0:
                    continue
                gb = float(size) / 1e9
                held.append((names, gb))
                for name in names:
                    self.size_gb[name] = gb
            if held and isinstance(meta.get("name"), str):
                self.on_node[meta["name"]] = held


@dataclass
class Snapshot:
    """One imported snapshot."""

    label: str
    now: int
    scenario: Scenario
    images: _Images
    warnings: list[str]


def read_series(directory: str | Path, interval: int = DEFAULT_INTERVAL_SECONDS
                ) -> list[Snapshot]:
    """Import every snapshot of ``directory`` (the cache carried from one to the next).

    Raises
    ------
    InputError
        Naming ``--snapshots`` and the snapshot (and the object and field, from the
        import) when the series cannot be read.
    """
    root = Path(directory)
    if not root.is_dir():
        raise InputError([f"--snapshots {root}: not a directory"])
    subdirs = sorted((p for p in root.iterdir() if p.is_dir()),
                     key=lambda p: natural_key(p.name))
    if len(subdirs) < 2:
        raise InputError([f"--snapshots {root}: needs at least two snapshot subdirectories "
                          f"(one kubectl dump each), found {len(subdirs)}"])
    if len(subdirs) > MAX_SNAPSHOTS:
        raise InputError([f"--snapshots {root}: {len(subdirs)} snapshots; the limit is "
                          f"{MAX_SNAPSHOTS}"])
    series: list[Snapshot] = []
    previous: Scenario | None = None
    now = DAY_START
    for k, sub in enumerate(subdirs):
        stamp = sub / "now"
        if stamp.exists() or stamp.is_symlink():  # a pipe or device too: bounded reader
            try:
                text = read_text(stamp, MAX_STAMP_FILE_BYTES).strip()
            except InputError as exc:
                raise InputError([f"--snapshots {m}" for m in exc.messages]) from None
            value = parse_int(text, max_digits=12)
            if value is None and not is_ascii_digits(text):
                value = parse_time(text)
            if value is None or not 0 <= value <= MAX_TIMESTAMP:
                raise InputError([f"--snapshots {sub}: file 'now': expected unix seconds "
                                  f"(ASCII digits, 0..{MAX_TIMESTAMP}) or an RFC 3339 time, "
                                  f"got '{escape_text(text, 40)}'"])
            if series and value < series[-1].now:
                raise InputError([f"--snapshots {sub}: file 'now': {value} is before the "
                                  f"previous snapshot ({series[-1].now})"])
            now = value
        elif k:
            now += interval
        importer = ClusterImport(Diagnostics())
        images = _Images()

        def sink(obj: dict[str, Any], source: str, importer: ClusterImport = importer,
                 images: _Images = images) -> None:
            images.collect(obj)
            importer.add(obj, source)

        try:
            read_dumps([str(sub)], sink, importer.diag)
            result = importer.build(now=now, previous=previous)
        except InputError as exc:
            raise InputError([f"--snapshots {sub.name}: {m}" for m in exc.messages]) from None
        series.append(Snapshot(sub.name, now, result.scenario, images, result.warnings))
        previous = result.scenario
    return series


def _wanted(scenario: Scenario) -> dict[str, tuple[Job, int, dict[int, str], list[int]]]:
    """Job name -> (spec, desired size, running ranks, fault ranks)."""
    out: dict[str, tuple[Job, int, dict[int, str], list[int]]] = {}
    for job in scenario.jobs:
        # a partly running job (the import's running-ranks) runs those ranks
        spec = job.model_copy(update={"running_ranks": {}, "pending_sessions": 0}) \
            if job.running_ranks else job
        out[job.name] = (spec, job.tasks, dict(job.running_ranks), list(job.fault_ranks))
    for running in scenario.running:
        spec, desired = running_spec(running)
        out[running.name] = (spec, desired, dict(running.ranks), [])
    return out


def _submit(spec: Job, tasks: int) -> SubmitEvent:
    data = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    data.update({"tasks": max(1, tasks), "fault-ranks": []})
    return SubmitEvent.model_validate({"submit": data})


def diff_sessions(series: list[Snapshot]) -> list[SessionSpec]:
    """The sessions of a series: the first places its pending jobs, the others its diffs."""
    sessions = [SessionSpec(1, series[0].label, ())]
    for k in range(1, len(series)):
        before, after = series[k - 1], series[k]
        events: list[Any] = []
        if after.now > before.now:
            events.append(AdvanceEvent.model_validate({"advance": after.now - before.now}))
        health = {n.name: n.health for n in before.scenario.nodes}
        for node in after.scenario.nodes:
            if node.name in health and health[node.name] is not node.health:
                events.append(NodeEvent.model_validate({"node": node.name,
                                                        "health": node.health.value}))
        old, new = _wanted(before.scenario), _wanted(after.scenario)
        deletes = [DeleteJobEvent.model_validate({"delete-job": name})
                   for name in sorted(old) if name not in new]
        scales: list[Any] = []
        evicts: list[Any] = []
        submits: list[Any] = []
        for name in sorted(new):
            spec, desired, ranks, faults = new[name]
            if name not in old:
                submits.append(_submit(spec, desired))
                if desired == 0:
                    submits.append(ScaleEvent.model_validate({"scale": name, "tasks": 0}))
                continue
            _, was, ran, _ = old[name]
            if desired != was:
                scales.append(ScaleEvent.model_validate({"scale": name, "tasks": desired}))
            gone = sorted(r for r in ran if r not in ranks and r < desired)
            if not gone:
                continue
            fault = sorted(r for r in faults if r < desired)
            if fault:
                evicts.append(EvictEvent.model_validate({"evict": name, "ranks": fault,
                                                         "fault": True}))
            else:
                evicts.append(EvictEvent.model_validate({"evict": name, "ranks": gone}))
        events.extend(deletes + scales + evicts + submits)
        sessions.append(SessionSpec(k + 1, after.label, tuple(events)))
    return sessions


def series_day(directory: str | Path, *, interval: int = DEFAULT_INTERVAL_SECONDS,
               image_disk_gb: float = DEFAULT_IMAGE_DISK_GB,
               gc: GcPolicy | None = None,
               pull_gb_per_minute: float = DEFAULT_PULL_GB_PER_MINUTE) -> Day:
    """A :class:`~benchmarks.replay.generate.Day` from a snapshot series."""
    series = read_series(directory, interval)
    sessions = diff_sessions(series)
    sizes: dict[str, float] = {}
    images: dict[str, str] = {}
    for snap in series:
        sizes.update(snap.images.size_gb)
        for job, image in snap.images.of_job.items():
            images.setdefault(job, image)
    jobs: dict[str, JobInfo] = {}
    start = series[0].now
    for snap in series:
        for name, (spec, _, _, _) in _wanted(snap.scenario).items():
            if name in jobs:
                continue
            image = images.get(name, f"<image of {name}>")
            jobs[name] = JobInfo(name, "recorded", image, sizes.get(image, spec.image_size_gb),
                                 spec.priority, 0, snap.now)
    known = set(images.values())
    initial: dict[str, list[tuple[str, float]]] = {}
    for node, held in series[0].images.on_node.items():
        initial[node] = [(next((n for n in names if n in known), names[0]), gb)
                         for names, gb in held]
    root = Path(directory)
    nodes = len(series[0].scenario.nodes)
    settings = DaySettings(
        root.name or str(root), f"recorded series {root}: {len(series)} snapshots",
        f"{nodes} nodes as imported", image_disk_gb, gc or GcPolicy(), pull_gb_per_minute,
        False, f"one per snapshot ({(series[-1].now - start) / 3600:.2f} h)")
    # the diffs do not follow vNPU jobs: a recorded day carries none (its vNPU nodes stay,
    # serving nothing)
    first = series[0].scenario.model_copy(update={"vnpu_jobs": []})
    return Day(settings, 0, first, sessions, jobs,
               [snap.now - start for snap in series], initial)
