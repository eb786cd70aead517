"""Executors against a real fake agent on loopback: request shape, outcomes, evidence."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import logging
import random
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from aiohttp import web

from agentclash_site.lib.outbound import OutboundClient
from agentclash_site.lib.signing import verify_signature
from runs.deployment_config import DeploymentConfig
from runs.executors import (
    AssetLink,
    AttemptCategory,
    CaseInfo,
    CaseInputInfo,
    ChallengeInfo,
    DeploymentTarget,
    ExecutionRequest,
    NotExecutable,
    executor_for,
)
from runs.executors.attempts import run_attempts
from runs.executors.base import EXCERPT_BYTES, MAX_ERROR_CHARS
from tests.fakes.agent_server import (
    FakeAgent,
    MiB,
    chat_ok,
    hang,
    huge,
    invalid_json,
    non_protocol_json,
    ok,
    rate_limited,
    raw,
    redirect,
    server_error,
    wire,
)
from tests.fakes.network import loopback_only
from tests.processes import free_port

SECRET = "sk-test-SECRET-do-not-leak-1234"
SIGNING_KEY = "acsk_test-signing-key"


@pytest.fixture
def agent():
    with FakeAgent() as fake:
        yield fake


def target(url: str, **overrides) -> DeploymentTarget:
    fields = dict(
        kind="hosted_http",
        url=url,
        secret=SECRET,
        signing_key=SIGNING_KEY,
        timeout_seconds=5,
        allow_private=True,
        config=DeploymentConfig(),
        name="careful",
    )
    fields.update(overrides)
    return DeploymentTarget(**fields)


def make_request(deployment: DeploymentTarget, **overrides) -> ExecutionRequest:
    fields = dict(
        run_id="11111111-1111-1111-1111-111111111111",
        item_id="22222222-2222-2222-2222-222222222222",
        attempt=1,
        deadline=datetime.now(UTC) + timedelta(minutes=5),
        challenge=ChallengeInfo(
            key="word-problem",
            title="Word problem",
            category="math",
            difficulty="medium",
            instructions="A crate holds 12 apples. How many apples are in 3 crates?",
        ),
        case=CaseInfo(
            key="crates",
            payload={"crates": 3},
            inputs=(CaseInputInfo(key="question", kind="text", value="How many?"),),
            assets=(AssetLink(key="sheet", path="data/sheet.csv", media_type="text/csv", url="http://x/a"),),
        ),
        deployment=deployment,
        tool_policy={"allow_shell": False},
        execution_mode="native",
    )
    fields.update(overrides)
    return ExecutionRequest(**fields)


def execute(request: ExecutionRequest, **client_options):
    async def go():
        async with OutboundClient(**client_options) as client:
            return await executor_for(request.deployment.kind).execute(request, client=client)

    return asyncio.run(go())


def keys_anywhere(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_anywhere(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_anywhere(v)}
    return set()


# --- hosted_http: the request ------------------------------------------------------------


def test_hosted_http_sends_the_protocol_request_exactly(agent):
    # The item's deadline comes before its attempt's timeout: it is the deadline_at.
    request = make_request(target(agent.url, timeout_seconds=600))
    outcome = execute(request)
    assert outcome.category == AttemptCategory.OK
    sent = agent.requests[0]
    assert sent.method == "POST"
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.json == {
        "protocol_version": "1",
        "run_id": "11111111-1111-1111-1111-111111111111",
        "item_id": "22222222-2222-2222-2222-222222222222",
        "attempt": 1,
        "deadline_at": request.deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "challenge": {
            "key": "word-problem",
            "title": "Word problem",
            "category": "math",
            "difficulty": "medium",
            "instructions": "A crate holds 12 apples. How many apples are in 3 crates?",
        },
        "case": {
            "key": "crates",
            "payload": {"crates": 3},
            "inputs": [{"key": "question", "kind": "text", "value": "How many?"}],
            "assets": [
                {"key": "sheet", "path": "data/sheet.csv", "media_type": "text/csv", "url": "http://x/a"}
            ],
        },
        "tool_policy": {"allow_shell": False},
    }
    assert "expectations" not in keys_anywhere(sent.json)


def _sent_deadline(recorded) -> datetime:
    return datetime.strptime(recorded.json["deadline_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def test_deadline_at_is_when_the_attempt_is_given_up_not_the_end_of_all_its_retries(agent):
    # The item's deadline covers every attempt (3 x 5 s and the backoffs); the agent was told
    # it, and so planned for 18 s where it was cut off, as a timeout, after 5.
    agent.default = server_error(503)
    request = make_request(target(agent.url, timeout_seconds=5, max_attempts=3))
    request = dataclasses.replace(request, deadline=datetime.now(UTC) + timedelta(seconds=18))
    before = datetime.now(UTC).replace(microsecond=0)
    drive(request)
    after = datetime.now(UTC)
    assert [r.json["attempt"] for r in agent.requests] == [1, 2, 3]
    for sent in agent.requests:
        assert before + timedelta(seconds=5) <= _sent_deadline(sent) <= after + timedelta(seconds=5)
        assert _sent_deadline(sent) < request.deadline - timedelta(seconds=1)


def test_a_case_timeout_sets_the_deadline_at_of_its_attempts(agent):
    request = make_request(target(agent.url, timeout_seconds=5), timeout_seconds=60.0)
    before = datetime.now(UTC).replace(microsecond=0)
    execute(request)
    after = datetime.now(UTC)
    assert (
        before + timedelta(seconds=60) <= _sent_deadline(agent.requests[0]) <= after + timedelta(seconds=60)
    )


def test_hosted_http_authenticates_and_signs_the_exact_body(agent):
    execute(make_request(target(agent.url)))
    sent = agent.requests[0]
    assert sent.headers["Authorization"] == f"Bearer {SECRET}"
    assert verify_signature(sent.body, SIGNING_KEY, sent.headers["X-AgentClash-Signature"])


def test_without_a_key_or_secret_the_headers_are_omitted(agent):
    execute(make_request(target(agent.url, secret=None, signing_key=None)))
    headers = agent.requests[0].headers
    assert "Authorization" not in headers
    assert "X-AgentClash-Signature" not in headers


def test_extra_headers_are_sent_and_the_secret_can_use_its_own_header(agent):
    config = DeploymentConfig(extra_headers={"X-Team": "evals"}, secret_header="api-key")
    execute(make_request(target(agent.url, config=config)))
    headers = agent.requests[0].headers
    assert headers["X-Team"] == "evals"
    assert headers["api-key"] == SECRET
    assert "Authorization" not in headers


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        ({"secret": "sk-VALUE\x00x"}, "the deployment's secret"),
        ({"secret": "sk-VALUE\x7fx"}, "the deployment's secret"),
        ({"config": DeploymentConfig(extra_headers={"X-Team": "VALUE\x01x"})}, "extra header X-Team"),
        (
            {
                "kind": "openai_chat",
                "model": "m",
                "config": DeploymentConfig(extra_headers={"X-T": "VALUE\x1bx"}),
            },
            "extra header X-T",
        ),
    ],
)
def test_a_header_value_http_cannot_carry_is_a_config_error_naming_it_without_a_call(agent, overrides, names):
    # Creation refuses only CR and LF; any other control character made the HTTP layer raise
    # inside the call, and every attempt of every case ended "AgentClash failed on this
    # attempt (ValueError: Forbidden control character ...); please report it".
    outcomes, _ = drive(make_request(target(agent.url, max_attempts=3, **overrides)))
    assert [(o.category, o.error_code) for o in outcomes] == [("config_error", "invalid_header")]
    assert names in outcomes[0].error
    assert "control character" in outcomes[0].error
    assert "VALUE" not in outcomes[0].error  # never the value itself
    assert agent.calls == 0


def test_an_input_without_a_value_is_sent_without_one(agent):
    case = CaseInfo(key="c", inputs=(CaseInputInfo(key="doc", kind="file", artifact_key="sheet"),))
    execute(make_request(target(agent.url), case=case))
    assert agent.requests[0].json["case"]["inputs"] == [
        {"key": "doc", "kind": "file", "artifact_key": "sheet"}
    ]


# --- hosted_http: outcomes -----------------------------------------------------------------


def test_a_valid_body_is_ok_with_evidence_and_timing(agent):
    agent.default = ok(
        {
            "final_output": "36",
            "tool_calls": [{"name": "calculator", "args": {"expr": "12*3"}, "result": "36"}],
            "metrics": {"input_tokens": 10, "output_tokens": 2},
            "custom": "kept",
        }
    )
    outcome = execute(make_request(target(agent.url)))
    assert outcome.category == AttemptCategory.OK
    assert outcome.status_code == 200
    assert outcome.latency_ms > 0
    assert outcome.response["custom"] == "kept"
    evidence = outcome.evidence
    assert evidence.final_output == "36"
    assert [c.name for c in evidence.tool_calls] == ["calculator"]
    assert evidence.metrics.input_tokens == 10
    assert evidence.timing.started_at.endswith("Z")
    assert evidence.timing.executor_duration_seconds > 0
    assert evidence.rendered_prompt.instructions.startswith("A crate holds")
    assert evidence.rendered_prompt.system is None


def test_black_box_deployments_report_no_tool_or_file_channels(agent):
    agent.default = ok({"final_output": "x", "tool_calls": [{"name": "t", "args": {}}]})
    outcome = execute(make_request(target(agent.url, evidence_level="black_box")))
    assert outcome.evidence.channels.tool_calls is False
    assert outcome.evidence.channels.files is False
    assert outcome.evidence.tool_calls == []


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_an_infra_error_with_an_excerpt(agent, status):
    agent.default = server_error(status, '{"error": "database down"}')
    outcome = execute(make_request(target(agent.url)))
    assert outcome.category == AttemptCategory.INFRA_ERROR
    assert outcome.retryable
    assert outcome.status_code == status
    assert "database down" in outcome.body_excerpt
    assert outcome.evidence is None


def test_429_is_an_infra_error_carrying_retry_after(agent):
    agent.queue(rate_limited("7"), rate_limited("Wed, 21 Oct 2099 07:28:00 GMT"))
    first = execute(make_request(target(agent.url)))
    assert (first.category, first.status_code, first.error_code) == ("infra_error", 429, "rate_limited")
    assert first.retry_after == 7.0
    second = execute(make_request(target(agent.url)))
    assert second.retry_after > 1e9 / 1000  # an HTTP-date far in the future, in seconds


def test_a_408_request_timeout_is_an_infra_error_retried_like_a_timeout(agent):
    # A server or proxy that gave up waiting for the request (nginx's client_body_timeout):
    # a timeout (agent-protocol.md Outcomes), which was a config_error, never retried.
    agent.queue(server_error(408, "<html>408 Request Time-out</html>"), ok())
    outcomes, waits = drive(make_request(target(agent.url, max_attempts=3)))
    assert [(o.category, o.status_code) for o in outcomes] == [("infra_error", 408), ("ok", 200)]
    assert outcomes[0].error_code == "request_timeout" and "408" in outcomes[0].error
    assert len(waits) == 1


def test_a_slow_agent_times_out_as_an_infra_error(agent):
    agent.default = hang()
    outcome = execute(make_request(target(agent.url, timeout_seconds=0.3)))
    assert outcome.category == AttemptCategory.INFRA_ERROR
    assert outcome.error_code == "timeout"
    assert outcome.latency_ms < 5000


def test_the_deadline_shortens_the_timeout(agent):
    agent.default = hang()
    request = make_request(
        target(agent.url, timeout_seconds=120), deadline=datetime.now(UTC) + timedelta(seconds=0.3)
    )
    outcome = execute(request)
    assert outcome.error_code == "timeout"


def test_a_passed_deadline_is_an_infra_error_without_a_call(agent):
    outcome = execute(make_request(target(agent.url), deadline=datetime.now(UTC) - timedelta(seconds=1)))
    assert (outcome.category, outcome.error_code) == ("infra_error", "deadline_passed")
    assert agent.calls == 0


def test_a_refused_connection_is_an_infra_error():
    outcome = execute(make_request(target(f"http://127.0.0.1:{free_port()}/agent")))
    assert (outcome.category, outcome.error_code) == ("infra_error", "connection_failed")


def _dns_failing(errno: int):
    async def getaddrinfo(host: str, port: int):  # injected: no DNS traffic
        raise socket.gaierror(errno, "fake resolver")

    return getaddrinfo


def test_a_host_name_that_does_not_exist_is_a_config_error_not_retried():
    # A typo'd host (NXDOMAIN) was "could not resolve" (infra_error), retried max_attempts
    # times with backoff and counted as an infrastructure failure; it will never pass.
    request = make_request(target("http://agent.example.invalid/agent", max_attempts=3))

    async def go():
        async with OutboundClient(getaddrinfo=_dns_failing(socket.EAI_NONAME)) as client:
            return await run_attempts(
                executor_for("hosted_http"), request, client=client, rng=random.Random(1), sleep=_no_sleep
            )

    with loopback_only() as attempts:
        outcomes = asyncio.run(go())
    assert attempts == []
    assert [(o.category, o.error_code) for o in outcomes] == [("config_error", "host_not_found")]
    assert "agent.example.invalid does not resolve" in outcomes[0].error


def test_a_resolver_that_cannot_answer_now_is_still_a_retried_infra_error():
    request = make_request(target("http://agent.example.invalid/agent", max_attempts=2))
    outcome = execute(request, getaddrinfo=_dns_failing(socket.EAI_AGAIN))
    assert (outcome.category, outcome.error_code) == ("infra_error", "connection_failed")


async def _no_sleep(seconds: float) -> None:
    return None


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        (invalid_json(), "invalid_json"),
        (raw(b"<html>oops</html>", content_type="text/html"), "invalid_json"),
        (non_protocol_json({"answer": 42}), "missing_final_output"),
        (non_protocol_json([1, 2]), "not_protocol"),
        (
            ok(
                {
                    "final_output": "x",
                    "invocations": [{"tool_calls": []}],
                    "tool_calls": [{"name": "a", "args": {}}],
                }
            ),
            "invocations_with_tool_calls",
        ),
        (ok({"final_output": "x", "messages": "not a list"}), "protocol_error"),
        (server_error(404, "no such route"), "http_status"),
        (server_error(401, "bad token"), "http_status"),
        (server_error(422, "{}"), "http_status"),
    ],
)
def test_bodies_that_are_not_the_protocols_are_config_errors(agent, behaviour, code):
    agent.default = behaviour
    outcome = execute(make_request(target(agent.url)))
    assert outcome.category == AttemptCategory.CONFIG_ERROR
    assert outcome.error_code == code
    assert not outcome.retryable
    assert outcome.error


def _encoded(body: bytes, encoding: str):
    async def behaviour(request, recorded, agent):
        headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
        return web.Response(body=body, headers=headers)

    return behaviour


@pytest.mark.parametrize(
    ("behaviour", "says"),
    [
        (raw(b"", status=200), "the response body is empty"),
        (raw(b"", status=204), "the response body is empty"),
        (raw(b"<html>Bad gateway</html>", content_type="text/html"), "not JSON (Content-Type text/html)"),
        (raw('{"final_output": "café"}'.encode("latin-1")), "not UTF-8"),
        # json.loads(bytes) reads UTF-16 and UTF-32 by itself: such a body was graded.
        (raw('{"final_output": "36"}'.encode("utf-16")), "not UTF-8"),
        (raw('{"final_output": "36"}'.encode("utf-16-le")), "not UTF-8"),
        (raw('{"final_output": "36"}'.encode("utf-32")), "not UTF-8"),
        (invalid_json(), "the response body is not JSON"),
    ],
)
def test_a_body_that_is_not_json_says_what_it_is(agent, behaviour, says):
    # Each was "the response body is not JSON", an empty excerpt beside it for the first two.
    agent.default = behaviour
    outcome = execute(make_request(target(agent.url)))
    assert (outcome.category, outcome.error_code) == ("config_error", "invalid_json")
    assert says in outcome.error


def test_a_utf8_reply_with_a_byte_order_mark_is_graded(agent):
    # RFC 8259 lets a parser ignore the mark; refusing UTF-16 must not refuse it.
    agent.default = raw('\ufeff{"final_output": "36"}'.encode())
    outcome = execute(make_request(target(agent.url)))
    assert outcome.ok and outcome.evidence.final_output == "36"


def test_a_gzip_reply_sent_though_identity_was_asked_for_is_graded(agent):
    # It was the config_error "the response body is not JSON", its excerpt gzip bytes.
    agent.default = _encoded(gzip.compress(b'{"final_output": "36"}'), "gzip")
    outcome = execute(make_request(target(agent.url)))
    assert outcome.ok and outcome.evidence.final_output == "36"
    assert outcome.body_excerpt == '{"final_output": "36"}'


@pytest.mark.parametrize(("encoding", "body"), [("br", b"\x0b\x02\x80{}\x03"), ("gzip", b"\x1f\x8b broken")])
def test_an_error_page_in_an_encoding_we_cannot_read_is_still_its_statuss_infra_error(agent, encoding, body):
    async def behaviour(request, recorded, agent):
        return web.Response(status=503, body=body, headers={"Content-Encoding": encoding})

    agent.default = behaviour
    outcome = execute(make_request(target(agent.url)))
    assert (outcome.category, outcome.status_code, outcome.error_code) == ("infra_error", 503, "server_error")


def test_a_reply_in_an_encoding_we_cannot_read_is_a_config_error_naming_it(agent):
    agent.default = _encoded(b"\x0b\x02\x80{}\x03", "br")
    outcome = execute(make_request(target(agent.url)))
    assert (outcome.category, outcome.error_code) == (AttemptCategory.CONFIG_ERROR, "undecodable_body")
    assert "Content-Encoding br" in outcome.error
    assert outcome.status_code == 200  # was None: the status line had been read


def _drip(opening: bytes):
    """A 200 that sends ``opening``, then one more byte every 20 ms until the client leaves."""

    async def behaviour(request, recorded, agent):
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(opening)
        try:
            for _ in range(3000):  # 60 s: far past every timeout below
                await asyncio.sleep(0.02)
                await response.write(b"x")
                agent.bytes_sent += 1
        except (ConnectionError, RuntimeError):
            pass  # the client gave up: what the test wants
        return response

    return behaviour


@pytest.mark.parametrize("kind", ["hosted_http", "openai_chat"])
def test_a_reply_that_drips_in_is_cut_at_its_timeout_and_shows_what_came(agent, kind):
    # Bytes keep arriving, so no gap between reads is long: only the attempt's own timeout
    # ends it. The attempt says it got a 200 and shows the start of the body (it said neither).
    agent.default = _drip(b'{"final_output": "')
    deployment = target(agent.url, timeout_seconds=0.5, kind=kind, model="m")
    outcome = execute(make_request(deployment))
    assert (outcome.category, outcome.error_code) == ("infra_error", "timeout")
    assert outcome.retryable
    assert outcome.status_code == 200
    assert outcome.body_excerpt.startswith('{"final_output": "x')
    agent.wait_idle(timeout=20)  # the server saw the client leave, long before its 60 s


def test_a_drip_past_the_items_deadline_is_cut_there_and_not_retried(agent):
    agent.default = _drip(b'{"final_output": "')
    request = make_request(
        target(agent.url, timeout_seconds=120, max_attempts=3),
        deadline=datetime.now(UTC) + timedelta(seconds=0.5),
    )
    outcomes, waits = drive(request)
    assert [(o.category, o.error_code) for o in outcomes] == [("infra_error", "timeout")]
    assert waits == []
    agent.wait_idle(timeout=20)


def test_a_2xx_body_cut_short_is_a_retried_infra_error_showing_what_came(agent):
    agent.default = wire(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        b'{"final_output": "par'
    )
    outcome = execute(make_request(target(agent.url)))
    assert (outcome.category, outcome.error_code) == ("infra_error", "connection_failed")
    assert "cut off" in outcome.error
    assert (outcome.status_code, outcome.body_excerpt) == (200, '{"final_output": "par')


def test_a_50_mb_body_is_a_config_error_and_is_not_read_whole(agent):
    agent.default = huge(50 * MiB, declare_length=False)
    outcome = execute(make_request(target(agent.url, timeout_seconds=30)))
    assert (outcome.category, outcome.error_code) == ("config_error", "response_too_large")
    # The status and the start of what was read are stored like any attempt's (both were empty).
    assert outcome.status_code == 200
    assert outcome.body_excerpt == " " * EXCERPT_BYTES
    agent.wait_idle(timeout=20)
    assert agent.bytes_sent < 25 * MiB


@pytest.mark.parametrize("declare_length", [True, False])
@pytest.mark.parametrize(("status", "code"), [(503, "server_error"), (429, "rate_limited")])
def test_a_huge_error_page_is_still_the_infra_error_its_status_says(agent, status, code, declare_length):
    # Only its excerpt is kept, yet the whole body was held to the 10 MiB cap of a reply:
    # past it, a 503 became the config_error response_too_large and was never retried.
    agent.default = huge(50 * MiB, status=status, declare_length=declare_length)
    outcome = execute(make_request(target(agent.url, timeout_seconds=30)))
    assert (outcome.category, outcome.status_code, outcome.error_code) == ("infra_error", status, code)
    assert outcome.body_excerpt == " " * EXCERPT_BYTES
    agent.wait_idle(timeout=20)
    assert agent.bytes_sent < 25 * MiB


def test_an_endpoint_on_a_private_address_is_refused_in_a_workspace_without_private_endpoints():
    request = make_request(target("http://10.0.0.1:8080/agent", allow_private=False))
    with loopback_only() as attempts:
        outcome = execute(request)
    assert (outcome.category, outcome.error_code) == ("config_error", "blocked_address")
    assert "10.0.0.1" in outcome.error
    assert attempts == []


def test_loopback_is_refused_without_allow_private_and_reached_with_it(agent):
    refused = execute(make_request(target(agent.url, allow_private=False)))
    assert refused.error_code == "blocked_address"
    assert agent.calls == 0
    assert execute(make_request(target(agent.url, allow_private=True))).ok


def test_a_redirect_to_the_metadata_service_is_refused(agent):
    agent.default = redirect("http://169.254.169.254/latest/meta-data/")
    with loopback_only() as attempts:
        outcome = execute(make_request(target(agent.url)))
    assert (outcome.category, outcome.error_code) == ("config_error", "blocked_address")
    assert attempts == []


def test_a_redirect_to_another_loopback_url_is_followed_with_the_body(agent):
    agent.route("/old", redirect(agent.url, status=308))
    outcome = execute(make_request(target(agent.url_for("/old"))))
    assert outcome.ok
    assert agent.requests[-1].path == "/agent"
    assert verify_signature(
        agent.requests[-1].body, SIGNING_KEY, agent.requests[-1].headers["X-AgentClash-Signature"]
    )


def test_one_timeout_bounds_every_hop_of_a_redirect_chain(agent):
    # Each hop answers at once, the last one drips: the attempt's timeout covers the chain as
    # a whole, and the status stored is the final answer's, not a redirect's.
    agent.route("/a", redirect(agent.url_for("/b"), status=307))
    agent.route("/b", redirect(agent.url_for("/c"), status=308))
    agent.route("/c", _drip(b'{"final_output": "'))
    outcome = execute(make_request(target(agent.url_for("/a"), timeout_seconds=0.5)))
    assert (outcome.category, outcome.error_code, outcome.status_code) == ("infra_error", "timeout", 200)
    assert [r.path for r in agent.requests] == ["/a", "/b", "/c"]
    agent.wait_idle(timeout=20)


def test_a_redirect_loop_is_a_config_error_not_retried(agent):
    agent.route("/a", redirect(agent.url_for("/b"), status=307))
    agent.route("/b", redirect(agent.url_for("/a"), status=307))
    outcomes, waits = drive(make_request(target(agent.url_for("/a"), max_attempts=3)))
    assert [(o.category, o.error_code, o.status_code) for o in outcomes] == [
        ("config_error", "too_many_redirects", None)
    ]
    assert waits == [] and agent.calls == 6  # the first request and 5 redirects


@pytest.mark.parametrize("kind", ["hosted_http", "openai_chat"])
@pytest.mark.parametrize("status", [307, 308])
def test_a_cross_origin_redirect_drops_every_deployment_credential(agent, kind, status):
    # Only Authorization, cookies and the secret header were dropped: an x-api-key in
    # extra_headers (and the request's signature) went on to whatever origin the agent named.
    config = DeploymentConfig(extra_headers={"x-api-key": "k-EXTRA-credential", "X-Team": "evals"})
    with FakeAgent() as other:
        other.default = chat_ok("36") if kind == "openai_chat" else ok({"final_output": "x"})
        agent.default = chat_ok("36") if kind == "openai_chat" else ok({"final_output": "x"})
        agent.route(
            "/same/chat/completions", redirect(agent.url_for("/here/chat/completions"), status=status)
        )
        agent.route(
            "/away/chat/completions", redirect(other.url_for("/there/chat/completions"), status=status)
        )
        for where in ("same", "away"):
            url = (
                agent.url_for(f"/{where}")
                if kind == "openai_chat"
                else agent.url_for(f"/{where}/chat/completions")
            )
            assert execute(make_request(target(url, kind=kind, model="m", config=config))).ok
        kept = next(r for r in agent.requests if r.path.startswith("/here")).headers
        assert (kept["x-api-key"], kept["X-Team"], kept["Authorization"]) == (
            "k-EXTRA-credential",
            "evals",
            f"Bearer {SECRET}",
        )
        sent = other.requests[-1].headers
        away = next(r for r in agent.requests if r.path.startswith("/away"))
        assert other.requests[-1].body == away.body  # 307/308 keep the body
    for name in ("x-api-key", "X-Team", "Authorization", "X-AgentClash-Signature"):
        assert name not in sent


# --- retries -------------------------------------------------------------------------------


def drive(request, *, seed=3):
    waits: list[float] = []

    async def record_sleep(seconds: float) -> None:
        waits.append(seconds)  # no real sleeping: the policy is what is under test

    async def go():
        async with OutboundClient() as client:
            return await run_attempts(
                executor_for(request.deployment.kind),
                request,
                client=client,
                rng=random.Random(seed),
                sleep=record_sleep,
            )

    return asyncio.run(go()), waits


def test_a_429_burst_is_retried_honouring_retry_after(agent):
    agent.queue(rate_limited("2"), rate_limited("3"), ok({"final_output": "done"}), case="crates")
    outcomes, waits = drive(make_request(target(agent.url, max_attempts=3)))
    assert [o.category for o in outcomes] == ["infra_error", "infra_error", "ok"]
    assert waits[0] >= 2 and waits[1] >= 3
    assert [r.json["attempt"] for r in agent.requests] == [1, 2, 3]


def test_a_503s_retry_after_is_honoured_too(agent):
    agent.queue(server_error(503, retry_after="5"), ok())
    outcomes, waits = drive(make_request(target(agent.url, max_attempts=3)))
    assert [o.category for o in outcomes] == ["infra_error", "ok"]
    assert outcomes[0].retry_after == 5.0 and waits == [5.0]


def test_a_retry_after_date_is_honoured_and_one_past_the_deadline_ends_the_item(agent):
    # Retry-After in its HTTP-date form, through the executor: a floor for the wait (the
    # jitter window is 1 s), and a date past the item's deadline means no retry at all.
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=40), usegmt=True)
    later = format_datetime(datetime.now(UTC) + timedelta(days=2), usegmt=True)
    agent.queue(rate_limited(soon), server_error(503, retry_after=later), ok())
    request = make_request(target(agent.url, max_attempts=3), deadline=datetime.now(UTC) + timedelta(hours=1))
    outcomes, waits = drive(request)
    assert [o.category for o in outcomes] == ["infra_error", "infra_error"]
    assert 30 < outcomes[0].retry_after <= 40 and waits == [outcomes[0].retry_after]
    assert outcomes[1].retry_after > 86400 and agent.calls == 2


def test_retries_stop_at_max_attempts(agent):
    agent.default = server_error(503)
    outcomes, waits = drive(make_request(target(agent.url, max_attempts=3)))
    assert [o.category for o in outcomes] == ["infra_error"] * 3
    assert len(waits) == 2
    assert agent.calls == 3
    assert all(0 <= w <= cap for w, cap in zip(waits, [1, 2], strict=True))


_INFRA_FAILURES = {
    "timeout": lambda agent: hang(),
    "server_error": lambda agent: server_error(502),
    "rate_limited": lambda agent: rate_limited(None),
    "request_timeout": lambda agent: server_error(408),
    "connection_failed": lambda agent: wire(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{"),
}


@pytest.mark.parametrize("code", list(_INFRA_FAILURES))
def test_each_infra_failure_of_the_outcomes_table_is_retried_up_to_max_attempts(agent, code):
    # agent-protocol.md "Outcomes": timeout, connection error, 5xx, 429 are infra_error, retried
    # up to max_attempts (which counts the first attempt), each wait within its jitter window.
    agent.default = _INFRA_FAILURES[code](agent)
    outcomes, waits = drive(make_request(target(agent.url, max_attempts=3, timeout_seconds=0.3)))
    assert [(o.category, o.error_code) for o in outcomes] == [("infra_error", code)] * 3
    assert len(waits) == 2 and 0 <= waits[0] <= 1 and 0 <= waits[1] <= 2
    assert [r.json["attempt"] for r in agent.requests] == [1, 2, 3]


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        (server_error(400, "bad request"), "http_status"),
        (server_error(409, "conflict"), "http_status"),
        (invalid_json(), "invalid_json"),
        (ok({"answer": 42}), "missing_final_output"),
        (ok(["final_output"]), "not_protocol"),
        (
            ok({"final_output": "x", "tool_calls": [{"name": "a"}], "invocations": [{"tool_calls": []}]}),
            "invocations_with_tool_calls",
        ),
        (huge(11 * MiB), "response_too_large"),
    ],
)
def test_each_config_failure_of_the_outcomes_table_is_tried_once(agent, behaviour, code):
    agent.default = behaviour
    outcomes, waits = drive(make_request(target(agent.url, max_attempts=3)))
    assert [(o.category, o.error_code) for o in outcomes] == [("config_error", code)]
    assert waits == [] and agent.calls == 1


def test_config_errors_are_not_retried(agent):
    agent.default = invalid_json()
    outcomes, waits = drive(make_request(target(agent.url, max_attempts=3)))
    assert [o.category for o in outcomes] == ["config_error"]
    assert waits == []


def test_no_retry_that_would_pass_the_deadline(agent):
    agent.default = rate_limited("600")
    request = make_request(
        target(agent.url, max_attempts=3), deadline=datetime.now(UTC) + timedelta(seconds=60)
    )
    outcomes, waits = drive(request)
    assert len(outcomes) == 1
    assert waits == []


# --- openai_chat -------------------------------------------------------------------------


def chat_target(agent, **overrides):
    return target(
        agent.base_url + "/v1",
        kind="openai_chat",
        model="gpt-test",
        config=DeploymentConfig(temperature=0.2, max_tokens=64, system_prompt="Answer with a number."),
        **overrides,
    )


def test_openai_chat_posts_model_messages_and_config_params(agent):
    agent.default = chat_ok("36")
    outcome = execute(make_request(chat_target(agent)))
    sent = agent.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.json == {
        "temperature": 0.2,
        "max_tokens": 64,
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": "A crate holds 12 apples. How many apples are in 3 crates?"},
        ],
    }
    assert sent.headers["Authorization"] == f"Bearer {SECRET}"
    assert outcome.ok
    assert outcome.evidence.final_output == "36"
    # What the evidence document records: the reply in the protocol's response shape.
    assert outcome.response["final_output"] == "36"
    assert [m["role"] for m in outcome.response["messages"]] == ["system", "user", "assistant"]
    assert outcome.response["metrics"]["model"]
    assert "choices" not in outcome.response


@pytest.mark.parametrize(
    "base", ["/openai/deployments/gpt?api-version=2024-06-01", "/v1/?team=evals&region=eu"]
)
def test_openai_chat_keeps_the_base_urls_query_after_the_path(agent, base):
    # Azure OpenAI's base URL carries ?api-version=: the path was appended to the query
    # ("?api-version=2024-06-01/chat/completions"), so every call went to the wrong place.
    agent.default = chat_ok("36")
    path, _, query = base.partition("?")
    outcome = execute(make_request(target(agent.url_for(base), kind="openai_chat", model="m")))
    assert outcome.ok
    assert agent.requests[0].path == path.rstrip("/") + "/chat/completions"
    assert agent.requests[0].query == query


def test_openai_chat_evidence_has_usage_transcript_and_unexecuted_tool_calls(agent):
    agent.default = chat_ok(
        None,
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": "apples"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "broken", "arguments": "{not json"}},
        ],
        usage={"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35},
    )
    outcome = execute(make_request(chat_target(agent)))
    evidence = outcome.evidence
    assert evidence.final_output == ""
    assert [(c.name, c.args) for c in evidence.tool_calls][0] == ("lookup", {"q": "apples"})
    assert evidence.tool_calls[1].args == {}
    assert agent.calls == 1  # recorded, not executed
    assert (evidence.metrics.input_tokens, evidence.metrics.output_tokens, evidence.metrics.total_tokens) == (
        30,
        5,
        35,
    )
    assert [m.role for m in evidence.messages] == ["system", "user", "assistant"]
    assert evidence.rendered_prompt.system == "Answer with a number."
    assert evidence.channels.files is False


def test_openai_chat_reads_token_counts_as_hosted_http_does(agent):
    # 7.0 was dropped (not an int) while hosted_http took it; 1.9 is no count for either.
    agent.default = chat_ok("3", usage={"prompt_tokens": 7.0, "completion_tokens": 1.9, "total_tokens": "9"})
    metrics = execute(make_request(chat_target(agent))).evidence.metrics
    assert (metrics.input_tokens, metrics.output_tokens, metrics.total_tokens) == (7, None, 9)


@pytest.mark.parametrize("reported", [{"name": "gpt"}, 5, ["gpt"], "", None])
def test_openai_chat_a_reply_model_that_is_no_name_leaves_the_deployments(agent, reported):
    # A dict was recorded as the model "{'name': 'gpt'}" (its Python repr), a number as "5".
    agent.default = chat_ok("3", model=reported)
    metrics = execute(make_request(chat_target(agent))).evidence.metrics
    assert metrics.model == "gpt-test"


def test_openai_chat_marks_a_length_cut_as_a_limit_hit(agent):
    agent.default = chat_ok("3", finish_reason="length")
    assert execute(make_request(chat_target(agent))).evidence.limit_hit is True


@pytest.mark.parametrize(
    "body",
    [
        {"id": "x"},
        {"choices": []},
        {"choices": [{"text": "legacy"}]},
        {"error": {"message": "model not found"}},
    ],
)
def test_openai_chat_replies_without_a_message_are_config_errors(agent, body):
    agent.default = ok(body)
    outcome = execute(make_request(chat_target(agent)))
    assert (outcome.category, outcome.error_code) == ("config_error", "not_chat_completion")


@pytest.mark.parametrize(
    ("tool_calls", "says"),
    [
        ({"id": "a", "function": {"name": "f"}}, "tool_calls must be an array"),
        ("f(1)", "tool_calls must be an array"),
        (["f"], "tool_calls[0] must be an object"),
        ([{"id": "a", "function": {"arguments": "{}"}}], "tool_calls[0] has no function name"),
        ([{"id": "a", "function": {"name": 7}}], "tool_calls[0] has no function name"),
    ],
)
def test_openai_chat_tool_calls_of_the_wrong_shape_are_config_errors_not_dropped(agent, tool_calls, says):
    # They were dropped without a word: a case expecting the call failed as if the model had
    # not made it (an endpoint's fault counted as the agent's).
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    agent.default = ok({"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]})
    outcome = execute(make_request(chat_target(agent)))
    assert (outcome.category, outcome.error_code) == ("config_error", "not_chat_completion")
    assert says in outcome.error


def test_openai_chat_rate_limits_are_infra_errors(agent):
    agent.default = rate_limited("1")
    assert execute(make_request(chat_target(agent))).category == AttemptCategory.INFRA_ERROR


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]},
    ],
)
def test_openai_chat_a_refusal_is_the_models_answer_not_an_empty_one(agent, message):
    # OpenAI sends a refusal with content null (or as a refusal content part): the text was
    # dropped and the case graded against "" as if the model had answered nothing.
    agent.default = ok({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})
    outcome = execute(make_request(chat_target(agent)))
    assert outcome.category == "ok"
    assert outcome.evidence.final_output == "I can't help with that."
    assistant = outcome.evidence.messages[-1]
    assert (assistant.role, assistant.content) == ("assistant", "I can't help with that.")
    if message["content"] is None:
        assert outcome.response["messages"][-1]["attributes"] == {"refusal": True}


@pytest.mark.parametrize(
    ("error", "code"),
    [
        ({"code": 429, "message": "Rate limit exceeded: free-models-per-min"}, "rate_limited"),
        ({"code": "503", "message": "upstream overloaded"}, "server_error"),
        ({"type": "server_error", "message": "The server had an error"}, "server_error"),
        ({"code": "rate_limit_exceeded", "message": "slow down"}, "rate_limited"),
    ],
)
def test_a_200_carrying_a_rate_limit_or_server_error_is_retried_as_an_infra_error(agent, error, code):
    # Gateways (OpenRouter, LiteLLM) answer HTTP 200 with only {"error": {"code": 429}} when
    # the model behind them is rate limited or down. It was a config_error, never retried:
    # the case ended ungraded for a failure that passes.
    agent.queue(ok({"error": error}), chat_ok("36"))
    outcomes, waits = drive(make_request(chat_target(agent)))
    assert [(o.category, o.error_code) for o in outcomes] == [("infra_error", code), ("ok", "")]
    assert error["message"] in outcomes[0].error and len(waits) == 1


@pytest.mark.parametrize(
    "error", [{"code": 404, "message": "model not found"}, {"code": True}, {"code": "5000"}, "overloaded"]
)
def test_a_200_carrying_an_error_that_will_not_pass_stays_a_config_error(agent, error):
    agent.default = ok({"error": error})
    outcome = execute(make_request(chat_target(agent)))
    assert (outcome.category, outcome.error_code) == ("config_error", "not_chat_completion")


def _failed_generation(content, *, finish_reason="error", error=None):
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": finish_reason,
    }
    if error is not None:
        choice["error"] = error
    return ok({"id": "gen-1", "choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 3}})


@pytest.mark.parametrize(
    ("behaviour", "code", "says"),
    [
        (
            _failed_generation("The answer is", error={"code": 502, "message": "provider died"}),
            "server_error",
            "provider died",
        ),
        (
            _failed_generation("The answer is", error={"code": 429, "message": "slow down"}),
            "rate_limited",
            "slow down",
        ),
        (_failed_generation("The answer is"), "server_error", "stopped with an error"),
        (
            _failed_generation("", finish_reason="stop", error={"message": "upstream reset"}),
            "server_error",
            "upstream reset",
        ),
    ],
)
def test_a_generation_that_failed_upstream_is_retried_not_graded(agent, behaviour, code, says):
    # OpenRouter and other gateways answer HTTP 200 with finish_reason "error" (and the error on
    # the choice) when the model fails mid-generation: the partial text was graded as the
    # model's answer, and the case counted against it for a provider's failure.
    agent.queue(behaviour, chat_ok("36"))
    outcomes, waits = drive(make_request(chat_target(agent)))
    assert [(o.category, o.error_code) for o in outcomes] == [("infra_error", code), ("ok", "")]
    assert says in outcomes[0].error and outcomes[0].status_code == 200 and len(waits) == 1
    assert outcomes[1].evidence.final_output == "36"


def test_a_generation_that_failed_with_an_error_that_will_not_pass_is_a_config_error(agent):
    agent.default = _failed_generation("", error={"code": 400, "message": "context too long"})
    outcomes, _ = drive(make_request(chat_target(agent)))
    assert [(o.category, o.error_code) for o in outcomes] == [("config_error", "not_chat_completion")]
    assert "context too long" in outcomes[0].error


# --- trace_import and secrets ----------------------------------------------------------------


def test_trace_import_refuses_to_be_called():
    request = make_request(target("", kind="trace_import"))
    with pytest.raises(NotExecutable):
        execute(request)


def test_the_secret_and_signing_key_never_reach_reprs_or_logs(agent, caplog):
    agent.default = server_error(500)
    request = make_request(target(agent.url))
    with caplog.at_level(logging.DEBUG):
        outcome = execute(request)
    text = caplog.text + repr(request) + repr(outcome) + json.dumps(outcome.summary())
    assert SECRET not in text
    assert SIGNING_KEY not in text
    assert agent.requests[0].headers["Authorization"] == f"Bearer {SECRET}"


def test_requests_are_immutable_and_replace_makes_the_next_attempt(agent):
    request = make_request(target(agent.url))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.attempt = 2  # type: ignore[misc]
    assert dataclasses.replace(request, attempt=2).protocol_body()["attempt"] == 2


def test_request_bodies_are_compact_json_and_what_orjson_refuses_still_goes_out():
    import json as stdlib_json

    from runs.executors.base import _json_body

    payload = {"q": "é ✓", "n": [1, 2.5, None, True], "nested": {"a": {"b": []}}}
    assert (
        _json_body(payload) == stdlib_json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    )
    big = {"id": 123456789012345678901234567890}
    assert stdlib_json.loads(_json_body(big)) == big  # exact, through json
    assert stdlib_json.loads(_json_body({1: "x"})) == {"1": "x"}  # non-string keys, as json does
    assert _json_body({"x": float("nan")}) == b'{"x":null}'  # NaN is not JSON


# --- a reply that echoes the credentials ---------------------------------------------------


def _echo_credentials(recorded):
    return {"error": "unauthorized", "you_sent": dict(recorded.headers)}


@pytest.mark.parametrize("status", [401, 500])
def test_an_agent_echoing_the_secret_in_its_error_does_not_get_it_stored(agent, status):
    """The attempt's body excerpt and error are shown on the case page and the deployment
    page to every member, viewers included, who never see the secret otherwise."""
    agent.route("/agent", ok(_echo_credentials, status=status))
    outcomes, _ = drive(make_request(target(agent.url_for("/agent"), max_attempts=1)))
    shown = outcomes[-1].body_excerpt + outcomes[-1].error
    assert "unauthorized" in shown
    assert SECRET not in shown
    assert "[redacted]" in shown


def test_a_secret_in_a_custom_header_is_redacted_too(agent):
    agent.route("/agent", ok(_echo_credentials, status=403))
    deployment = target(
        agent.url_for("/agent"), max_attempts=1, config=DeploymentConfig(secret_header="api-key")
    )
    outcomes, _ = drive(make_request(deployment))
    assert SECRET not in outcomes[-1].body_excerpt


@pytest.mark.parametrize("shown", [4, 12, len(SECRET) - 1])
def test_a_secret_cut_by_the_excerpt_limit_is_redacted_too(agent, shown):
    # The excerpt is the body's first 2,048 bytes: a secret echoed across that limit was
    # stored (and shown to every member) up to the cut, "sk-test-SECR" of it.
    prefix = "Authorization: Bearer "
    body = "x" * (EXCERPT_BYTES - len(prefix) - shown) + prefix + SECRET + " and more"
    agent.route("/agent", raw(body, status=502, content_type="text/plain"))
    outcomes, _ = drive(make_request(target(agent.url_for("/agent"), max_attempts=1)))
    excerpt = outcomes[-1].body_excerpt
    assert excerpt.endswith(prefix + "[redacted]")
    assert SECRET[:shown] not in excerpt


def test_a_secret_cut_in_a_model_endpoints_error_message_is_redacted_too(agent):
    # The error message quotes at most 300 characters of the endpoint's own error.
    message = "y" * 290 + " key " + SECRET
    agent.default = ok({"error": {"message": message}})
    deployment = target(agent.url, kind="openai_chat", model="m", max_attempts=1)
    outcomes, _ = drive(make_request(deployment))
    assert outcomes[-1].error_code == "not_chat_completion"
    assert outcomes[-1].error.endswith(" key [redacted]")
    assert SECRET[:4] not in outcomes[-1].error


def test_an_error_quoting_a_huge_part_of_the_reply_is_bounded(agent):
    # The protocol error quoted the offending key whole: a reply with a 1 MB file path stored
    # a 1 MB error on the attempt (and on every case page that lists it).
    agent.default = ok({"final_output": "x", "files": {"A" * 1_000_000: 5}})
    outcomes, _ = drive(make_request(target(agent.url, max_attempts=1)))
    error = outcomes[-1].error
    assert (outcomes[-1].category, outcomes[-1].error_code) == ("config_error", "protocol_error")
    assert error.startswith("the response is not the protocol's: files['AAAA")
    assert len(error) == MAX_ERROR_CHARS and error.endswith("A […]")


@pytest.mark.parametrize("shown", [4, 12, len(SECRET) - 1])
def test_a_secret_cut_by_the_error_limit_is_redacted_too(agent, shown):
    prefix = "the response is not the protocol's: files['"
    key = "x" * (MAX_ERROR_CHARS - len(" […]") - len(prefix) - shown) + SECRET + "y" * 100
    agent.default = ok({"final_output": "x", "files": {key: 5}})
    outcomes, _ = drive(make_request(target(agent.url, max_attempts=1)))
    error = outcomes[-1].error
    assert error.endswith("x[redacted] […]")
    assert SECRET[:shown] not in error
