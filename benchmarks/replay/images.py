"""Per-node container image stores with the kubelet's image garbage collection, and pulls.

A rank that lands on a node whose store does not hold its job's image is a *pull*: the
image is fetched (``size / bandwidth`` minutes on that node) and kept.  Two ranks of one
job on one node pull once (the kubelet pulls an image once per node).  Images stay until
the garbage collector removes them; an image is never removed while a pod on the node uses
it.

Garbage collection follows the kubelet's image GC (``KubeletConfiguration``; kubelet
``images/image_gc_manager.go``):

* when the image disk is at least ``imageGCHighThresholdPercent`` full (default **85**),
  unused images are deleted until usage is at most ``imageGCLowThresholdPercent``
  (default **80**);
* least recently used first (then the earliest detected; then by name, so that a run is
  reproducible);
* an image detected less than ``imageMinimumGCAge`` ago (default **2 minutes**) is kept;
* the kubelet checks every 5 minutes (``ImageGCPeriod``); the replay checks after every
  session, which is at least that often for sessions of 5 minutes or more.

Pull times use a bandwidth per node.  The RFC (seed 000 §1) pairs images of 15-40 GB with
first pulls of 5-20 minutes; the default :data:`DEFAULT_PULL_GB_PER_MINUTE` (2 GB/min,
about 270 Mbit/s) puts a 20 GB image at 10 minutes and a 40 GB one at 20, inside that
range.  The image disk size has no public default: :data:`DEFAULT_IMAGE_DISK_GB` is an
assumption of this model, set per workload.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

#: kubelet ``imageGCHighThresholdPercent`` default.
DEFAULT_GC_HIGH_PERCENT = 85
#: kubelet ``imageGCLowThresholdPercent`` default.
DEFAULT_GC_LOW_PERCENT = 80
#: kubelet ``imageMinimumGCAge`` default (2 minutes), in seconds.
DEFAULT_GC_MIN_AGE_SECONDS = 120
#: Pull bandwidth per node (GB per minute): the RFC's 15-40 GB in 5-20 minutes.
DEFAULT_PULL_GB_PER_MINUTE = 2.0
#: Image disk per node (GB).  An assumption (no public default), set per workload.
DEFAULT_IMAGE_DISK_GB = 300.0


@dataclass(frozen=True)
class GcPolicy:
    """The kubelet's image GC settings.

    Attributes
    ----------
    high_percent, low_percent
        GC starts at ``high_percent`` disk usage and frees down to ``low_percent``.
    min_age_seconds
        Images detected more recently than this are never collected.
    """

    high_percent: float = DEFAULT_GC_HIGH_PERCENT
    low_percent: float = DEFAULT_GC_LOW_PERCENT
    min_age_seconds: int = DEFAULT_GC_MIN_AGE_SECONDS

    def __post_init__(self) -> None:
        if not 0 <= self.low_percent < self.high_percent <= 100:
            raise ValueError(f"GC thresholds need 0 <= low < high <= 100, got low "
                             f"{self.low_percent}, high {self.high_percent}")
        if self.min_age_seconds < 0:
            raise ValueError(f"min-age must not be negative, got {self.min_age_seconds}")


@dataclass
class StoredImage:
    """One image on one node."""

    name: str
    size_gb: float
    first_detected: int  # unix seconds
    last_used: int  # unix seconds


@dataclass
class ImageStore:
    """The images of one node.

    Parameters
    ----------
    capacity_gb
        Size of the image disk.
    other_used_gb
        Space on that disk used by anything but images (counted in the thresholds).
    """

    capacity_gb: float
    other_used_gb: float = 0.0
    images: dict[str, StoredImage] = field(default_factory=dict)

    @property
    def used_gb(self) -> float:
        """Space used: images plus ``other_used_gb``."""
        return self.other_used_gb + sum(image.size_gb for image in self.images.values())

    def has(self, name: str) -> bool:
        """Whether the image is on the node."""
        return name in self.images

    def use(self, name: str, size_gb: float, now: int) -> bool:
        """A pod using ``name`` starts at ``now``.  Returns True when the image is pulled."""
        image = self.images.get(name)
        if image is not None:
            image.last_used = max(image.last_used, now)
            return False
        self.images[name] = StoredImage(name, size_gb, now, now)
        return True

    def collect(self, now: int, in_use: Iterable[str], policy: GcPolicy) -> list[str]:
        """Run image GC at ``now``; images in ``in_use`` are kept (and marked used now).

        Returns
        -------
        list of str
            The deleted images, in deletion order.
        """
        used = set(in_use)
        for name in used:
            image = self.images.get(name)
            if image is not None:
                image.last_used = max(image.last_used, now)
        if self.capacity_gb <= 0:
            return []
        if 100.0 * self.used_gb / self.capacity_gb < policy.high_percent:
            return []
        to_free = self.used_gb - policy.low_percent / 100.0 * self.capacity_gb
        victims = sorted(
            (image for image in self.images.values()
             if image.name not in used and now - image.first_detected >= policy.min_age_seconds),
            key=lambda image: (image.last_used, image.first_detected, image.name))
        deleted: list[str] = []
        for image in victims:
            if to_free <= 1e-9:
                break
            del self.images[image.name]
            to_free -= image.size_gb
            deleted.append(image.name)
        return deleted


@dataclass
class PullLedger:
    """Pulls counted in the operator's units.

    Parameters
    ----------
    gb_per_minute
        Pull bandwidth of one node.
    """

    gb_per_minute: float = DEFAULT_PULL_GB_PER_MINUTE
    pulls: int = 0
    gb: float = 0.0

    @property
    def minutes(self) -> float:
        """Node-minutes spent pulling."""
        return self.gb / self.gb_per_minute if self.gb_per_minute > 0 else 0.0

    def record(self, size_gb: float) -> None:
        """Count one pull of ``size_gb``."""
        self.pulls += 1
        self.gb += size_gb


@dataclass
class ClusterImages:
    """Every node's image store, the GC policy and the pulls counted so far."""

    stores: dict[str, ImageStore]
    policy: GcPolicy = field(default_factory=GcPolicy)
    ledger: PullLedger = field(default_factory=PullLedger)
    deleted: int = 0  # images removed by GC so far

    @classmethod
    def empty(cls, nodes: Iterable[str], capacity_gb: float = DEFAULT_IMAGE_DISK_GB,
              policy: GcPolicy | None = None,
              gb_per_minute: float = DEFAULT_PULL_GB_PER_MINUTE) -> ClusterImages:
        """Empty stores of ``capacity_gb`` on every node."""
        return cls({name: ImageStore(capacity_gb) for name in nodes}, policy or GcPolicy(),
                   PullLedger(gb_per_minute))

    def place(self, node: str, image: str, size_gb: float, now: int) -> bool:
        """A pod with ``image`` starts on ``node``; counts and returns whether it pulled."""
        pulled = self.stores[node].use(image, size_gb, now)
        if pulled:
            self.ledger.record(size_gb)
        return pulled

    def held(self) -> dict[str, dict[str, float]]:
        """Every node's images, name -> GB (a scenario's ``nodes[].images``)."""
        return {name: {image.name: image.size_gb for image in store.images.values()}
                for name, store in self.stores.items()}

    def collect(self, now: int, in_use: dict[str, set[str]]) -> int:
        """GC on every node (``in_use``: node -> images of its pods).  Returns deletions."""
        count = 0
        for name, store in self.stores.items():
            count += len(store.collect(now, in_use.get(name, ()), self.policy))
        self.deleted += count
        return count
