"""The scheduler ConfigMap: ``init-params`` into the scenario's ``config`` (A.5, A.6).

``volcano-system/volcano-scheduler-configmap``, key ``volcano-scheduler.conf`` (YAML): the
``configurations`` entry named ``init-params`` carries a string map.  Upstream's
normalisation is applied, and recorded where the scenario would read a value differently:

* ``super-pod-size``: the raw integer is kept (chip8-node8-ra64-sp validates the raw value);
  absent, or not an integer, is left out (A3/850 then use 48, as upstream);
* ``reserve-nodes``: an integer ≥ 1 is kept (the clamp to the super-pod size is the
  contract's own rule); absent or ≤ 0 is left out, which means 2, as upstream
  (the contract would read an explicit 0 as "no reserve");
* ``prefer-previous-node``: ``true`` only for the exact string ``"true"``, and written
  explicitly (the contract's default is true, upstream's code default is false);
* ``resource-level-config``: the JSON string, parsed;
* ``useClusterInfoManager`` and ``self-maintain-available-card``: true unless ``"false"``;
  they choose the device-info source and the free-chip rule.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from models.documents import DocumentError, load_yaml
from models.kube.source import Diagnostics, describe, parse_json_field
from models.limits import escape_text
from models.numbers import parse_int

SCHEDULER_NAMESPACE = "volcano-system"
SCHEDULER_CM = "volcano-scheduler-configmap"
SCHEDULER_CONF_KEY = "volcano-scheduler.conf"
#: init-params that placement reads but the scenario cannot express.
UNMODELLED_PARAMS = {
    "nslb-version": "switch (ToR) affinity",
    "shared-tor-num": "switch (ToR) affinity",
    "forceEnqueue": "enqueue behaviour",
    "grace-over-time": "grace deletion",
}
#: init-params that are read here or do not matter for placement.
KNOWN_PARAMS = frozenset({"super-pod-size", "reserve-nodes", "prefer-previous-node",
                          "resource-level-config", "useClusterInfoManager",
                          "self-maintain-available-card"})


@dataclass
class SchedulerConfig:
    """The scenario config and the two data-source switches."""

    config: dict[str, Any] = field(default_factory=lambda: {"prefer-previous-node": False})
    use_cluster_info_manager: bool = True
    self_maintain_available_card: bool = True
    found: bool = False
    obj: str = f"ConfigMap {SCHEDULER_NAMESPACE}/{SCHEDULER_CM}"


def is_scheduler_configmap(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is the Volcano scheduler ConfigMap."""
    meta = obj.get("metadata") or {}
    return (meta.get("name") == SCHEDULER_CM
            and meta.get("namespace", SCHEDULER_NAMESPACE) == SCHEDULER_NAMESPACE)


def init_params(obj: dict[str, Any], diag: Diagnostics) -> dict[str, str] | None:
    """The ``init-params`` string map of the scheduler ConfigMap (``None`` if unusable)."""
    who = describe(obj, "ConfigMap")
    data = obj.get("data") or {}
    text = data.get(SCHEDULER_CONF_KEY) if isinstance(data, dict) else None
    if not isinstance(text, str):
        diag.error(who, f"data.{SCHEDULER_CONF_KEY}", "missing")
        return None
    try:  # the bounded reader of scenario files: depth, values (aliases counted), ranges
        conf = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        diag.error(who, f"data.{SCHEDULER_CONF_KEY}", f"malformed YAML{where}: {problem}")
        return None
    except DocumentError as exc:
        diag.error(who, f"data.{SCHEDULER_CONF_KEY}", f"refused: {exc}")
        return None
    if not isinstance(conf, dict):
        diag.error(who, f"data.{SCHEDULER_CONF_KEY}", "expected a YAML mapping")
        return None
    entries = conf.get("configurations") or []
    if not isinstance(entries, list):
        diag.error(who, f"data.{SCHEDULER_CONF_KEY}.configurations", "expected a list")
        return None
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("name") == "init-params":
            args = entry.get("arguments") or {}
            if not isinstance(args, dict):
                diag.error(who, f"data.{SCHEDULER_CONF_KEY}.configurations[{index}].arguments",
                           "expected a mapping")
                return None
            return {str(k): v if isinstance(v, str) else json.dumps(v)
                    if isinstance(v, (dict, list)) else str(v).lower()
                    if isinstance(v, bool) else str(v) for k, v in args.items()}
    diag.warn(who, "no 'init-params' configuration: upstream defaults used")
    return {}


def _int_param(params: dict[str, str], key: str, who: str,
               diag: Diagnostics) -> int | None:
    raw = params.get(key)
    if raw is None:
        return None
    text = raw.strip()
    # Go's strconv.Atoi: decimal digits with an optional sign, within int64; anything else
    # fails there and upstream keeps its default.
    value = parse_int(text, signed=True)
    if value is None or not -(2**63) <= value < 2**63:
        diag.warn(who, f"init-params {key}='{escape_text(raw, 40)}' is not an integer (Go's "
                  "strconv.Atoi, 64 bits): upstream's default used")
        return None
    return value


def scheduler_config(obj: dict[str, Any] | None, diag: Diagnostics) -> SchedulerConfig:
    """Map the scheduler ConfigMap (or its absence) to :class:`SchedulerConfig`."""
    result = SchedulerConfig()
    if obj is None:
        diag.warn(result.obj, "not in the input: upstream's init-params defaults are used "
                  "(prefer-previous-node false, super-pod-size 48, reserve-nodes 2)")
        return result
    result.found = True
    who = describe(obj, "ConfigMap")
    result.obj = who
    params = init_params(obj, diag)
    if params is None:
        return result
    config: dict[str, Any] = {"prefer-previous-node": params.get("prefer-previous-node") == "true"}
    size = _int_param(params, "super-pod-size", who, diag)
    if size is not None:
        if size < 0:
            diag.warn(who, f"init-params super-pod-size={size} is negative: left out (A3/850 "
                      "use 48; chip8-node8-ra64-sp jobs are rejected, as upstream)")
        else:
            config["super-pod-size"] = size
    reserve = _int_param(params, "reserve-nodes", who, diag)
    if reserve is not None:
        if reserve <= 0:
            diag.warn(who, f"init-params reserve-nodes={reserve}: upstream uses 2; left out")
        else:
            config["reserve-nodes"] = reserve
    levels = params.get("resource-level-config")
    if levels:
        errors = len(diag.errors)
        parsed = parse_json_field(levels, who, "init-params.resource-level-config", diag)
        if len(diag.errors) > errors:
            parsed = None
        elif parsed is not None and not isinstance(parsed, dict):
            diag.error(who, "init-params.resource-level-config",
                       "expected a JSON object: tree -> levelN -> {label, reservedNode}")
        elif parsed is not None:
            config["resource-level-config"] = parsed
    result.use_cluster_info_manager = params.get("useClusterInfoManager") != "false"
    result.self_maintain_available_card = params.get("self-maintain-available-card") != "false"
    for key, what in UNMODELLED_PARAMS.items():
        if key in params:
            diag.warn(who, f"init-params {key}={params[key]!r} ({what}) cannot be expressed "
                      "in a scenario: ignored")
    result.config = config
    return result
