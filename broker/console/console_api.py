"""The JSON the console's pages use, under /console/api/.

Every endpoint acts with the caller's login (broker/console/logins.py) through the
Kafka API. What goes wrong is a message in the page, never a stack trace: a
`ClientError` (a Kafka error code, bad input) is 400 with `{"error": ...}`, a missing
login 401, anything else is logged here and answered 500 with one line.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from broker.client.session import ClientError, ConnectionLost
from broker.console import cluster_changes, cluster_reads, messages, security_admin
from broker.console.console_session import ConsoleSession
from broker.console.logins import Login, Logins
from broker.console.metrics_summary import (
    BYTES_IN,
    BYTES_OUT,
    MESSAGES_IN,
    RateHistory,
    ValueHistory,
    per_topic,
    requests_by_api,
    samples,
    started_at,
    totals,
)
from broker.metrics_http import MetricsSource

log = logging.getLogger(__name__)

COOKIE = "console_session"
_MAX_BODY = 1 << 20

Action = Callable[[ConsoleSession, Request], Awaitable[Any]]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json_body(request: Request) -> dict[str, Any]:
    if request.headers.get("content-type", "").split(";")[0] != "application/json":
        raise ClientError("send the form as application/json")
    raw = await request.body()
    if len(raw) > _MAX_BODY:
        raise ClientError("request too large")
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise ClientError("the request is not valid JSON") from None
    if not isinstance(body, dict):
        raise ClientError("the request must be a JSON object")
    return body


def _int(body: dict[str, Any], key: str, default: int | None = None, *, bits: int = 32) -> int:
    """A whole number of the form that fits the Kafka field (int32 unless `bits`)."""
    value = body.get(key, default)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ClientError(f"{key} must be a whole number")
    if not -(1 << (bits - 1)) <= value < 1 << (bits - 1):
        raise ClientError(f"{key} is out of range")
    return value


class ConsoleApi:
    def __init__(self, logins: Logins, metrics: MetricsSource) -> None:
        self.logins = logins
        self.metrics = metrics
        self.throughput = RateHistory()
        self.lag = ValueHistory()

    def routes(self) -> list[Route]:
        def act(action: Action) -> Callable[[Request], Awaitable[Response]]:
            async def endpoint(request: Request) -> Response:
                return await self._act(request, action)

            return endpoint

        return [
            Route("/api/session", self.session, methods=["GET"]),
            Route("/api/login", self.log_in, methods=["POST"]),
            Route("/api/logout", self.log_out, methods=["POST"]),
            Route("/api/overview", act(self.overview), methods=["GET"]),
            Route("/api/topics", act(self.topics), methods=["GET"]),
            Route("/api/topics", act(self.create_topic), methods=["POST"]),
            Route("/api/topics/{name}", act(self.topic), methods=["GET"]),
            Route("/api/topics/{name}", act(self.delete_topic), methods=["DELETE"]),
            Route("/api/topics/{name}/partitions", act(self.add_partitions), methods=["POST"]),
            Route("/api/topics/{name}/configs", act(self.alter_configs), methods=["POST"]),
            Route("/api/topics/{name}/messages", act(self.browse), methods=["GET"]),
            Route("/api/topics/{name}/messages", act(self.produce), methods=["POST"]),
            Route("/api/groups", act(self.groups), methods=["GET"]),
            Route("/api/groups/{group:path}", act(self.group), methods=["GET"]),
            Route("/api/groups/{group:path}", act(self.delete_group), methods=["DELETE"]),
            Route("/api/groups/{group:path}/reset", act(self.reset_offsets), methods=["POST"]),
            Route("/api/security", act(self.security), methods=["GET"]),
            Route("/api/security/users", act(self.set_user), methods=["POST"]),
            Route("/api/security/users/{user:path}", act(self.delete_user), methods=["DELETE"]),
            Route("/api/security/acls", act(self.add_acl), methods=["POST"]),
            Route("/api/security/acls/remove", act(self.remove_acl), methods=["POST"]),
            Route("/api/security/quotas", act(self.set_quota), methods=["POST"]),
        ]

    # ------------------------------------------------------------ logins

    async def session(self, request: Request) -> Response:
        login = self.logins.find(request.cookies.get(COOKIE))
        return JSONResponse(
            {
                "login_required": self.logins.login_required,
                "principal": None if login is None else login.principal,
            }
        )

    async def log_in(self, request: Request) -> Response:
        if not self.logins.login_required:
            return _error(400, "this cluster has no SASL users: no login is needed")
        try:
            body = await _json_body(request)
            user, password = str(body.get("username", "")), str(body.get("password", ""))
            if not user or not password:
                raise ClientError("give a user name and a password")
        except ClientError as exc:
            return _error(400, str(exc))
        try:
            token = await self.logins.log_in(user, password)
        except ClientError as exc:
            log.info("console login of %r refused: %s", user, exc)
            return _error(401, "wrong user name or password")
        response = JSONResponse({"principal": f"User:{user}"})
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/console")
        return response

    async def log_out(self, request: Request) -> Response:
        await self.logins.log_out(request.cookies.get(COOKIE))
        response = JSONResponse({})
        response.delete_cookie(COOKIE, path="/console")
        return response

    async def _act(self, request: Request, action: Action) -> Response:
        login = self.logins.find(request.cookies.get(COOKIE))
        if login is None:
            return _error(401, "log in first")
        try:
            async with login.lock:
                return JSONResponse(await self._with_session(login, request, action))
        except ClientError as exc:
            return _error(400, str(exc))
        except Exception:
            log.exception("console request %s %s failed", request.method, request.url.path)
            return _error(500, "the console failed to answer; the broker's log says why")

    async def _with_session(self, login: Login, request: Request, action: Action) -> Any:
        """`action` on the login's session. A lost connection drops the session, so the
        next request reconnects; a read (GET) is tried once more at once on a fresh
        session, since a broker process that restarted leaves the kept connection dead
        and the page would show an error for no reason. A change is not repeated: it
        may have been applied before the connection went."""
        try:
            return await self._on_session(login, request, action)
        except ConnectionLost:
            if request.method != "GET":
                raise
        log.info("console: the connection to the brokers was lost; reading again")
        return await self._on_session(login, request, action)

    async def _on_session(self, login: Login, request: Request, action: Action) -> Any:
        """`action` on the login's session; a lost connection drops the session and is
        ConnectionLost."""
        session = await self.logins.session_of(login)
        try:
            return await action(session, request)
        except ConnectionLost:
            await self.logins.drop_session(login)
            raise
        except (trio.BrokenResourceError, OSError) as exc:
            await self.logins.drop_session(login)
            raise ConnectionLost(f"lost the connection to the brokers: {exc}") from None

    # ------------------------------------------------------------ pages

    async def overview(self, session: ConsoleSession, request: Request) -> Any:
        response = await cluster_reads.metadata(session, None)
        found = samples(await self.metrics.families())
        self.throughput.add(totals(found))
        starts = started_at(found)
        brokers = cluster_reads.brokers(response)
        for broker in brokers:
            broker["up_since"] = starts.get(str(broker["node_id"]))
        return {
            "cluster_id": response.cluster_id,
            "controller": response.controller_id,
            "brokers": brokers,
            "partitions": cluster_reads.partition_health(response),
            "throughput": [
                {
                    "time": r["time"],
                    "bytes_in": r[BYTES_IN],
                    "bytes_out": r[BYTES_OUT],
                    "messages_in": r[MESSAGES_IN],
                }
                for r in self.throughput.rates()
            ],
            "requests": requests_by_api(found),
        }

    async def topics(self, session: ConsoleSession, request: Request) -> Any:
        listed = await cluster_reads.list_topics(session)
        stats = per_topic(samples(await self.metrics.families()))
        for topic in listed["topics"]:
            topic |= stats.get(topic["name"], {"size": 0.0, "messages_per_s": 0.0})
        return listed

    async def topic(self, session: ConsoleSession, request: Request) -> Any:
        return await cluster_reads.describe_topic(session, request.path_params["name"])

    async def create_topic(self, session: ConsoleSession, request: Request) -> Any:
        body = await _json_body(request)
        name = str(body.get("name", "")).strip()
        if not name:
            raise ClientError("give the topic a name")
        configs = body.get("configs") or {}
        if not isinstance(configs, dict):
            raise ClientError("configs must be an object of names and values")
        await cluster_changes.create_topic(
            session,
            name,
            _int(body, "partitions", 1),
            _int(body, "replication_factor", -1),
            {str(k): str(v) for k, v in configs.items()},
        )
        return {"created": name}

    async def delete_topic(self, session: ConsoleSession, request: Request) -> Any:
        name = request.path_params["name"]
        if request.query_params.get("confirm") != name:
            raise ClientError("confirm the deletion by giving the topic's name")
        await cluster_changes.delete_topic(session, name)
        return {"deleted": name}

    async def add_partitions(self, session: ConsoleSession, request: Request) -> Any:
        body = await _json_body(request)
        total = _int(body, "count")
        await cluster_changes.add_partitions(session, request.path_params["name"], total)
        return {"partitions": total}

    async def alter_configs(self, session: ConsoleSession, request: Request) -> Any:
        body = await _json_body(request)
        set_ = body.get("set") or {}
        delete = body.get("delete") or []
        if not isinstance(set_, dict) or not isinstance(delete, list):
            raise ClientError("set must be an object and delete a list")
        await cluster_changes.alter_configs(
            session,
            request.path_params["name"],
            {str(k): str(v) for k, v in set_.items()},
            [str(k) for k in delete],
        )
        return {"altered": request.path_params["name"]}

    async def browse(self, session: ConsoleSession, request: Request) -> Any:
        query = messages.parse_query(request.path_params["name"], dict(request.query_params))
        return await messages.browse(session, query)

    async def produce(self, session: ConsoleSession, request: Request) -> Any:
        body = await _json_body(request)
        key = body.get("key")
        headers = body.get("headers") or []
        if not isinstance(headers, list) or not all(
            isinstance(h, dict) and "key" in h for h in headers
        ):
            raise ClientError("headers must be a list of {key, value}")
        offset = await messages.produce_one(
            session,
            request.path_params["name"],
            _int(body, "partition", 0),
            None if key in (None, "") else str(key),
            str(body.get("value", "")),
            [(str(h["key"]), str(h.get("value", ""))) for h in headers],
        )
        return {"offset": offset}

    async def groups(self, session: ConsoleSession, request: Request) -> Any:
        return {"groups": await cluster_reads.list_groups(session)}

    async def group(self, session: ConsoleSession, request: Request) -> Any:
        group_id = request.path_params["group"]
        described = await cluster_reads.describe_group(session, group_id)
        described["lag_history"] = [
            {"time": t, "lag": v} for t, v in self.lag.add(group_id, described["total_lag"])
        ]
        return described

    async def delete_group(self, session: ConsoleSession, request: Request) -> Any:
        group_id = request.path_params["group"]
        await cluster_changes.delete_group(session, group_id)
        return {"deleted": group_id}

    async def reset_offsets(self, session: ConsoleSession, request: Request) -> Any:
        body = await _json_body(request)
        offset = body.get("offset")
        targets = await cluster_changes.reset_offsets(
            session,
            request.path_params["group"],
            str(body.get("topic", "")),
            str(body.get("to", "")),
            None if offset in (None, "") else _int(body, "offset", bits=64),
        )
        return {"offsets": {str(p): o for p, o in targets.items()}}

    # ------------------------------------------------------------ security

    async def security(self, session: ConsoleSession, request: Request) -> Any:
        shown = await security_admin.overview(session)
        response = await cluster_reads.metadata(session, [])
        permissions = cluster_reads.cluster_permissions(response)
        shown["may_alter"] = permissions["alter_cluster"]
        shown["may_alter_quotas"] = permissions["alter_cluster_configs"]
        return shown

    async def set_user(self, session: ConsoleSession, request: Request) -> Any:
        body = await _json_body(request)
        user = str(body.get("user", ""))
        await security_admin.set_user(
            session,
            user,
            str(body.get("password", "")),
            str(body.get("mechanism", "SCRAM-SHA-256")),
        )
        return {"user": user}

    async def delete_user(self, session: ConsoleSession, request: Request) -> Any:
        user = request.path_params["user"]
        if request.query_params.get("confirm") != user:
            raise ClientError("confirm the deletion by giving the user's name")
        mechanism = request.query_params.get("mechanism") or None
        return {
            "deleted": user,
            "mechanisms": await security_admin.delete_user(session, user, mechanism),
        }

    async def add_acl(self, session: ConsoleSession, request: Request) -> Any:
        await security_admin.add_acl(session, await _json_body(request))
        return {"added": 1}

    async def remove_acl(self, session: ConsoleSession, request: Request) -> Any:
        return {"removed": await security_admin.remove_acl(session, await _json_body(request))}

    async def set_quota(self, session: ConsoleSession, request: Request) -> Any:
        await security_admin.set_quota(session, await _json_body(request))
        return {"set": True}
