"""Seeded generators of realistic Ascend NPU clusters, caches and pending jobs.

Every generator takes a :class:`GenParams` (family, scale, seed and the knobs below) and
returns a :class:`models.scenario.Scenario` that passes input validation.  All randomness
comes from one ``numpy.random.Generator`` seeded with ``SeedSequence([seed, family,
nodes, jobs])``, so a scenario is a pure function of its parameters (and of the greedy
engine's code, when the earlier placement is made by greedy; see below).

Families
--------
``a3``
    Atlas 900 A3 SuperPoD, policy ``chip2-node16-sp``: super pods of 48 nodes × 16 dies,
    ``super-pod-size`` 48, ``reserve-nodes`` 2.
``850``
    Atlas 850 SuperPoD, policy ``chip8-node8-sp``: 8 NPUs per node, super pods of 16 to
    128 nodes (one 5808 switch holds 16 servers; two switch layers give the 1K-NPU super
    pod), ``reserve-nodes`` 2.
``950``
    Atlas 950 SuperPoD, policy ``chip8-node8-ra64-sp``: racks of 8 nodes × 8 NPUs,
    super pods of up to 1,024 nodes (``super-pod-size`` set to the pod size, inside the
    valid range [1, 1024]), UB-memory domains of 16 consecutive racks.
``multilevel``
    16-NPU nodes under a 2–4 level ``resource-level-config`` tree: level1 = rack
    (8 nodes, ``reservedNode`` 1), level2 = switch (4 racks), level3 = spine (8 switches),
    level4 = zone (4 spines), labelled ``huawei.com/topotree.rackid`` / ``.switchid`` /
    ``.spineid`` / ``.zoneid``.
``ordinary``
    Atlas 800T A2 style ``chip8-node8`` nodes; ranks may share nodes.

How a scenario is made
----------------------
1. The clean cluster of the family at the requested scale (all nodes free and healthy).
2. The *earlier placement*: the returning jobs, at their original sizes, are placed on the
   clean cluster by the greedy engine (``solve(..., engine="greedy")``).  When greedy's
   answer is refused by the validator (``InvalidAnswer``), or leaves a job unplaced, a simple
   valid layout (first fit in topology order from a random starting domain) places it
   instead; every earlier placement is checked by :func:`models.check.check`.  Each rank's
   node is recorded in the affinity cache, as upstream's ``RecordAssignment`` does.
3. Other tenants occupy ``occupancy`` of the cluster (nodes for whole-node families, NPUs
   for ordinary nodes) on the nodes the returning jobs did not use, in runs of
   consecutive nodes (tenant jobs are gangs too), some nodes only partly.
4. The returning jobs are evicted (they are pending again; upstream keeps their cache
   entries on eviction) and events happen:

   * **eviction of a fraction of ranks** (``evict_fraction``): a preemptor took the nodes
     of a consecutive range of ranks and still runs there;
   * **other jobs take origin nodes** (``taken_fraction``): each origin node is taken
     (wholly or partly) by another tenant with this probability;
   * **scale-down / scale-up** (``scale_change``): the job comes back with a quarter fewer
     or more ranks, in whole blocks (cached ranks beyond the new size are ignored; new
     ranks have no entry);
   * **node faults with fault ranks** (``fault_prob``): one or a few ranks failed; they are
     listed in ``fault-ranks`` and their node turned unhealthy (50 %), sub-healthy (25 %)
     or stayed healthy (25 %: the pod failed, not the node);
   * **expired cache** (``expired``): the owner's entries are older than the TTL.

5. The health mix is drawn over all nodes (default 3 % sub-healthy, 1 % unhealthy).
6. Fresh jobs (no cache) complete the batch; jobs get priorities 0, 5 or 10.

Gang sizes (approximations of published traces)
------------------------------------------------
The traces we lean on report GPU counts per job, not NPU gangs, and we do not fit them;
we only reproduce their qualitative shape, as an approximation:

* Microsoft Philly (Jeon et al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for
  DNN Training Workloads", USENIX ATC'19; public subset of 117,325 jobs submitted
  Aug–Dec 2017): gang-scheduled DNN training jobs, most of which use a single GPU or a
  single server, with a minority of multi-server jobs.
* Alibaba PAI (Weng et al., "MLaaS in the Wild", USENIX NSDI'22; trace
  ``cluster-trace-gpu-v2020``, about 6,500 GPUs on about 1,800 machines, July–August
  2020): a mix of training and inference jobs whose GPU requests span orders of
  magnitude, most of them small.

So fresh jobs request ``2^k`` NPUs with ``P(k) ∝ 0.6^k`` (heavy tail: about four jobs in
five need at most 4 NPUs, yet sizes reach hundreds of nodes), at most an eighth of the
usable cluster.  Returning jobs — the large distributed training jobs the origin-node RFC
is about — get ``2^k`` nodes with ``k`` uniform (log-uniform sizes), at most half the
usable cluster for a single job and a quarter in a batch, and at most 2,048 nodes.  Jobs
below one node's NPUs become single-task jobs, as upstream allows.

Modules
-------
:mod:`~benchmarks.generators.params`
    :class:`GenParams`, the families' constants, :class:`GeneratedCase`.
:mod:`~benchmarks.generators.topology`
    The clean cluster of a family at a scale (step 1); :func:`cluster_nodes`.
:mod:`~benchmarks.generators.jobs`
    The jobs: sizes, a valid job per family, scale changes.
:mod:`~benchmarks.generators.layout`
    The simple valid layout used when greedy cannot place an earlier job (step 2).
:mod:`~benchmarks.generators.case`
    :func:`generate_case`: steps 2 to 6.

The names others use are re-exported here.
"""

from benchmarks.generators.case import case_name, generate, generate_case
from benchmarks.generators.jobs import heavy_tail_npus, log_uniform_nodes
from benchmarks.generators.params import (
    A3_POD_NODES,
    FAMILIES,
    FAMILY_OF,
    HEAVY_TAIL,
    MAX_JOB_NODES,
    ML_FANOUT,
    ML_LABELS,
    NOW,
    RACK_NODES,
    RESERVE_NODES,
    UB_RACKS,
    GeneratedCase,
    GenParams,
)
from benchmarks.generators.topology import cluster_nodes, default_depth, default_pod_nodes

__all__ = ["A3_POD_NODES", "FAMILIES", "FAMILY_OF", "HEAVY_TAIL", "MAX_JOB_NODES", "ML_FANOUT",
           "ML_LABELS", "NOW", "RACK_NODES", "RESERVE_NODES", "UB_RACKS", "GenParams",
           "GeneratedCase", "case_name", "cluster_nodes", "default_depth", "default_pod_nodes",
           "generate", "generate_case", "heavy_tail_npus", "log_uniform_nodes"]
