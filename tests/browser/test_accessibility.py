"""Every page a member sees, audited with axe-core (WCAG 2.1 A and AA rules) in Debian
chromium: no violation of impact serious or critical. Moderate and minor ones, and axe's
best-practice findings, are reported as warnings (pytest's warnings summary) so they stay
visible without failing the build.

axe-core is vendored under tests/browser/vendor/axe-core/ (a test tool, never served) and
evaluated through the DevTools protocol, so the pages' CSP (no inline script) stays as it is.
Each page is visited once; the pages are grouped by the state they need (a reviewed run, an
empty workspace, a viewer, forms with errors, rows loaded by htmx).
"""

from __future__ import annotations

import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agentclash_site.workspaces.models import Role, Workspace
from agentclash_site.workspaces.services import membership_set_role, token_create
from packs.models import Pack
from packs.services.drafts import draft_from_version
from runs import compare_tasks, result_tasks
from runs.compare_tasks import compute_comparison
from runs.models import Deployment, Run, RunComparison, RunItem, RunLane
from runs.result_tasks import compute_result_summary
from runs.seeding import seed_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
WCAG_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# axe's own best practices (landmarks, heading order, one h1...) run too, reported only.
TAGS = [*WCAG_TAGS, "best-practice"]
FAILING = ("serious", "critical")


class AccessibilityNotice(UserWarning):
    """A moderate or minor axe finding: reported, not failed."""


def describe(page_name: str, violation: dict[str, Any]) -> str:
    targets = "; ".join(" ".join(node["target"]) for node in violation["nodes"][:5])
    more = len(violation["nodes"]) - 5
    first = " ".join((violation["nodes"][0]["summary"] or "").split())
    return (
        f"{page_name}: {violation['id']} ({violation['impact']}, {len(violation['nodes'])} node(s)) "
        f"{violation['help']}: {targets}{f' (+{more} more)' if more > 0 else ''}\n    first: {first}"
    )


class Audit:
    """Runs axe on the page as it stands and keeps what it finds, for one assertion at the end
    (so one test reports every failing page, not only the first)."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.failures: list[str] = []
        self.audited: list[str] = []

    def __call__(self, name: str) -> None:
        page = self.page
        page.wait_for_load_state()
        if not page.evaluate("typeof window.axe !== 'undefined'"):
            page.evaluate(AXE.read_text())
        result = page.evaluate(
            """async (tags) => {
                const r = await axe.run(document, {
                    runOnly: {type: "tag", values: tags}, resultTypes: ["violations"],
                });
                return r.violations.map((v) => ({
                    id: v.id, impact: v.impact, help: v.help, tags: v.tags,
                    nodes: v.nodes.map((n) => ({target: n.target, summary: n.failureSummary})),
                }));
            }""",
            TAGS,
        )
        self.audited.append(name)
        for violation in result:
            text = describe(name, violation)
            if violation["impact"] in FAILING and set(violation["tags"]) & set(WCAG_TAGS):
                self.failures.append(text)
            else:
                warnings.warn(text, AccessibilityNotice, stacklevel=2)

    def visit(self, name: str, url: str, *, status: int | None = 200, ready: str | None = None) -> None:
        """Open ``url`` and audit it once its content is there (``ready``: a selector of
        what a script renders after the load)."""
        response = self.page.goto(url)
        if status is not None:
            assert response.status == status, (name, url, response.status)
        if ready:
            self.page.locator(ready).first.wait_for()
        self(name)

    def check(self) -> None:
        assert self.failures == [], "\n".join(self.failures)


@pytest.fixture
def audit(page: Any) -> Audit:
    return Audit(page)


@pytest.fixture
def no_broker(monkeypatch: Any) -> None:
    """The pages enqueue summary and comparison tasks on commit; no worker runs here."""
    monkeypatch.setattr(compare_tasks.compute_comparison, "delay", lambda *a: None)
    monkeypatch.setattr(result_tasks.compute_result_summary, "delay", lambda *a: None)


def failed_case(run: Run) -> RunItem:
    """The run's first failed case with evidence: the one ``reviewed_run`` enriches."""
    return RunItem.objects.filter(run=run, status="FAILED").exclude(evidence=None).order_by("id").first()


def reviewed_run(workspace: Workspace, *, name: str, seed: int) -> Run:
    """A finished two-lane run as a team reviews it: judge spend, run-level critique, a
    repetition count above one, and a failed case whose grade has judge samples, a claims
    ledger, eval feedback and user notes."""
    run = seed_run(workspace=workspace, items=24, lanes=2, name=name, seed=seed)
    compute_result_summary(str(run.id))
    RunLane.objects.filter(run=run).update(judge_input_tokens=1200, judge_output_tokens=300)
    stats = dict(run.stats or {})
    stats["eval_feedback"] = {
        "overall": "Two validators never discriminate between the deployments.",
        "suggestions": [
            {"assertion": "answer", "reason": "Every lane passes it on every case.", "finding": "never_fails"}
        ],
    }
    Run.objects.filter(id=run.id).update(stats=stats, repetitions=2)
    item = failed_case(run)
    grade = dict(item.grade)
    grade["expectations"] = [
        *grade["expectations"],
        {
            "key": "polite",
            "kind": "judge",
            "text": "The reply is polite",
            "status": "FAILED",
            "passed": False,
            "score": 0.25,
            "threshold": 0.5,
            "evidence": "Both samples found the reply curt.",
            "evidence_refs": ["final_output"],
            "details": {
                "mode": "assertion",
                "samples": [
                    {
                        "model": "gpt-4o-mini",
                        "sample": i,
                        "status": "ok",
                        "pass": False,
                        "confidence": 0.8,
                        "reasoning": "The reply ignores the greeting.",
                        "citations": [{"id": "final_output", "quote": "no"}, {"id": "challenge_input"}],
                    }
                    for i in (1, 2)
                ],
            },
        },
    ]
    grade["claims"] = [
        {
            "claim": "I ran the tests.",
            "type": "action",
            "kind": "tests_ran",
            "verified": False,
            "evidence": "No tool call ran a test command.",
            "evidence_refs": ["final_output"],
        },
        {"claim": "The file is saved.", "type": "artifact", "verified": None, "evidence": "Not reported."},
    ]
    grade["eval_feedback"] = {
        "overall": "The judge disagrees with the validators.",
        "suggestions": [{"assertion": "polite", "reason": "Samples split.", "finding": "judge_unstable"}],
    }
    grade["user_notes_summary"] = {"uncertainties": ["Unsure of the unit."], "needs_review": ["Rounding"]}
    RunItem.objects.filter(id=item.id).update(grade=grade)
    return Run.objects.get(id=run.id)


def test_every_page_of_a_reviewed_workspace(personas, login, page, audit, no_broker):
    ws = personas.workspace
    monday = reviewed_run(ws, name="monday", seed=1)
    tuesday = reviewed_run(ws, name="tuesday", seed=2)
    failed = failed_case(tuesday)
    pack = Pack.objects.get(workspace=ws)
    version = pack.versions.order_by("-number").first()
    draft = draft_from_version(version=version, user=personas.owner)
    deployment = Deployment.objects.filter(workspace=ws).order_by("name").first()
    token_create(user=personas.owner, workspace=ws, name="ci")

    audit.visit("login", "/login/")
    page.get_by_label("Username").fill("olive")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    audit("login with an error")

    from django.contrib.auth.models import Permission

    personas.owner.is_staff = True  # and the staff's operations page (it needs runs.view_run)
    personas.owner.save(update_fields=["is_staff"])
    personas.owner.user_permissions.add(Permission.objects.get(codename="view_run"))
    login(personas.owner)
    audit.visit("home", "/")
    audit.visit("runs list", "/runs/")
    audit.visit("run overview", f"/runs/{tuesday.id}/")
    audit.visit("cases list", f"/runs/{tuesday.id}/cases/")
    audit.visit("case page", f"/runs/{tuesday.id}/cases/{failed.id}/")
    audit.visit("transcript", f"/runs/{tuesday.id}/cases/{failed.id}/transcript/")
    audit.visit("compare picker", "/runs/compare/")
    audit.visit("compare computing", f"/runs/compare/?run={monday.id}&run={tuesday.id}")
    compute_comparison(RunComparison.objects.get(baseline=monday, candidate=tuesday).id)
    audit.visit("compare", f"/runs/compare/?run={monday.id}&run={tuesday.id}")
    audit.visit("packs list", "/packs/")
    audit.visit("pack page", f"/packs/{pack.public_id}/")
    audit.visit("pack version", f"/packs/versions/{version.public_id}/")
    audit.visit("draft editor", f"/packs/drafts/{draft.public_id}/")
    audit.visit("new pack", "/packs/new/")
    audit.visit("new run form", "/runs/new/")
    audit.visit("deployments list", "/deployments/")
    audit.visit("deployment detail", f"/deployments/{deployment.public_id}/")
    audit.visit("deployment edit", f"/deployments/{deployment.public_id}/edit/")
    audit.visit("new deployment", "/deployments/new/")
    audit.visit("API tokens", "/account/tokens/")
    audit.visit("members", f"/workspaces/{ws.slug}/members/")
    audit.visit("judge settings", f"/workspaces/{ws.slug}/judge/")
    audit.visit("run operations", "/runs/operations/")
    audit.visit("not found", f"/runs/{uuid.uuid4()}/", status=404)
    audit.visit("bad cursor on the runs list", "/runs/?after=garbage", status=400)
    audit.visit("bad cursor on the cases list", f"/runs/{tuesday.id}/cases/?after=garbage", status=400)
    audit.visit("API docs", "/api/v1/docs/", ready=".opblock")
    audit.visit("API reference (Redoc)", "/api/v1/redoc/", ready="text=API docs by Redocly")
    audit.check()


def test_an_empty_workspace_and_a_user_without_one(personas, login, page, audit):
    User = get_user_model()
    newcomer = User.objects.create_user("nina", password="pw-nina-123")
    empty = Workspace.objects.create(slug="fresh", name="Fresh")
    membership_set_role(workspace=empty, user=newcomer, role=Role.OWNER)
    login(newcomer)
    for name, url in (
        ("home", "/"),
        ("runs list", "/runs/"),
        ("new run form", "/runs/new/"),
        ("packs list", "/packs/"),
        ("deployments list", "/deployments/"),
        ("API tokens", "/account/tokens/"),
        ("members", "/workspaces/fresh/members/"),
    ):
        audit.visit(f"empty workspace: {name}", url)
    login(User.objects.create_user("lone", password="pw-lone-123"))
    audit.visit("no workspace", "/", status=None)
    audit.check()


def load_more(page: Any, name: str, rows: str) -> None:
    """Follow a "More …" link with the keyboard and wait for the rows that replace it (the
    loaded rows may end with another such link)."""
    before = page.locator(rows).count()
    more = page.get_by_role("link", name=name)
    more.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("([sel, n]) => document.querySelectorAll(sel).length > n", arg=[rows, before])


def test_a_viewer_forms_with_errors_and_rows_loaded_by_htmx(
    personas, login, page, audit, no_broker, monkeypatch
):
    import runs.results
    from runs.views import runs as run_views

    monkeypatch.setattr(run_views, "RUN_PAGE", 1)
    monkeypatch.setattr(runs.results, "CASE_PAGE", 3)
    monkeypatch.setattr(runs.results, "GRID_PAGE", 3)
    ws = personas.workspace
    reviewed_run(ws, name="monday", seed=1)
    run = reviewed_run(ws, name="tuesday", seed=2)
    failed = failed_case(run)
    pack = Pack.objects.get(workspace=ws)
    version = pack.versions.order_by("-number").first()
    draft = draft_from_version(version=version, user=personas.owner)
    deployment = Deployment.objects.filter(workspace=ws).order_by("name").first()

    login(personas.viewer)
    for name, url in (
        ("runs list", "/runs/"),
        ("run overview", f"/runs/{run.id}/"),
        ("case page", f"/runs/{run.id}/cases/{failed.id}/"),
        ("packs list", "/packs/"),
        ("pack page", f"/packs/{pack.public_id}/"),
        ("deployments list", "/deployments/"),
        ("deployment detail", f"/deployments/{deployment.public_id}/"),
        ("members", f"/workspaces/{ws.slug}/members/"),
        ("judge settings", f"/workspaces/{ws.slug}/judge/"),
    ):
        audit.visit(f"viewer: {name}", url, status=None)
    audit.visit("viewer: a change refused", f"/deployments/{deployment.public_id}/edit/", status=403)

    # htmx-loaded rows
    page.goto("/runs/")
    load_more(page, "Older runs", "#run-rows tr:not([id*=more])")
    audit("runs list after Older runs")
    page.goto(f"/runs/{run.id}/")
    load_more(page, "Show more rows", "#grid-body tr:not([id*=more])")
    audit("run overview after Show more rows")
    page.goto(f"/runs/{run.id}/cases/")
    load_more(page, "Next 3 cases", "#case-rows tr:not([id*=more])")
    page.locator("#case-rows a.button", has_text="Expectations").first.click()
    expect(page.locator("#case-rows .expansion-body").first).to_be_visible()
    audit("cases list after Next cases and an expanded row")

    # forms with validation errors, as the owner
    login(personas.owner)
    page.goto("/runs/new/")
    page.get_by_label("Repetitions").fill("0")
    page.get_by_role("button", name="Start the run").click()
    expect(page.locator(".error").first).to_be_visible()
    audit("new run form with errors")
    page.goto("/deployments/new/")
    page.fill("input[name=name]", deployment.name)  # taken: refused by the server
    page.fill("input[name=endpoint_url]", "ftp://agent.example")
    page.get_by_role("button", name="Create deployment").click()
    expect(page.locator(".errorlist").first).to_be_visible()
    audit("new deployment with errors")
    page.goto(f"/workspaces/{ws.slug}/members/")
    page.get_by_role("button", name="Add member").click()
    expect(page.locator(".errorlist, .error").first).to_be_visible()
    audit("members with errors")
    page.goto(f"/workspaces/{ws.slug}/judge/")
    page.get_by_role("button", name="Save").click()
    page.wait_for_load_state()
    audit("judge settings after a save")
    page.goto(f"/packs/drafts/{draft.public_id}/")
    page.locator("#draft-form textarea").fill("pack: [unclosed\n")
    page.get_by_role("button", name="Save and validate").click()
    expect(page.locator("#report .issue").first).to_be_visible()
    audit("draft editor with errors")
    audit.check()


# A model name and an endpoint URL as long as users give them: the lane settings list wraps them.
LONG_MODEL = "org-" + "x" * 60 + "/finetuned-" + "y" * 40
LONG_URL = "http://10.0.0.7:8080/" + "segment/" * 12 + "agent?" + "q=1&" * 6 + "end=1"


def waiting_runs(workspace: Workspace) -> tuple[Run, Run, Deployment]:
    """An openai_chat run queued ``NO_WORKER_AFTER`` ago with nothing claimed (its deployment since
    edited: another model, a private URL the workspace no longer allows), and a trace-import
    run waiting for its results. Returns both runs and the openai_chat deployment."""
    from datetime import timedelta

    from runs.services.deployments import deployment_create, deployment_update
    from runs.views.runs import NO_WORKER_AFTER
    from tests.runs.runfactory import create_run, publish

    version = publish(workspace, cases=3)
    workspace.allow_private_endpoints = True
    workspace.save(update_fields=["allow_private_endpoints"])
    agent = deployment_create(
        workspace=workspace, name="long-settings", kind="openai_chat", url=LONG_URL, model=LONG_MODEL
    ).deployment
    queued = create_run(workspace, version, [agent])
    past = queued.queued_at - NO_WORKER_AFTER - timedelta(seconds=30)
    Run.objects.filter(id=queued.id).update(queued_at=past, created_at=past)
    deployment_update(deployment=agent, model=LONG_MODEL + "-edited", url=LONG_URL + "&v=2")
    workspace.allow_private_endpoints = False  # the URL warning: every call would be refused
    workspace.save(update_fields=["allow_private_endpoints"])
    trace = Deployment.objects.create(workspace=workspace, name="uploads", kind="trace_import")
    waiting = create_run(workspace, version, [trace])
    return queued, waiting, agent


def test_the_run_states_deployment_warnings_and_admin_filters_of_today(
    personas, login, page, audit, no_broker, monkeypatch
):
    """The pages' new states: the no-worker notice and the lane settings of a queued run whose
    deployment changed, a trace-import run waiting for its results (an editor sees how to
    upload them, a viewer only the counts), compare's "settings differ", a deployment whose
    URL the workspace refuses, and the admin's workspace slug filter and "Not saved" errors."""
    ws = personas.workspace
    monday = seed_run(workspace=ws, items=6, lanes=2, name="monday", seed=1)
    tuesday = seed_run(workspace=ws, items=6, lanes=2, name="tuesday", seed=2)
    lane = RunLane.objects.get(run=tuesday, position=0)
    # tuesday's first lane recorded another kind of deployment: kind, URL and model differ
    RunLane.objects.filter(id=lane.id).update(
        settings={**lane.settings, "kind": "openai_chat", "url": LONG_URL, "model": LONG_MODEL}
    )
    queued, waiting, agent = waiting_runs(ws)

    login(personas.editor)
    audit.visit("queued run without a worker, its deployment changed", f"/runs/{queued.id}/")
    expect(page.get_by_test_id("no-worker")).to_be_visible()
    expect(page.get_by_test_id("deployment-changed")).to_be_visible()
    audit.visit("trace-import run waiting for results (editor)", f"/runs/{waiting.id}/")
    expect(page.get_by_test_id("upload-how")).to_be_visible()
    expect(page.get_by_test_id("awaiting-upload")).to_be_visible()
    audit.visit("compare computing", f"/runs/compare/?run={monday.id}&run={tuesday.id}")
    compute_comparison(RunComparison.objects.get(baseline=monday, candidate=tuesday).id)
    audit.visit("compare with settings differing", f"/runs/compare/?run={monday.id}&run={tuesday.id}")
    expect(page.get_by_test_id("settings-changed")).to_be_visible()
    audit.visit("deployment with a refused URL", f"/deployments/{agent.public_id}/")
    expect(page.get_by_test_id("url-warning")).to_be_visible()
    audit.visit("deployment edit with a refused URL", f"/deployments/{agent.public_id}/edit/")
    expect(page.get_by_test_id("url-warning")).to_be_visible()

    login(personas.viewer)
    audit.visit("trace-import run waiting for results (viewer)", f"/runs/{waiting.id}/")
    expect(page.get_by_test_id("awaiting-upload")).to_be_visible()

    root = get_user_model().objects.create_superuser("root", password="pw-root-123")
    login(root)
    audit.visit("admin run list with the slug filter", "/admin/runs/run/")
    expect(page.locator(".slug-filter input[type=search]")).to_be_visible()
    audit.visit(
        "admin deployment list filtered by slug", f"/admin/runs/deployment/?workspace__slug={ws.slug}"
    )
    from runs.services import deployments as deployment_services

    def refused(**fields: Any) -> None:
        raise deployment_services.DeploymentError("name_taken", "the name is taken", field="name")

    monkeypatch.setattr(deployment_services, "deployment_update", refused)
    page.goto(f"/admin/runs/deployment/{agent.pk}/change/")
    page.locator("input[name=_save]").click()
    expect(page.get_by_text("the name is taken").first).to_be_visible()
    audit("admin deployment change page: Not saved")
    audit.check()
