"""The journey from deployments to a reviewed run with JavaScript disabled: every step works
with plain forms and links. Deployments of each kind are created (a refused one keeps what was
typed), tested and edited; a run starts from a published pack with an input set, two
deployments and repetitions; its page, which cannot poll, says to reload and offers the link
(it said nothing and showed "0 of N" forever); failed items are retried, the run re-scored,
another run cancelled through the confirmation page; a comparison that is still computing says
to reload too ("this page updates by itself" was not true without JavaScript)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect

import runs.services.runs
from runs import compare_tasks, result_tasks
from runs.compare_tasks import compute_comparison
from runs.models import Deployment, Run, RunComparison
from runs.result_tasks import compute_result_summary
from runs.seeding import seed_run
from runs.services.deployments import deployment_create
from tests.fakes.agent_server import FakeAgent, chat_ok, ok, server_error
from tests.runs.runfactory import drive, echo_answer, publish

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def no_js(personas: Any, chromium: Any, live_server: Any, monkeypatch: Any) -> Iterator[Any]:
    """The owner's page in a context without JavaScript; no broker (the test drives the work)."""
    monkeypatch.setattr(runs.services.runs, "enqueue_run", lambda *a, **k: None)
    monkeypatch.setattr(compare_tasks.compute_comparison, "delay", lambda *a: None)
    monkeypatch.setattr(result_tasks.compute_result_summary, "delay", lambda *a: None)
    context = chromium.new_context(base_url=live_server.url, java_script_enabled=False)
    context.set_default_timeout(10_000)
    client = Client()
    client.force_login(personas.owner)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
    try:
        yield context.new_page()
    finally:
        context.close()


def message(page: Any) -> Any:
    return page.locator(".messages")


def test_deployments_to_a_reviewed_run_without_javascript(personas, no_js):
    page = no_js
    ws = personas.workspace
    ws.allow_private_endpoints = True
    ws.save(update_fields=["allow_private_endpoints"])
    publish(ws, slug="echo", sets=2, cases=2)
    with FakeAgent() as agent:
        # hosted_http, tested by a plain form post, edited with the secret left blank
        page.goto("/deployments/new/")
        page.get_by_label("Name").fill("agent-a")
        page.get_by_label("Endpoint URL").fill(agent.url)
        page.get_by_label("Secret").fill("s3cret")
        page.get_by_role("button", name="Create deployment").click()
        expect(page.locator("#signing-key")).to_be_visible()
        page.get_by_role("button", name="Test connection").click()
        expect(page.locator("#test-result")).to_contain_text("ok")
        page.get_by_role("link", name="Edit").click()
        page.get_by_role("button", name="Save").click()
        expect(message(page)).to_contain_text("Deployment agent-a saved.")
        assert Deployment.objects.get(name="agent-a").has_secret

        # openai_chat, picked with the kind link; refused without a model, values kept
        page.goto("/deployments/new/")
        page.get_by_role("link", name="OpenAI-compatible chat model").click()
        page.get_by_label("Name").fill("model-b")
        page.get_by_label("Base URL").fill(agent.url_for("/v1"))
        page.get_by_role("button", name="Create deployment").click()
        expect(page.locator("#id_model_error")).to_contain_text("Model is required")
        expect(page.get_by_label("Name")).to_have_value("model-b")
        expect(page.get_by_label("Base URL")).to_have_value(agent.url_for("/v1"))
        page.locator("#id_model").fill("fake-model")
        page.get_by_role("button", name="Create deployment").click()
        agent.route("/v1/chat/completions", chat_ok("pong"))
        page.get_by_role("button", name="Test connection").click()
        expect(page.locator("#test-result")).to_contain_text("pong")

        page.goto("/deployments/new/?kind=trace_import")
        page.get_by_label("Name").fill("traces")
        page.get_by_role("button", name="Create deployment").click()
        expect(page.get_by_role("heading", name="traces")).to_be_visible()

        # a run: input set, two deployments, two repetitions
        page.goto("/runs/new/")
        page.get_by_label("Input set").select_option("set1")
        page.get_by_label("agent-a").check()
        page.get_by_label("model-b").check()
        page.get_by_label("Repetitions").fill("2")
        page.get_by_label("Name", exact=True).fill("nightly")
        page.get_by_role("button", name="Start the run").click()
        expect(page.locator("#run-status")).to_have_text("queued")
        run = Run.objects.get(name="nightly")
        assert (run.input_set.key, run.repetitions, run.lanes.count()) == ("set1", 2, 2)

        # no poll without JavaScript: the page says so and links itself
        reload = page.get_by_test_id("reload-progress")
        expect(reload).to_be_visible()
        agent.default = server_error(500)
        drive(run)
        reload.get_by_role("link", name="reload this page").click()
        expect(page.locator("#run-status")).to_have_text("completed")
        expect(page.get_by_test_id("reload-progress")).to_have_count(0)
        # the summary is computed by a task (no worker here): "Computing…" links a reload too
        compute_result_summary(str(run.id))
        page.get_by_test_id("reload-summary").click()
        expect(page.get_by_test_id("reload-summary")).to_have_count(0)
        expect(page.locator("#summary")).not_to_contain_text("Computing")

        agent.default = ok(echo_answer)
        page.get_by_role("button", name="Retry failed items").click()
        expect(message(page)).to_contain_text("failed items sent again")
        drive(run)
        page.reload()
        page.get_by_role("button", name="Re-score").click()
        expect(message(page)).to_contain_text("Re-scoring the recorded evidence")

    # cancel through the confirmation page
    other = seed_run(workspace=ws, items=4, lanes=1, status="running", done_fraction=0.5, name="other")
    page.goto(f"/runs/{other.id}/")
    page.get_by_role("link", name="Cancel run").click()
    page.get_by_role("button", name="Cancel the run").click()
    expect(message(page)).to_contain_text("Run cancelled")
    expect(page.locator("#run-status")).to_have_text("cancelled")


def test_a_comparison_still_computing_offers_a_reload_without_javascript(personas, no_js):
    page = no_js
    base = seed_run(workspace=personas.workspace, items=4, lanes=1, name="monday", seed=1)
    cand = seed_run(workspace=personas.workspace, items=4, lanes=1, name="tuesday", seed=2)
    for run in (base, cand):
        compute_result_summary(str(run.id))
    page.goto("/runs/")
    page.get_by_label("Compare monday").check()
    page.get_by_label("Compare tuesday").check()
    page.get_by_role("button", name="Compare the two selected runs").click()
    expect(page.get_by_test_id("computing")).to_be_visible()
    compute_comparison(RunComparison.objects.get(baseline=base, candidate=cand).id)
    page.get_by_test_id("reload-comparison").click()
    expect(page.get_by_test_id("verdict")).to_have_text(RunComparison.objects.get().result["verdict"])


def test_a_deployments_kind_is_changed_on_its_edit_page_without_javascript(personas, no_js):
    """The edit page's note said to "pick a kind from the links above", and only the new
    deployment page had them: without JavaScript another kind's fields could not be shown."""
    page = no_js
    deployment = deployment_create(
        workspace=personas.workspace, name="agent", kind="hosted_http", url="https://agent.example.com/run"
    ).deployment
    page.goto(f"/deployments/{deployment.public_id}/edit/")
    page.get_by_role("link", name="OpenAI-compatible chat model").click()
    expect(page.get_by_label("Name")).to_have_value("agent")
    page.get_by_label("Base URL").fill("https://models.example.com/v1")
    page.locator("#id_model").fill("small-model")
    page.get_by_role("button", name="Save").click()
    expect(message(page)).to_contain_text("Deployment agent saved.")
    deployment.refresh_from_db()
    assert (deployment.kind, deployment.url, deployment.model) == (
        "openai_chat",
        "https://models.example.com/v1",
        "small-model",
    )


def test_copy_buttons_show_only_when_they_can_copy(personas, no_js, page, login):
    """A "Copy" button needs static/js/app.js; without JavaScript it was shown and did nothing."""
    no_js.goto("/deployments/new/?kind=trace_import")
    no_js.get_by_label("Name").fill("traces")
    no_js.get_by_role("button", name="Create deployment").click()
    expect(no_js.locator("#signing-key")).to_be_visible()
    expect(no_js.locator("[data-copy=signing-key]")).to_be_hidden()

    login(personas.owner)
    page.goto("/deployments/new/?kind=trace_import")
    page.get_by_label("Name").fill("traces-2")
    page.get_by_role("button", name="Create deployment").click()
    expect(page.get_by_role("button", name="Copy")).to_be_visible()
