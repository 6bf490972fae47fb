"""The request pipeline's middleware, each with fake collaborators: the order the stages
run in, the ones that answer without the handler, and how failures become answers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from broker.errors import KafkaError
from broker.handlers.api_handler import ApiHandler, CloseConnection, Deferred, NoResponse, Outcome
from broker.handlers.kafka_apis import standard_middleware
from broker.handlers.middleware import Next, Stage, build_chain, then
from broker.handlers.middleware.authorization import ClusterActionAuthorization
from broker.handlers.middleware.client_quotas import ClientQuotas
from broker.handlers.middleware.deferred_answers import DeferredAnswers
from broker.handlers.middleware.error_mapping import ErrorMapping
from broker.handlers.middleware.principal import ListenerPrincipals
from broker.net.request import CLUSTER_PRINCIPAL, Request
from broker.protocol.error_codes import ErrorCode
from broker.protocol.messages import MetadataRequest, MetadataResponse
from broker.security.acl import AclOperation, ResourceType
from tests.handlers.request_factory import ALICE, make_request


@attrs.frozen
class Answer:
    """A response body that says how it was made."""

    error_code: int = 0
    principal: str = ""
    throttle_time_ms: int = 0

    def _replace(self, **changes: Any) -> Answer:
        return attrs.evolve(self, **changes)


class FakeHandler:
    api_key = 3
    min_version = 0
    max_version = 12

    def __init__(
        self, outcome: Callable[[Request], Outcome] | None = None, *, cluster_action: bool = False
    ) -> None:
        self._outcome = outcome or (lambda request: Answer(principal=request.context.principal))
        if cluster_action:
            self.cluster_action_from = 1
        self.calls = 0

    async def handle(self, request: Request) -> Any:
        self.calls += 1
        return self._outcome(request)

    def error_response(self, request: Request, error_code: int) -> Any:
        return Answer(error_code=error_code)


class NoErrorResponse(FakeHandler):
    def error_response(self, request: Request, error_code: int) -> Any:
        return None


def request(principal: str = ALICE, listener: str = "PLAINTEXT", version: int = 12) -> Request:
    made = make_request(MetadataRequest(topics=()), 3, version, principal=principal)
    made.context = attrs.evolve(made.context, listener_name=listener)
    return made


def fail(exc: Exception) -> Callable[[Request], Outcome]:
    def raising(request: Request) -> Outcome:
        raise exc

    return raising


# -- the chain ---------------------------------------------------------------------------


class Recorder:
    """Notes when it is entered and left; `answer` short-circuits."""

    def __init__(self, stage: Stage, trail: list[str], answer: Outcome = None) -> None:
        self.stage = stage
        self._trail = trail
        self._answer = answer

    def applies_to(self, handler: ApiHandler) -> bool:
        return True

    async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Outcome:
        self._trail.append(f"in {self.stage.name}")
        if self._answer is not None:
            return self._answer
        outcome = await call_next(request)
        self._trail.append(f"out {self.stage.name}")
        return outcome


async def test_middleware_runs_by_stage_whatever_the_order_it_was_registered_in() -> None:
    trail: list[str] = []
    registered = [Recorder(s, trail) for s in (Stage.AUTHORIZATION, Stage.PRINCIPAL, Stage.ERRORS)]
    await build_chain(FakeHandler(), registered)(request())
    assert trail == [
        "in PRINCIPAL",
        "in ERRORS",
        "in AUTHORIZATION",
        "out AUTHORIZATION",
        "out ERRORS",
        "out PRINCIPAL",
    ]


async def test_a_middleware_answering_itself_skips_the_inner_ones_and_the_handler() -> None:
    trail: list[str] = []
    handler = FakeHandler()
    chain = build_chain(
        handler,
        [Recorder(Stage.PRINCIPAL, trail), Recorder(Stage.QUOTAS, trail, Answer(error_code=99))],
    )
    assert await chain(request()) == Answer(error_code=99)
    assert trail == ["in PRINCIPAL", "in QUOTAS", "out PRINCIPAL"]
    assert handler.calls == 0


async def test_then_applies_to_a_deferred_answer_when_it_comes_and_to_its_early_answer() -> None:
    async def later() -> Outcome:
        return 1

    async def early() -> Outcome:
        return 2

    assert then(5, lambda x: x * 10) == 50
    deferred = then(Deferred(later, early), lambda x: x * 10)
    assert isinstance(deferred, Deferred) and deferred.early is not None
    assert (await deferred.wait(), await deferred.early()) == (10, 20)


# -- principal ---------------------------------------------------------------------------


async def test_an_internal_listener_gives_its_principal_to_every_request() -> None:
    chain = build_chain(FakeHandler(), [ListenerPrincipals({"cluster-peers": CLUSTER_PRINCIPAL})])
    answer = await chain(request(principal="User:ANONYMOUS", listener="cluster-peers"))
    assert answer == Answer(principal=CLUSTER_PRINCIPAL)
    assert await chain(request(principal=ALICE)) == Answer(principal=ALICE)


async def test_the_cluster_principal_is_refused_on_a_client_listener() -> None:
    handler = FakeHandler()
    chain = build_chain(handler, [ListenerPrincipals({"cluster-peers": CLUSTER_PRINCIPAL})])
    answer = await chain(request(principal=CLUSTER_PRINCIPAL, listener="SASL_PLAINTEXT"))
    assert isinstance(answer, CloseConnection)
    assert handler.calls == 0


# -- authorization -----------------------------------------------------------------------


class FakeAuthorizer:
    enabled = True

    def __init__(self, *allowed: str) -> None:
        self.allowed = set(allowed)
        self.asked: list[tuple[str, AclOperation, ResourceType]] = []

    def authorize(
        self, principal: str, host: str, operation: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        self.asked.append((principal, operation, rtype))
        return principal in self.allowed

    def authorize_by_resource_type(self, *args: Any) -> bool:
        raise AssertionError("not asked")

    def authorized_operations(self, *args: Any) -> int:
        raise AssertionError("not asked")


async def test_cluster_action_is_checked_from_the_handlers_first_version_that_needs_it() -> None:
    authorizer = FakeAuthorizer()
    handler = FakeHandler(cluster_action=True)
    chain = build_chain(handler, [ClusterActionAuthorization(authorizer)])
    denied = await chain(request(version=1))
    assert denied == Answer(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    assert handler.calls == 0
    assert authorizer.asked == [(ALICE, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)]
    assert await chain(request(version=0)) == Answer(principal=ALICE)  # v0 does not need it
    authorizer.allowed.add(ALICE)
    assert await chain(request(version=1)) == Answer(principal=ALICE)


async def test_the_cluster_principal_holds_cluster_action_without_an_acl() -> None:
    authorizer = FakeAuthorizer()
    trusting = ClusterActionAuthorization(authorizer, {CLUSTER_PRINCIPAL})
    chain = build_chain(FakeHandler(cluster_action=True), [trusting])
    assert await chain(request(CLUSTER_PRINCIPAL)) == Answer(principal=CLUSTER_PRINCIPAL)
    assert authorizer.asked == []


async def test_without_an_internal_listener_no_principal_is_trusted() -> None:
    """A single process has no internal listener: a client named like the cluster is not
    the cluster, and needs the ACL like anyone."""
    chain = build_chain(
        FakeHandler(cluster_action=True),
        [*standard_middleware(), ClusterActionAuthorization(FakeAuthorizer())],
    )
    denied = await chain(request(CLUSTER_PRINCIPAL))
    assert denied == Answer(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


def test_handlers_without_cluster_actions_are_not_wrapped_by_the_authorization() -> None:
    handler = FakeHandler()
    assert build_chain(handler, [ClusterActionAuthorization(FakeAuthorizer())]) == handler.handle


# -- error mapping -----------------------------------------------------------------------


async def test_an_exception_becomes_the_apis_error_response_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chain = build_chain(FakeHandler(fail(RuntimeError("bug"))), [ErrorMapping()])
    with caplog.at_level(logging.INFO):
        answer = await chain(request())
    assert answer == Answer(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
    assert [r.levelno for r in caplog.records] == [logging.ERROR]
    assert caplog.records[0].exc_info is not None


async def test_a_kafka_error_answers_its_own_code_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = KafkaError(ErrorCode.NOT_CONTROLLER, "elsewhere")
    chain = build_chain(FakeHandler(fail(error)), [ErrorMapping()])
    with caplog.at_level(logging.INFO):
        assert await chain(request()) == Answer(error_code=ErrorCode.NOT_CONTROLLER)
    assert [(r.levelno, r.exc_info) for r in caplog.records] == [(logging.INFO, None)]


async def test_an_api_without_an_error_response_closes_the_connection() -> None:
    chain = build_chain(NoErrorResponse(fail(RuntimeError("bug"))), [ErrorMapping()])
    assert isinstance(await chain(request()), CloseConnection)


async def test_a_deferred_answer_that_fails_becomes_the_error_response() -> None:
    async def broken() -> Outcome:
        raise RuntimeError("bug while waiting")

    chain = build_chain(FakeHandler(lambda r: Deferred(broken, broken)), [ErrorMapping()])
    deferred = await chain(request())
    assert isinstance(deferred, Deferred) and deferred.early is not None
    assert await deferred.wait() == Answer(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)
    assert await deferred.early() == Answer(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)


async def test_errors_of_the_middleware_inside_error_mapping_are_mapped_too() -> None:
    class Broken:
        stage = Stage.AUTHORIZATION

        def applies_to(self, handler: ApiHandler) -> bool:
            return True

        async def __call__(self, request: Request, handler: ApiHandler, call_next: Next) -> Any:
            raise RuntimeError("bug in a middleware")

    chain = build_chain(FakeHandler(), [Broken(), ErrorMapping()])
    assert await chain(request()) == Answer(error_code=ErrorCode.UNKNOWN_SERVER_ERROR)


# -- quotas ------------------------------------------------------------------------------


class FakeHooks:
    def __init__(self, throttle_ms: int = 0, fail: bool = False) -> None:
        self.throttle_ms = throttle_ms
        self.fail = fail
        self.before: list[Request] = []
        self.responses: list[Any] = []

    def before_handle(self, request: Request) -> None:
        self.before.append(request)

    def on_response(
        self, request: Request, outcome: Any, response_size: Callable[[Any], int]
    ) -> tuple[Any, int]:
        if self.fail:
            raise RuntimeError("bug in quota accounting")
        self.responses.append(outcome)
        if isinstance(outcome, MetadataResponse):
            assert response_size(outcome) > 0
        return outcome._replace(throttle_time_ms=self.throttle_ms), self.throttle_ms

    def on_sent(self, request: Request) -> Callable[[], None] | None:
        return lambda: None


class PassingHooks(FakeHooks):
    def on_response(
        self, request: Request, outcome: Any, response_size: Callable[[Any], int]
    ) -> tuple[Any, int]:
        return outcome, 0


async def test_quotas_record_the_answer_and_leave_the_throttle_on_the_request() -> None:
    hooks = FakeHooks(throttle_ms=300)
    made = request()
    answer = await build_chain(FakeHandler(), [ClientQuotas(hooks)])(made)
    assert answer == Answer(principal=ALICE, throttle_time_ms=300)
    assert hooks.before == [made]
    assert made.quota_throttle_ms == 300 and made.on_sent is not None


async def test_quotas_measure_a_response_by_encoding_it_once_for_the_api_layer() -> None:
    made = request()
    body = MetadataResponse()
    await build_chain(FakeHandler(lambda r: body), [ClientQuotas(FakeHooks())])(made)
    assert made.encoded_response is not None and made.encoded_response[0] == body


async def test_quotas_see_a_deferred_answer_when_it_comes() -> None:
    hooks = FakeHooks(throttle_ms=5)

    async def later() -> Outcome:
        return Answer(principal="later")

    made = request()
    deferred = await build_chain(FakeHandler(lambda r: Deferred(later)), [ClientQuotas(hooks)])(
        made
    )
    assert hooks.responses == []
    assert await deferred.wait() == Answer(principal="later", throttle_time_ms=5)
    assert hooks.responses == [Answer(principal="later")]


async def test_the_clusters_own_requests_are_exempt_from_quotas() -> None:
    hooks = FakeHooks(throttle_ms=300)
    made = request(CLUSTER_PRINCIPAL)
    assert await build_chain(FakeHandler(), [ClientQuotas(hooks)])(made) == Answer(
        principal=CLUSTER_PRINCIPAL
    )
    assert hooks.before == [] and made.quota_throttle_ms == 0


async def test_quota_accounting_failing_never_costs_the_answer() -> None:
    answer = await build_chain(FakeHandler(), [ClientQuotas(FakeHooks(fail=True))])(request())
    assert answer == Answer(principal=ALICE)


async def test_no_response_is_not_given_an_on_sent_hook() -> None:
    made = request()
    await build_chain(FakeHandler(lambda r: NoResponse()), [ClientQuotas(PassingHooks())])(made)
    assert made.on_sent is None


async def test_local_completion_is_stamped_when_the_handler_returns() -> None:
    seen: list[int] = []

    def outcome(request: Request) -> Outcome:
        seen.append(request.api_local_complete_ns)
        return Answer()

    made = request()
    await build_chain(FakeHandler(outcome), [ErrorMapping()])(made)
    assert seen == [0]
    assert made.api_local_complete_ns >= made.start_ns


# -- deferred answers --------------------------------------------------------------------


async def test_a_deferred_answer_is_given_when_it_comes_and_early_on_hurry(
    autojump_clock: trio.testing.MockClock,
) -> None:
    deferred_answers = DeferredAnswers()
    answered: list[tuple[float, Outcome]] = []

    async def in_an_hour() -> Outcome:
        await trio.sleep(3600)
        return "full"

    async def now() -> Outcome:
        return "early"

    async with trio.open_nursery() as nursery:
        await nursery.start(deferred_answers.run)
        start = trio.current_time()

        def answer(outcome: Outcome) -> None:
            answered.append((trio.current_time() - start, outcome))

        deferred_answers.start(request(), Deferred(in_an_hour), answer)
        deferred_answers.start(request(), Deferred(in_an_hour, now), answer)
        await trio.sleep(10)
        assert deferred_answers.waiting == 2
        deferred_answers.hurry()
        await trio.sleep(1)
        assert answered == [(10, "early")]
        await trio.sleep(3600)
        assert answered == [(10, "early"), (3600, "full")]
        assert deferred_answers.waiting == 0
        nursery.cancel_scope.cancel()


async def test_a_deferred_answer_that_escapes_the_error_mapping_closes_the_connection() -> None:
    deferred_answers = DeferredAnswers()
    answered: list[Outcome] = []

    async def broken() -> Outcome:
        raise RuntimeError("bug")

    async with trio.open_nursery() as nursery:
        await nursery.start(deferred_answers.run)
        deferred_answers.start(request(), Deferred(broken), answered.append)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert len(answered) == 1 and isinstance(answered[0], CloseConnection)
