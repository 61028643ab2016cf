"""A small Python client of the planning service (sync and async), used by the tests and
the load test; a Go client can be generated from ``GET /openapi.json`` instead."""

from __future__ import annotations

import os
import ssl
from typing import Any

import httpx

from models.documents import read_document
from models.errors import InputError
from models.numbers import parse_int
from models.placement import PlacementFile
from models.scenario import Scenario


class ServiceError(Exception):
    """A non-2xx answer: ``status``, ``error`` and the service's messages."""

    def __init__(self, status: int, error: str, messages: list[str],
                 retry_after: float | None = None) -> None:
        super().__init__(f"{status} {error}: " + "; ".join(messages[:5]))
        self.status = status
        self.error = error
        self.messages = messages
        self.retry_after = retry_after


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        body = response.json()
        error, messages = str(body.get("error", "")), list(body.get("messages", []))
    except ValueError:
        error, messages = response.reason_phrase, [response.text[:200]]
    retry = response.headers.get("retry-after")
    raise ServiceError(response.status_code, error, messages,
                       float(seconds) if retry and (seconds := parse_int(retry)) is not None
                       else None)


#: What the client sends as a scenario: a model, plain data, ready JSON bytes, or a path.
ScenarioArg = Scenario | dict[str, Any] | bytes | str | os.PathLike[str]


def _scenario_data(scenario: Scenario | dict[str, Any] | str | os.PathLike[str]
                   ) -> dict[str, Any]:
    """Plain data of a scenario given as a model, data, or a YAML/JSON file's path."""
    if isinstance(scenario, Scenario):
        return scenario.to_dict()
    if isinstance(scenario, dict):
        return scenario
    if isinstance(scenario, str | os.PathLike):
        # a path (YAML or JSON), read through the CLI's bounded reader: the text of a
        # path is never sent as the body
        data = read_document(scenario)
        if not isinstance(data, dict):
            raise InputError([f"{scenario}: a scenario file holds a mapping, not "
                              f"{type(data).__name__}"])
        return data
    raise TypeError(f"a scenario is a Scenario, a dict, JSON bytes or a path, not "
                    f"{type(scenario).__name__}")


def _body(scenario: ScenarioArg) -> dict[str, Any]:
    if isinstance(scenario, bytes):
        return {"content": scenario, "headers": {"content-type": "application/json"}}
    return {"json": _scenario_data(scenario)}


def _plan_params(engine: str, time_limit: float | None, seed: int | None,
                 deterministic_time: float | None) -> dict[str, Any]:
    params: dict[str, Any] = {"engine": engine}
    if time_limit is not None:
        params["time-limit"] = time_limit
    if seed is not None:
        params["seed"] = seed
    if deterministic_time is not None:
        params["deterministic-time"] = deterministic_time
    return params


def _auth_headers(token: str | None) -> dict[str, str]:
    return {} if token is None else {"authorization": f"Bearer {token}"}


def _verify(verify: bool | str | ssl.SSLContext) -> bool | ssl.SSLContext:
    """httpx's ``verify``: a CA file path becomes a context (httpx deprecates paths)."""
    return ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify


def _http_timeout(time_limit: float | None) -> float:
    # the service answers within the limit; leave room for the transfer
    return (time_limit or 10.0) + 10.0


class PlanClient:
    """Synchronous client.

    Parameters
    ----------
    base_url
        For example ``http://127.0.0.1:8080``.
    timeout
        Default HTTP timeout in seconds of calls without a time limit.
    token
        Bearer token of a service started with ``--token-file``.
    verify
        TLS verification of an ``https://`` URL: ``True`` (system CAs), a CA bundle path
        (e.g. the service's self-signed certificate), or an :class:`ssl.SSLContext`.
    """

    def __init__(self, base_url: str, timeout: float = 30.0, token: str | None = None,
                 verify: bool | str | ssl.SSLContext = True) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout,
                                  headers=_auth_headers(token), verify=_verify(verify))

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> PlanClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """A raw request; raises :class:`ServiceError` on a non-2xx answer."""
        response = self._http.request(method, path, **kwargs)
        _raise_for(response)
        return response

    def plan(self, scenario: ScenarioArg, *, engine: str = "auto",
             time_limit: float | None = None, seed: int | None = None,
             deterministic_time: float | None = None) -> PlacementFile:
        """``POST /v1/plan``: the contract placement."""
        response = self.request("POST", "/v1/plan", **_body(scenario),
                                params=_plan_params(engine, time_limit, seed,
                                                    deterministic_time),
                                timeout=_http_timeout(time_limit))
        return PlacementFile.model_validate(response.json())

    def validate(self, scenario: Scenario | dict[str, Any] | str | os.PathLike[str],
                 placement: PlacementFile | dict[str, Any] | None = None) -> dict[str, Any]:
        """``POST /v1/validate``: ``valid``, ``errors``, ``violations``, ``metrics``."""
        body: dict[str, Any] = {"scenario": _scenario_data(scenario)}
        if placement is not None:
            body["placement"] = (placement.to_dict() if isinstance(placement, PlacementFile)
                                 else placement)
        result: dict[str, Any] = self.request("POST", "/v1/validate", json=body).json()
        return result

    def put_cluster(self, name: str, scenario: ScenarioArg) -> dict[str, Any]:
        """``PUT /v1/clusters/{name}``: the cluster's summary."""
        info: dict[str, Any] = self.request("PUT", f"/v1/clusters/{name}",
                                            **_body(scenario)).json()
        return info

    def patch_cluster(self, name: str, delta: dict[str, Any]) -> dict[str, Any]:
        """``PATCH /v1/clusters/{name}``: apply a delta; the new summary."""
        info: dict[str, Any] = self.request("PATCH", f"/v1/clusters/{name}", json=delta).json()
        return info

    def get_cluster(self, name: str) -> dict[str, Any]:
        """``GET /v1/clusters/{name}``."""
        info: dict[str, Any] = self.request("GET", f"/v1/clusters/{name}").json()
        return info

    def cluster_scenario(self, name: str) -> Scenario:
        """``GET /v1/clusters/{name}/scenario``."""
        return Scenario.model_validate(
            self.request("GET", f"/v1/clusters/{name}/scenario").json())

    def delete_cluster(self, name: str) -> None:
        """``DELETE /v1/clusters/{name}``."""
        self.request("DELETE", f"/v1/clusters/{name}")

    def plan_cluster(self, name: str, *, engine: str = "auto",
                     time_limit: float | None = None, seed: int | None = None,
                     deterministic_time: float | None = None) -> PlacementFile:
        """``POST /v1/clusters/{name}/plan``."""
        response = self.request("POST", f"/v1/clusters/{name}/plan",
                                params=_plan_params(engine, time_limit, seed,
                                                    deterministic_time),
                                timeout=_http_timeout(time_limit))
        return PlacementFile.model_validate(response.json())

    def healthz(self) -> bool:
        """True when ``/healthz`` answers 200."""
        return self._http.get("/healthz").status_code == 200

    def readyz(self) -> bool:
        """True when ``/readyz`` answers 200."""
        return self._http.get("/readyz").status_code == 200

    def metrics(self) -> str:
        """The Prometheus text."""
        return self.request("GET", "/metrics").text


class AsyncPlanClient:
    """Asynchronous client (the load test's): :meth:`plan` and the raw calls the load test
    times; ``token`` and ``verify`` as in :class:`PlanClient`."""

    def __init__(self, base_url: str, timeout: float = 30.0, max_connections: int = 64,
                 token: str | None = None, verify: bool | str | ssl.SSLContext = True) -> None:
        limits = httpx.Limits(max_connections=max_connections,
                              max_keepalive_connections=max_connections)
        self._http = httpx.AsyncClient(base_url=base_url, timeout=timeout, limits=limits,
                                       headers=_auth_headers(token), verify=_verify(verify))

    @property
    def base_url(self) -> str:
        """The service's base URL."""
        return str(self._http.base_url).rstrip("/")

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def plan(self, scenario: ScenarioArg, *, engine: str = "auto",
                   time_limit: float | None = None, seed: int | None = None,
                   deterministic_time: float | None = None) -> PlacementFile:
        """``POST /v1/plan``: the contract placement (raises :class:`ServiceError`)."""
        response = await self._http.post(
            "/v1/plan", **_body(scenario),
            params=_plan_params(engine, time_limit, seed, deterministic_time),
            timeout=_http_timeout(time_limit))
        _raise_for(response)
        return PlacementFile.model_validate(response.json())

    async def plan_raw(self, body: bytes, *, engine: str = "auto",
                       time_limit: float | None = None, seed: int | None = None
                       ) -> httpx.Response:
        """``POST /v1/plan`` with a ready JSON body; the raw response (no raise)."""
        return await self._http.post(
            "/v1/plan", content=body, headers={"content-type": "application/json"},
            params=_plan_params(engine, time_limit, seed, None),
            timeout=_http_timeout(time_limit))

    async def plan_cluster_raw(self, name: str, *, engine: str = "auto",
                               time_limit: float | None = None) -> httpx.Response:
        """``POST /v1/clusters/{name}/plan``; the raw response (no raise)."""
        return await self._http.post(f"/v1/clusters/{name}/plan",
                                     params=_plan_params(engine, time_limit, None, None),
                                     timeout=_http_timeout(time_limit))

    async def patch_cluster(self, name: str, delta: dict[str, Any]) -> dict[str, Any]:
        """``PATCH /v1/clusters/{name}``."""
        response = await self._http.patch(f"/v1/clusters/{name}", json=delta)
        _raise_for(response)
        info: dict[str, Any] = response.json()
        return info
