"""Request bodies: parsing, validation and the error type every route answers with.

Runs in the solver worker processes (:mod:`solver.service.worker`), so that the serving
process never parses a large body itself.
"""

from __future__ import annotations

import heapq
import json
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from models.compiled import Problem, compile_scenario
from models.io import DocumentError, load_json, load_yaml, model_from_data, pydantic_messages
from models.limits import MAX_ERRORS_SHOWN, capped, escape_text
from models.numbers import is_ascii_digits, parse_int
from models.placement import JobPlacement, MetricsModel, PlacementFile, Status
from models.scenario import Scenario
from models.validation import InputError
from solver.doors import validate_data
from solver.service.state import ClusterDelta, delta_messages


class BadRequest(Exception):
    """A request refused with ``status`` and messages naming the field (at most
    :data:`~models.limits.MAX_ERRORS_SHOWN` of them, then a count)."""

    def __init__(self, status: int, error: str, messages: list[str] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.messages = capped(messages or [])
        self.headers = headers


def refuse_declared_length(declared: str | None, limit: int, limit_text: str,
                           headers: dict[str, str] | None = None) -> None:
    """Raise a 413 when a request's ``Content-Length`` header (``declared``) says more than
    ``limit`` bytes, before anything is read.  A header of more digits than any size is
    too large too; one that is not ASCII digits is left to the body's own count.

    Parameters
    ----------
    declared
        The ``Content-Length`` header, or None.
    limit
        The most bytes taken.
    limit_text
        What the message says of the limit (``the limit is N bytes (--max-body-mb)``).
    headers
        Headers of the 413 answer.
    """
    if declared is None:
        return
    size = parse_int(declared, max_digits=30)
    if (size is not None and size > limit) or (size is None and is_ascii_digits(declared)):
        raise BadRequest(413, "body too large", [
            f"request body: {escape_text(declared, 40)} bytes; {limit_text}"], headers)


class ValidateRequest(BaseModel):
    """Body of ``POST /v1/validate``."""

    model_config = ConfigDict(extra="forbid")
    scenario: Scenario
    placement: PlacementFile | None = None


class ViolationModel(BaseModel):
    """One hard-constraint violation found by the validator."""

    rule: str
    job: str | None = None
    node: str | None = None
    message: str


class ValidateResponse(BaseModel):
    """Answer of ``POST /v1/validate``."""

    model_config = ConfigDict(populate_by_name=True)
    valid: bool
    errors: list[str] = Field(
        default_factory=list,
        description="input errors of the scenario: the first 50, then '... and N more'")
    errors_total: int = Field(0, alias="errors-total")
    violations: list[ViolationModel] = Field(default_factory=list,
                                             description="the first 50 violations")
    violations_total: int = Field(0, alias="violations-total")
    metrics: MetricsModel | None = None
    nodes: int = 0
    jobs: int = 0


def _loads(body: bytes, what: str) -> Any:
    """A body read as the CLI reads files, within the same bounds (:mod:`models.documents`).

    A body that starts with ``{`` or ``[`` is strict JSON (duplicate keys, non-finite
    numbers, too deep or too many values: 422; malformed: 400); any other body is YAML,
    the CLI's default format, through the same bounded reader (aliases counted, unknown
    tags refused), so ``curl --data-binary @cluster.yaml`` works as ``npu-place plan``.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(400, "malformed body", [f"{what}: not UTF-8 text"]) from None
    if not text.lstrip().startswith(("{", "[")):
        try:
            return load_yaml(text)
        except DocumentError as exc:
            raise BadRequest(422, "refused body", [f"{what}: {exc}"]) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = (f" at line {mark.line + 1}, column {mark.column + 1}"
                     if mark is not None else "")
            problem = getattr(exc, "problem", None) or "not YAML"
            raise BadRequest(400, "malformed body", [
                f"{what}: neither JSON (it does not start with '{{' or '[') nor YAML: "
                f"malformed YAML{where}: {escape_text(str(problem))}"]) from None
    try:
        return load_json(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(400, "malformed body", [
            f"{what}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ]) from None
    except DocumentError as exc:
        raise BadRequest(422, "refused body", [f"{what}: {exc}"]) from None


def parse_problem(body: bytes, what: str = "request body") -> Problem:
    """Parse, validate and compile a scenario body (raises :class:`BadRequest`)."""
    data = _loads(body, what)
    try:
        scenario = model_from_data(Scenario, data, what)
        return compile_scenario(scenario, what)
    except InputError as exc:
        raise BadRequest(422, "invalid scenario", exc.messages) from None


def parse_delta(body: bytes) -> ClusterDelta:
    """Parse a cluster delta body (raises :class:`BadRequest`)."""
    data = _loads(body, "delta")
    if not isinstance(data, dict):
        kind = type(data).__name__ if data is not None else "null"
        raise BadRequest(422, "invalid delta", [
            f"<delta>: expected an object at the top level, got {kind}"])
    try:
        return ClusterDelta.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(422, "invalid delta", capped(delta_messages(exc))) from None


def run_validate(body: bytes) -> ValidateResponse:
    """``POST /v1/validate``: check a scenario and optionally a placement."""
    data = _loads(body, "request body")
    if not isinstance(data, dict):
        raise BadRequest(422, "invalid body", ["request body: expected an object with "
                                               "'scenario' and optionally 'placement'"])
    unknown = [k for k in data if k not in ("scenario", "placement")]
    if unknown:  # only the messages shown are formatted (a body may hold 10^6 keys)
        shown = heapq.nsmallest(MAX_ERRORS_SHOWN, unknown)
        messages = [f"request body: field '{escape_text(k, 80)}': unknown field (expected "
                    "'scenario', 'placement')" for k in shown]
        raise BadRequest(422, "invalid body", capped(messages, total=len(unknown)))
    if "scenario" not in data:
        raise BadRequest(422, "invalid body", ["request body: field 'scenario': missing"])
    placement = None
    if data.get("placement") is not None:
        try:
            placement = PlacementFile.model_validate(data["placement"])
        except ValidationError as exc:
            raise BadRequest(422, "invalid placement",
                             pydantic_messages(exc, data["placement"], "placement")) from None
    # the same check and answer as ``npu-place validate`` (every error at once, the lists
    # capped as the CLI prints them)
    return ValidateResponse.model_validate(
        validate_data(data["scenario"], "scenario", placement).to_dict())


def empty_placement(job_names: list[str]) -> dict[str, Any]:
    """A valid answer that places nothing (no engine finished within the time limit).

    Placing nothing breaks no hard constraint, so it needs no scenario to be valid.
    """
    reason = ("no answer within the request's time limit: not even greedy finished; "
              "retry with a larger time-limit")
    placement = PlacementFile(
        engine="none", status=Status.GREEDY, objective=None,
        jobs=[JobPlacement(name=name, placed=False, reason=reason) for name in job_names],
        notes=[reason])
    return placement.to_dict()
