"""npu-place models: the scenario contract, validation, compiled view, validator, objective.

Dependencies point one way: ``models`` ← ``heuristics`` ← ``solver``.
"""

from models.cache import AffinityCache
from models.check import Rule, Violation, check
from models.compiled import JobView, Problem, TreeView, compile_scenario, natural_key
from models.io import load_placement, load_scenario, save_placement, save_scenario
from models.objective import Metrics, ResolvedWeights, Weights, evaluate, resolve_weights
from models.placement import JobPlacement, MetricsModel, PlacementFile, Status
from models.plan import Plan, to_placement
from models.scenario import (
    AffinityCacheModel,
    CacheEntry,
    Config,
    Family,
    Health,
    Job,
    LevelConfig,
    Node,
    Policy,
    RunningJob,
    Scenario,
    SuperPodAffinity,
)
from models.validation import InputError, JobShape, validate_scenario

__all__ = [
    "AffinityCache",
    "AffinityCacheModel",
    "CacheEntry",
    "Config",
    "Family",
    "Health",
    "InputError",
    "Job",
    "JobPlacement",
    "JobShape",
    "JobView",
    "LevelConfig",
    "Metrics",
    "MetricsModel",
    "Node",
    "PlacementFile",
    "Plan",
    "Policy",
    "Problem",
    "ResolvedWeights",
    "Rule",
    "RunningJob",
    "Scenario",
    "Status",
    "SuperPodAffinity",
    "TreeView",
    "Violation",
    "Weights",
    "check",
    "compile_scenario",
    "evaluate",
    "load_placement",
    "load_scenario",
    "natural_key",
    "resolve_weights",
    "save_placement",
    "save_scenario",
    "to_placement",
    "validate_scenario",
]
