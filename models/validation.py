"""Input validation: every rule that relates several fields, reporting all errors at once.

The rules are upstream's ``ValidNPUJob`` checks (reference §1.7) plus the contract's list.
Messages name the file, the job or node, and the field; where upstream has a rejection
text, the message quotes it so that an operator recognises it.

The same module derives the per-job values every engine needs (``spBlock``, ``tpBlock``,
multilevel task levels, whole-node tasks) so that they are computed exactly once.

Why this file is long: it is one rule set.  :func:`validate_scenario`,
:func:`derive_shape`, the per-family checks (upstream's ``ValidNPUJob`` per policy) and
:func:`check_running` call one another (a running job is checked as a pending job of the
same spec; the node rules count the running jobs' chips), and each job's shape is derived
once, by the rules that reject it.  Moving the per-family checks or the running-job rules
out would make an import circle with :func:`derive_shape` or spread one upstream check
over two files.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

from models.errors import InputError as InputError  # re-exported: the callers' home of it
from models.limits import MAX_LEVELS, escape_text, listing
from models.numbers import parse_int
from models.scenario import (
    A3_SUPERPOD_POLICIES,
    POLICY_NODE_NPUS,
    Family,
    Job,
    Policy,
    RunningJob,
    Scenario,
    SuperPodAffinity,
    family_of,
)
from models.vnpu_rules import validate_vnpu

#: Allowed ``ra-block`` values (NPUs), upstream ``checkTpBlockNum``.
RA_BLOCK_VALUES = (1, 2, 4, 8, 16, 32, 64)
#: Upstream default ``ra-block``.
DEFAULT_RA_BLOCK = 8
#: Nodes per 950 rack (``rackNodeNum``).
RACK_NODES = 8
#: Racks per UB-memory domain (``uBMemRackNumber``).
UB_MEM_RACKS = 16
#: Largest total NPUs of a UB-memory job.
UB_MEM_MAX_NPUS = 1024

_LEVEL_KEY = re.compile(r"level([0-9]{1,9})")


@dataclass(frozen=True, slots=True)
class JobShape:
    """Values derived once from a validated job."""

    policy: Policy
    family: Family
    whole_node: bool  # every task takes one whole, completely free node
    node_npus: int  # NPUs per node the policy's handler assumes
    sp_block: int  # nodes per logical super pod (blocks); 0 when not a super-pod family
    tp_block: int  # nodes per rack window (950); 0 otherwise
    levels: tuple[int, ...]  # multilevel a1..aK (pods per group), empty otherwise
    soft: bool


def parse_affinity_config(text: str | None) -> tuple[tuple[int, ...] | None, list[str]]:
    """Parse ``huawei.com/affinity-config`` (``level1=a,level2=b``).

    Returns
    -------
    tuple
        ``(levels, errors)`` where ``levels`` is ``(a1, ..., aK)`` or ``None``.
    """
    if text is None or not text.strip():
        return None, ["affinity blocks is empty (huawei.com/affinity-config is missing)"]
    values: dict[int, int] = {}
    errors: list[str] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, raw = part.partition("=")
        match = _LEVEL_KEY.fullmatch(key.strip())
        if not sep or match is None:
            errors.append(f"cannot parse '{part}': expected levelN=<pods per group>")
            continue
        value = parse_int(raw.strip(), signed=True)
        if value is None:
            errors.append(f"{key.strip()} value '{escape_text(raw.strip(), 40)}' is not an "
                          "integer (ASCII digits, at most 20)")
            continue
        level = int(match.group(1))
        if level in values:
            errors.append(f"{key.strip()} is given twice")
        values[level] = value
    if errors:
        return None, errors
    if not values:
        return None, ["affinity blocks is empty"]
    if len(values) > MAX_LEVELS:
        return None, [f"affinity-config has {len(values)} levels; at most {MAX_LEVELS} are "
                      "accepted (the fragment score multiplies by 10 per level)"]
    for level in range(1, len(values) + 1):
        if level not in values:
            return None, [
                f"affinity block level{level} is not exist, please check if level numbers "
                "are continuous"
            ]
    levels = tuple(values[i] for i in range(1, len(values) + 1))
    for i, value in enumerate(levels, start=1):
        if value <= 0:
            errors.append(f"affinity block level{i}'s value {value} must be greater than 0")
    return (None, errors) if errors else (levels, [])


def sample(values: list[int] | list[str], limit: int = 10) -> str:
    """``0, 1, 2`` (names quoted: ``'a', 'b'``), or the first ``limit`` values and how
    many more; never a Python list."""
    if len(values) <= limit:
        return listing(values)
    return f"{listing(values[:limit])}, ... ({len(values) - limit} more)"


def _not_multiple_of_node(sp_npus: int, node_npus: int) -> str:
    """The sp-block rejection, in plain words and as upstream's (misspelt) text."""
    return (f"sp-block {sp_npus} is not a multiple of the node's {node_npus} NPUs (Volcano: "
            f"\"sp-block({sp_npus}) is not mutiple of node npu ({node_npus})\")")


def _is_power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def derive_shape(job: Job, scenario: Scenario) -> tuple[JobShape | None, list[tuple[str, str]]]:
    """Check one job against upstream's ``ValidNPUJob`` rules and derive its shape.

    Returns
    -------
    tuple
        ``(shape, errors)``; each error is ``(field, message)``.  ``shape`` is ``None``
        when any error was found.
    """
    errors: list[tuple[str, str]] = []
    try:
        policy = Policy(job.policy)
    except ValueError:
        known = ", ".join(p.value for p in Policy)
        return None, [("policy", f"unknown policy '{job.policy}'; known policies: {known}")]
    family = family_of(policy)
    config = scenario.config
    node_npus = POLICY_NODE_NPUS[policy]
    total = job.tasks * job.npu_per_task
    sp_block = 0
    tp_block = 0
    levels: tuple[int, ...] = ()
    whole_node = False
    soft = job.super_pod_affinity is SuperPodAffinity.SOFT

    missing = [rank for rank in job.fault_ranks if rank < 0 or rank >= job.tasks]
    if len(missing) == 1:
        errors.append(("fault-ranks",
                       f"fault rank {missing[0]} does not exist (ranks are 0..{job.tasks - 1})"))
    elif missing:  # one message for all of them: a list of 10^6 bad ranks is one mistake
        errors.append(("fault-ranks", f"{len(missing)} fault ranks do not exist (ranks are "
                                      f"0..{job.tasks - 1}): {sample(missing)}"))
    dup = [r for r, c in Counter(job.fault_ranks).items() if c > 1]
    if dup:
        errors.append(("fault-ranks", f"fault ranks {sample(sorted(dup))} are listed more than "
                                      "once"))

    errors.extend(_check_pod_level(job, family, policy))

    if family is not Family.RACK:
        if job.ra_block is not None:
            errors.append(("ra-block", "ra-block is only used by chip8-node8-ra64-sp jobs"))
        if job.ub_memory:
            errors.append(("ub-memory", "ub-memory is only used by chip8-node8-ra64-sp jobs"))
    if family is not Family.MULTILEVEL and job.affinity_config is not None:
        errors.append(("affinity-config", "affinity-config is only used by multilevel jobs"))

    if family is Family.SUPERPOD:
        sp_block, whole_node = _check_superpod(job, policy, node_npus, total, scenario, errors)
    elif family is Family.RACK:
        sp_block, tp_block, whole_node = _check_rack(job, node_npus, total, scenario, errors)
    elif family is Family.MULTILEVEL:
        whole_node = True
        if job.sp_block is not None:
            errors.append(("sp-block", "sp-block is not used by multilevel jobs"))
        parsed, level_errors = parse_affinity_config(job.affinity_config)
        errors.extend(("affinity-config", m) for m in level_errors)
        if parsed is not None:
            upper = job.tasks
            upper_name = f"job size {job.tasks}"
            for i in range(len(parsed), 0, -1):
                value = parsed[i - 1]
                if upper % value != 0:
                    errors.append(
                        (
                            "affinity-config",
                            f"affinity block level{i}'s value {value} can not be divided by "
                            f"upper level's value {upper} ({upper_name})",
                        )
                    )
                    break
                upper = value
                upper_name = f"level{i}"
            levels = parsed
        if not config.resource_level_config:
            errors.append(
                (
                    "policy",
                    "multilevel job but config.resource-level-config defines no tree "
                    "(topology label does not match config)",
                )
            )
    else:
        if job.sp_block is not None:
            errors.append(("sp-block", "sp-block is only used by super-pod policies"))
        _check_ordinary(job, policy, node_npus, total, errors)

    if errors:
        return None, errors
    return (
        JobShape(
            policy=policy,
            family=family,
            whole_node=whole_node,
            node_npus=node_npus,
            sp_block=sp_block,
            tp_block=tp_block,
            levels=levels,
            soft=soft,
        ),
        [],
    )


def _check_pod_level(job: Job, family: Family, policy: Policy) -> list[tuple[str, str]]:
    """Rules of ``running-ranks`` and of the inference fields.

    Node names and capacity are checked with the other jobs' chips in
    :func:`validate_scenario`; the layout of the running ranks (one super pod per block,
    one rack per window, ...) is the engines' to judge: a job whose running ranks break
    its own hard constraints cannot be placed, and says why.
    """
    errors: list[tuple[str, str]] = []
    running = job.running_ranks
    outside = sorted(r for r in running if r >= job.tasks)
    if outside:
        errors.append(("running-ranks", f"running ranks {sample(outside)} do not exist (ranks "
                                        f"are 0..{job.tasks - 1})"))
    both = sorted(set(running) & set(job.fault_ranks))
    if both:
        errors.append(("running-ranks",
                       f"ranks {sample(both)} are both running and fault ranks (a fault rank's "
                       "pod was deleted: it is pending, not running)"))
    if running and not outside and len(running) >= job.tasks:
        errors.append(("running-ranks", f"all {job.tasks} ranks are running: nothing to place "
                                        "(list the job under 'running')"))
    if job.inferserviceid is not None and family not in (Family.SUPERPOD, Family.RACK):
        errors.append(("inferserviceid", "inferserviceid is only used by super-pod and "
                                         "chip8-node8-ra64-sp jobs"))
    mindie = job.app is not None or job.job_id is not None or bool(job.pod_affinity)
    if mindie and policy not in A3_SUPERPOD_POLICIES:
        errors.append(("app", "app, jobID and pod-affinity (the MindIE path) are only used by "
                              "A3 super-pod jobs (chip2-node16-sp, chip2-node8-sp)"))
    if job.sp_fit is not None and (policy not in A3_SUPERPOD_POLICIES or job.app is None
                                   or job.job_id is None):
        errors.append(("sp-fit", "sp-fit is only read on the MindIE path: an A3 super-pod job "
                                 "(chip2-node16-sp, chip2-node8-sp) with app and jobID set"))
    return errors


def _check_superpod(
    job: Job,
    policy: Policy,
    node_npus: int,
    total: int,
    scenario: Scenario,
    errors: list[tuple[str, str]],
) -> tuple[int, bool]:
    size = scenario.config.effective_super_pod_size
    sp_npus = total if job.sp_block is None else job.sp_block
    is_a3 = policy in A3_SUPERPOD_POLICIES
    single = job.tasks == 1
    sp_block = 0
    if sp_npus <= 0:
        errors.append(("sp-block", f"sp-block({sp_npus}) is invalid"))
        return 0, not single
    if sp_npus < node_npus:
        if sp_npus != total:
            errors.append(
                ("sp-block", _not_multiple_of_node(sp_npus, node_npus))
            )
        sp_block = 1
    elif sp_npus % node_npus != 0:
        errors.append(("sp-block", _not_multiple_of_node(sp_npus, node_npus)))
    else:
        sp_block = sp_npus // node_npus
    shown = 16 if is_a3 else node_npus  # upstream's A3 text always says /16
    if sp_block > size:
        errors.append(
            (
                "sp-block",
                f"sp-block({sp_npus}/{shown}={sp_block}) is bigger than size of super-pod({size})",
            )
        )
    if single:
        if is_a3:
            ok = job.npu_per_task == 1 or (
                job.npu_per_task % 2 == 0 and job.npu_per_task <= node_npus
            )
            if not ok:
                errors.append(
                    (
                        "npu-per-task",
                        f"standalone super-pod job require npu [1, 2*n], instead of "
                        f"{job.npu_per_task}",
                    )
                )
        elif job.npu_per_task > node_npus:
            errors.append(
                (
                    "npu-per-task",
                    f"single super-pod job require npu [1, {node_npus}], instead of "
                    f"{job.npu_per_task}",
                )
            )
        if sp_npus != job.npu_per_task:
            errors.append(
                (
                    "sp-block",
                    f"single super-pod job sp-block annotation should equal require npu num "
                    f"(sp-block {sp_npus}, npu-per-task {job.npu_per_task})",
                )
            )
        return sp_block, False
    if total % sp_npus != 0:
        errors.append(
            (
                "sp-block",
                f"job require npu num {total} should be multiple of sp-block {sp_npus} "
                f"(tasks {job.tasks} is not a multiple of spBlock {sp_block} nodes)",
            )
        )
    if job.npu_per_task != node_npus:
        if is_a3:
            text = (
                f"distributed super-pod job require npu({job.npu_per_task}) should be equal "
                f"to node npu({node_npus})"
            )
        else:
            text = f"distributed super-pod job require npu 8*n, instead of {job.npu_per_task}"
        errors.append(("npu-per-task", text))
    return sp_block, True


def _check_rack(
    job: Job, node_npus: int, total: int, scenario: Scenario, errors: list[tuple[str, str]]
) -> tuple[int, int, bool]:
    raw_size = scenario.config.super_pod_size or 0
    sp_npus = total if job.sp_block is None else job.sp_block
    single = job.tasks == 1
    sp_block = 0
    tp_block = 0
    if sp_npus <= 0:
        errors.append(("sp-block", f"sp-block({sp_npus}) is invalid"))
    elif sp_npus < node_npus:
        sp_block = 1
    elif sp_npus % node_npus != 0:
        errors.append(("sp-block", _not_multiple_of_node(sp_npus, node_npus)))
    else:
        sp_block = sp_npus // node_npus
    if sp_block > 0 and job.tasks % sp_block != 0:
        errors.append(
            (
                "sp-block",
                f"job require total Pod({job.tasks}) should be multiple of a sp-block size "
                f"{sp_block}",
            )
        )
    if raw_size < 1 or raw_size * node_npus > 8192:
        errors.append(
            (
                "config.super-pod-size",
                f"Parameter super-pod-size({raw_size}) in volcano.yaml is invalid which should "
                "be in range [1,1024]",
            )
        )
    elif sp_block > raw_size:
        errors.append(
            (
                "sp-block",
                f"sp-block({sp_npus}/{node_npus}={sp_block}) is bigger than size of "
                f"super-pod({raw_size})",
            )
        )
    ra = DEFAULT_RA_BLOCK if job.ra_block is None else job.ra_block
    if ra not in RA_BLOCK_VALUES:
        errors.append(
            (
                "ra-block",
                f"ra-block({ra}) is invalid: it must be one of {list(RA_BLOCK_VALUES)} "
                "(1 <= ra-block <= 64 and a power of 2)",
            )
        )
    else:
        tp_block = (ra + RACK_NODES - 1) // RACK_NODES
        if sp_block > 0:
            if tp_block > sp_block:
                errors.append(
                    (
                        "ra-block",
                        f"Parameter ra-block({ra})/8 could not be bigger than "
                        f"sp-block({sp_npus})/8",
                    )
                )
            elif job.tasks % tp_block != 0 or sp_block % tp_block != 0:
                errors.append(
                    (
                        "ra-block",
                        f"spBlock {sp_block} and tasks {job.tasks} must be multiples of "
                        f"tpBlock {tp_block} (ra-block {ra})",
                    )
                )
    if single:
        if not 1 <= job.npu_per_task <= node_npus:
            errors.append(
                (
                    "npu-per-task",
                    f"single super-pod job require npu [1, 8], instead of {job.npu_per_task}",
                )
            )
        if sp_npus != job.npu_per_task:
            errors.append(
                (
                    "sp-block",
                    "single super-pod job sp-block annotation should equal require npu num "
                    f"(sp-block {sp_npus}, npu-per-task {job.npu_per_task})",
                )
            )
    else:
        if sp_npus > 0 and total % sp_npus != 0:
            errors.append(("sp-block",
                           f"job require npu num {total} should be multiple of sp-block {sp_npus}"))
        if ra in RA_BLOCK_VALUES and total % ra != 0:
            errors.append(
                ("ra-block", f"job require npu num {total} should be multiple of ra-block {ra}")
            )
        if job.npu_per_task != node_npus:
            errors.append(
                (
                    "npu-per-task",
                    f"distributed super-pod job require npu 8*n, instead of {job.npu_per_task}",
                )
            )
    if job.ub_memory and total > UB_MEM_MAX_NPUS:
        errors.append(
            (
                "ub-memory",
                f"a UB-memory job may request at most {UB_MEM_MAX_NPUS} NPUs, instead of {total}",
            )
        )
    return sp_block, tp_block, not single


_BASE_INVALID: dict[Policy, frozenset[int]] = {
    Policy.CHIP4_NODE4: frozenset({3}),
    Policy.CHIP8_NODE16: frozenset({9, 11, 13, 15}),
}
_A3_ORDINARY = frozenset({Policy.CHIP2_NODE16, Policy.CHIP2_NODE8, Policy.MODULE_A3_16})


def _check_ordinary(
    job: Job, policy: Policy, node_npus: int, total: int, errors: list[tuple[str, str]]
) -> None:
    request = job.npu_per_task
    if policy in _A3_ORDINARY:
        if request == 1 and job.tasks != 1:  # a 1-NPU task only as a single-task job
            errors.append(("npu-per-task", "only single task job can request single npu"))
        elif total != 1 and total % 2 != 0:
            errors.append(
                (
                    "npu-per-task",
                    f"job require npu num should be even number, instead of {total}",
                )
            )
        if request != 1 and (request % 2 != 0 or request > node_npus):
            errors.append(
                (
                    "npu-per-task",
                    f"each task must request an even number of NPUs <= {node_npus}, "
                    f"instead of {request}",
                )
            )
        return
    invalid = _BASE_INVALID.get(policy, frozenset())
    if not 1 <= request <= node_npus or request in invalid:
        shown = sorted(invalid)
        errors.append(
            (
                "npu-per-task",
                f"expected: job<{job.name}> req npu num should small than {node_npus + 1}, "
                f"and not in {shown}, actual: task req npu: {request}",
            )
        )


def validate_scenario(
    scenario: Scenario, source: str = "<scenario>",
    checked_nodes: Mapping[str, int] | None = None,
    cache_checked: bool = False,
) -> tuple[dict[str, JobShape], list[str]]:
    """Check every cross-field rule of a scenario.

    Parameters
    ----------
    scenario
        A structurally valid scenario.
    source
        The file name used in messages.
    checked_nodes
        The names of the scenario's nodes (name → index) when the rules on the nodes
        alone (unique names, ``free`` within ``0..npus``, super pods within
        ``super-pod-size``) are known to hold: a stored cluster whose nodes a delta left
        unchanged.  Those rules are then not run again; every other rule is.
    cache_checked
        The ``affinity-cache`` entries are known to name existing nodes and to be unique
        per owner and rank (a stored cluster whose nodes and cache a delta left
        unchanged, or whose changed entries were checked): their rules are not run again.

    Returns
    -------
    tuple
        ``(shapes, messages)``: the derived shape of every valid job by name, and one
        message per error (empty when the scenario is valid).
    """
    messages: list[str] = []
    config = scenario.config

    def say(where: str, field: str, text: str) -> None:
        messages.append(f"{source}: {where}: field '{field}': {text}")

    if config.super_pod_size is not None and config.super_pod_size < 0:
        say("config", "super-pod-size", f"super-pod-size({config.super_pod_size}) is negative")
    if config.reserve_nodes is not None and config.reserve_nodes < 0:
        say("config", "reserve-nodes", f"reserve-nodes({config.reserve_nodes}) is negative")
    for tree, levels in config.resource_level_config.items():
        where = f"config.resource-level-config tree '{tree}'"
        if not levels:
            say(where, "levels", "the tree has no levels")
            continue
        if len(levels) > MAX_LEVELS:
            say(where, "levels", f"the tree has {len(levels)} levels; at most {MAX_LEVELS} are "
                "accepted (the fragment score multiplies by 10 per level)")
            continue
        numbers = []
        for key in levels:
            match = _LEVEL_KEY.fullmatch(key)
            if match is None:
                say(where, key, f"'{key}' is not a level name (expected level1..levelN)")
            else:
                numbers.append(int(match.group(1)))
        if sorted(numbers) != list(range(1, len(numbers) + 1)):
            say(
                where,
                "levels",
                f"topo-level config is not continuous: levels {listing(sorted(numbers))} must be "
                f"level1..level{len(numbers)}",
            )
        for key, level in levels.items():
            if key != "level1" and level.reserved_node:
                say(where, f"{key}.reservedNode", "reservedNode is only allowed on level1")
        labels = [lv.label for lv in levels.values()]
        dup_labels = sorted(lb for lb, c in Counter(labels).items() if c > 1)
        if dup_labels:
            say(where, "label", f"labels {', '.join(repr(lb) for lb in dup_labels)} are used by "
                                "more than one level")

    nodes = scenario.nodes
    super_pod_sizes: Counter[int] = Counter()
    names: Collection[str]
    if checked_nodes is not None:
        names = checked_nodes  # the rules on the nodes alone hold: not run again
    else:
        names = set(map(attrgetter("name"), nodes))
        if len(names) == len(nodes) and all(
                0 <= free <= npus for free, npus in zip(map(attrgetter("free"), nodes),
                                                        map(attrgetter("npus"), nodes),
                                                        strict=True)):
            # names unique, every free in range: checked column by column (65,536 nodes)
            super_pod_sizes.update(sp for sp in map(attrgetter("super_pod_id"), nodes)
                                   if sp is not None and sp >= 0)
        else:  # the messages, node by node
            seen: set[str] = set()
            for index, node in enumerate(nodes):
                where = f"node '{node.name}'"
                if node.name in seen:
                    say(where, "name", f"duplicate node name (node #{index})")
                seen.add(node.name)
                problem = free_problem(node.free, node.npus)
                if problem is not None:
                    say(where, "free", problem)
                if node.super_pod_id is not None and node.super_pod_id >= 0:
                    super_pod_sizes[node.super_pod_id] += 1
            names = seen
    size = config.effective_super_pod_size
    for sp, count in sorted(super_pod_sizes.items()):
        if count > size:
            say(
                f"super pod {sp}",
                "super-pod-id",
                f"super-pod-size is smaller than superPod's node size: super pod {sp} has "
                f"{count} nodes but config.super-pod-size is {size}",
            )

    seen_keys: set[tuple[str, int]] = set()
    for entry in () if cache_checked else scenario.affinity_cache.entries:
        where = f"affinity-cache entry (owner-uid {entry.owner_uid}, rank {entry.rank})"
        if entry.node not in names:
            say(where, "node", f"node '{entry.node}' does not exist in nodes")
        if entry.previous and entry.previous not in names:  # "" = no anchor (upstream)
            say(where, "previous", f"node '{entry.previous}' does not exist in nodes")
        cache_key = (entry.owner_uid, entry.rank)
        if cache_key in seen_keys:
            say(where, "rank", "the same owner-uid and rank appear more than once")
        seen_keys.add(cache_key)

    shapes: dict[str, JobShape] = {}
    used: Counter[str] = Counter()  # chips of running ranks (running jobs, running-ranks)
    job_names: set[str] = set()
    owners: dict[str, str] = {}
    for job in scenario.jobs:
        where = f"job '{job.name}'"
        if job.name in job_names:
            say(where, "name", "duplicate job name")
        job_names.add(job.name)
        if job.owner_uid:
            if job.owner_uid in owners:
                say(
                    where,
                    "owner-uid",
                    f"owner-uid '{job.owner_uid}' is also used by job '{owners[job.owner_uid]}'",
                )
            owners[job.owner_uid] = job.name
        shape, errors = derive_shape(job, scenario)
        for field, text in errors:
            say(where, field, text)
        if shape is not None:
            shapes[job.name] = shape
        running_nodes: Counter[str] = Counter()
        for rank, node_name in sorted(job.running_ranks.items()):
            if node_name not in names:
                say(where, f"running-ranks.{rank}", f"node '{node_name}' does not exist in nodes")
            else:
                used[node_name] += job.npu_per_task
                running_nodes[node_name] += 1
        if shape is not None and shape.whole_node:
            shared = sorted(n for n, c in running_nodes.items() if c > 1)
            if shared:
                say(where, "running-ranks", f"several running ranks of a whole-node job share "
                                            f"nodes {sample(shared)}")
    running_names: set[str] = set()
    for running in scenario.running:
        where = f"running job '{running.name}'"
        if running.name in job_names:
            say(where, "name", "a running job has the same name as a pending job")
        if running.name in running_names:
            say(where, "name", "duplicate running job name")
        running_names.add(running.name)
        for rank, node_name in running.ranks.items():
            if node_name not in names:
                say(where, f"ranks.{rank}", f"node '{node_name}' does not exist in nodes")
            else:
                used[node_name] += running.npu_per_task
        _, errors = check_running(running, scenario)
        for field, text in errors:
            say(where, field, text)
    messages.extend(validate_vnpu(scenario, source, job_names | running_names))
    by_name = {node.name: node for node in scenario.nodes} if used else {}
    for name, chips in used.items():
        node = by_name[name]
        problem = running_overlap_problem(node.free, chips, node.npus)
        if problem is not None:
            say(f"node '{name}'", "free", problem)
    return shapes, messages


def submitted_shapes(scenario: Scenario, node_index: Mapping[str, int],
                     jobs: Sequence[Job], running: Sequence[RunningJob],
                     used: Mapping[str, int] | None = None
                     ) -> dict[str, JobShape] | None:
    """The shapes of the jobs ``jobs`` when ``scenario`` passes :func:`validate_scenario`,
    checking only the rules that the submitted items take part in; ``None`` when one of
    them may be broken (:func:`validate_scenario` then names it).

    ``scenario`` must be a scenario that passed :func:`validate_scenario`, with some
    pending and running jobs removed and others added (``jobs`` and ``running``; an item
    removed and added again unchanged need not be among them), and nothing else
    changed: the same nodes (``node_index``: name → position in ``scenario.nodes``) with
    the same values, config, vNPU nodes and jobs, and cache entries.  The rules on
    the nodes, the config, the vNPU part and the cache then still hold, as does every
    rule of a single job or running job that was there before; what is checked is:

    * the names of the pending, running and vNPU jobs (all of them: unique across the
      three sections) and the pending jobs' ``owner-uid`` values (unique);
    * each of ``jobs`` by its own rules (:func:`derive_shape`, ``running-ranks`` on
      existing nodes, a whole-node job's running ranks on distinct nodes);
    * each of ``running`` by its own rules (ranks on existing nodes,
      :func:`check_running`);
    * ``free`` against the running ranks' chips on the nodes the submitted items run on
      (``used``: :func:`running_chips` of ``scenario`` when the caller keeps it).
    """
    job_names = [job.name for job in scenario.jobs]
    every_name = set(job_names)
    every_name.update(job.name for job in scenario.running)
    every_name.update(job.name for job in scenario.vnpu_jobs)
    if len(every_name) != len(job_names) + len(scenario.running) + len(scenario.vnpu_jobs):
        return None
    owners = [job.owner_uid for job in scenario.jobs if job.owner_uid]
    if len(set(owners)) != len(owners):
        return None
    shapes: dict[str, JobShape] = {}
    touched: set[str] = set()
    for job in jobs:
        shape, errors = derive_shape(job, scenario)
        if errors or shape is None:
            return None
        shapes[job.name] = shape
        if not job.running_ranks:
            continue
        on = list(job.running_ranks.values())
        if any(name not in node_index for name in on):
            return None
        if shape.whole_node and len(set(on)) != len(on):
            return None
        touched.update(on)
    for item in running:
        if any(name not in node_index for name in item.ranks.values()):
            return None
        _, errors = check_running(item, scenario)
        if errors:
            return None
        touched.update(item.ranks.values())
    if touched:
        if used is None:
            used = running_chips(scenario, touched)
        for name in touched:
            chips = used.get(name, 0)
            node = scenario.nodes[node_index[name]]
            if chips and running_overlap_problem(node.free, chips, node.npus) is not None:
                return None
    return shapes


def free_problem(free: int, npus: int) -> str | None:
    """The rule on a node's ``free`` alone: ``0 <= free <= npus`` (``None`` when it holds)."""
    if free < 0 or free > npus:
        return f"free {free} must be between 0 and npus ({npus})"
    return None


def running_overlap_problem(free: int, chips: int, npus: int) -> str | None:
    """The rule relating a node's ``free`` to the running jobs on it: ``free`` excludes the
    ``chips`` they use, so ``free + chips <= npus`` (``None`` when it holds)."""
    if free + chips > npus:
        return (f"free {free} plus the {chips} NPUs of running jobs exceeds npus {npus} "
                "(free must exclude the chips of running jobs and running ranks)")
    return None


def running_chips(scenario: Scenario, nodes: set[str] | None = None) -> Counter[str]:
    """NPUs the running jobs and the pending jobs' running ranks use per node (only
    ``nodes`` when given), as :func:`validate_scenario` counts them for
    :func:`running_overlap_problem`."""
    used: Counter[str] = Counter()
    for running in scenario.running:
        for node_name in running.ranks.values():
            if nodes is None or node_name in nodes:
                used[node_name] += running.npu_per_task
    for job in scenario.jobs:
        for node_name in job.running_ranks.values():
            if nodes is None or node_name in nodes:
                used[node_name] += job.npu_per_task
    return used


def node_value_problems(scenario: Scenario, changed: list[int],
                        used: Mapping[str, int] | None = None) -> list[tuple[str, str]]:
    """The cross-field rules on ``free`` for the nodes at ``changed`` only (``used``:
    :func:`running_chips` of ``scenario`` when the caller keeps it).

    A change of ``free`` or ``health`` alone can break no other rule of
    :func:`validate_scenario`, so a scenario that was valid before such a change is valid
    after it exactly when this returns nothing (the stored-cluster service relies on it).

    Returns
    -------
    list
        ``(node name, message)`` for each rule broken.
    """
    out: list[tuple[str, str]] = []
    nodes = [scenario.nodes[i] for i in changed]
    chips: Mapping[str, int] | None = used
    if chips is None and (scenario.running
                          or any(job.running_ranks for job in scenario.jobs)):
        chips = running_chips(scenario, {node.name for node in nodes})
    for node in nodes:
        problem = free_problem(node.free, node.npus)
        if problem is None and chips is not None and chips.get(node.name, 0):
            problem = running_overlap_problem(node.free, chips[node.name], node.npus)
        if problem is not None:
            out.append((node.name, problem))
    return out


def running_spec(running: RunningJob) -> tuple[Job, int]:
    """The job spec of a running job and its desired rank count.

    ``tasks`` defaults to the highest running rank + 1; the spec has at least one task
    (a parked job, ``tasks: 0``, keeps a one-task spec).  Every field of
    :class:`~models.scenario.RunningJob` is bounded as on :class:`~models.scenario.Job`,
    so building the spec cannot fail.
    """
    ranks = running.ranks
    desired = running.tasks if running.tasks is not None else (max(ranks) + 1 if ranks else 0)
    data = {"name": running.name, "owner-uid": running.owner_uid,
            "policy": running.policy, "tasks": max(1, desired),
            "npu-per-task": running.npu_per_task, "priority": running.priority,
            "image-size-gb": running.image_size_gb, "sp-block": running.sp_block,
            "ra-block": running.ra_block, "affinity-config": running.affinity_config,
            "super-pod-affinity": running.super_pod_affinity.value,
            "ub-memory": running.ub_memory, "inferserviceid": running.inferserviceid,
            "labels": running.labels, "pod-rescheduling": running.pod_rescheduling,
            "process-recover": running.process_recover,
            "image": running.image.model_dump(by_alias=True, exclude_none=True)
            if running.image is not None else None}
    return Job.model_validate({k: v for k, v in data.items() if v is not None}), desired


def check_running(running: RunningJob, scenario: Scenario
                  ) -> tuple[JobShape | None, list[tuple[str, str]]]:
    """Check a running job by the rules of a pending job of the same spec.

    ``validate``, ``plan`` and ``simulate`` all use this: the job's spec must be a valid
    job (policy, sizes, blocks) unless it is parked (``tasks: 0``), its ranks must lie in
    ``0..tasks-1``, and a super-pod, 950 or multilevel entry of ``running`` runs all its
    ranks or none: a partly running gang of those families is written as a pending job
    whose ``running-ranks`` hold the running ones (placed around them, never moved).

    Returns
    -------
    tuple
        ``(shape, errors)``; each error is ``(field, message)``.
    """
    spec, desired = running_spec(running)
    errors: list[tuple[str, str]] = []
    bad = sorted(r for r in running.ranks if r >= desired)
    if bad:
        errors.append(("ranks", f"ranks {sample(bad)} are outside 0..{desired - 1} (tasks "
                                f"{desired})"))
    shape, shape_errors = derive_shape(spec, scenario)
    if desired > 0:
        errors.extend(shape_errors)
    if (shape is not None and shape.family is not Family.ORDINARY and running.ranks
            and len(running.ranks) != desired):
        errors.append(("ranks", f"a {shape.family.value} job runs all its {desired} ranks "
                                f"or none, but {len(running.ranks)} are running (a partly "
                                "running gang is a pending job with 'running-ranks')"))
    return (None if errors else shape), errors
