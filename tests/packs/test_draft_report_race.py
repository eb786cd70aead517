"""Concurrent first loads of a draft's report (no stored report of its text): one request
validates, the others wait for it and answer the report it stored; one that waits too long
answers "still validating" and the editor asks again. Real threads, each with its own
database connection."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from django.db import connection
from django.urls import reverse

from packs import bundle as pack_bundle
from packs import services
from packs.models import Draft, DraftReport
from packs.services import draft_reports
from tests.clients import logged_in as client_for
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db(transaction=True)
HTMX = {"HTTP_HX_REQUEST": "true"}
DEADLINE = 30.0  # seconds: a bound on every wait below, never a time that is asserted


@pytest.fixture(params=["advisory", "process"])
def lock_kind(request, monkeypatch) -> str:
    """The PostgreSQL advisory lock, or the process's lock that SQLite gets (run here by
    making the module see another database)."""
    if connection.vendor != "postgresql":
        if request.param == "advisory":
            pytest.skip("advisory locks are PostgreSQL's")
    elif request.param == "process":
        monkeypatch.setattr(draft_reports, "connection", SimpleNamespace(vendor="sqlite"))
    return request.param


@pytest.fixture
def draft(personas) -> Draft:
    return services.draft_create(
        workspace=personas.workspace, user=personas.owner, name="Math", bundle_text=mental_math()
    )


class HeldValidation:
    """Counts full validations; the first one waits, once started, until ``release()``."""

    def __init__(self, monkeypatch) -> None:
        self.calls = 0
        self.started = threading.Event()
        self.released = threading.Event()
        real = services.drafts.draft_validate

        def held(**kwargs):
            self.calls += 1
            if self.calls == 1:
                self.started.set()
                assert self.released.wait(DEADLINE), "never released"
            return real(**kwargs)

        monkeypatch.setattr(services.drafts, "draft_validate", held)

    def release(self) -> None:
        self.released.set()


def in_thread(target, *args) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = target(*args)
        except BaseException as exc:  # the test inspects it
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def load(draft_pk: int) -> dict | None:
    return draft_reports.draft_report(Draft.objects.get(pk=draft_pk))


def waiters(lock_kind: str) -> int:
    """Requests waiting for a report's validation now."""
    if lock_kind == "process":
        return sum(users - 1 for _, users in list(draft_reports._process_locks.values()))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        return cursor.fetchone()[0]


def until(condition) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def fresh(draft: Draft) -> dict:
    draft = Draft.objects.get(pk=draft.pk)
    report = pack_bundle.validate_bundle(services.draft_bundle(draft=draft))
    return draft_reports.report_view(report, draft.bundle_text)


def test_two_concurrent_first_loads_validate_once(draft, lock_kind, monkeypatch):
    held = HeldValidation(monkeypatch)
    first, first_out = in_thread(load, draft.pk)
    assert held.started.wait(DEADLINE)
    second, second_out = in_thread(load, draft.pk)
    until(lambda: waiters(lock_kind) == 1)  # the second waits for the first's validation
    held.release()
    for thread in (first, second):
        thread.join(DEADLINE)
        assert not thread.is_alive()
    assert "error" not in first_out and "error" not in second_out, (first_out, second_out)
    assert held.calls == 1
    assert first_out["value"] == second_out["value"] == fresh(draft)
    assert list(DraftReport.objects.filter(draft=draft).values_list("body", flat=True)) == [fresh(draft)]
    assert draft_reports._process_locks == {}


def test_a_request_that_waits_too_long_answers_still_validating(personas, draft, lock_kind, monkeypatch):
    held = HeldValidation(monkeypatch)
    first, first_out = in_thread(load, draft.pk)
    assert held.started.wait(DEADLINE)
    monkeypatch.setattr(draft_reports, "REPORT_WAIT_SECONDS", 0.05)
    viewer = client_for(personas.viewer)
    editor_url = reverse("draft-editor", kwargs={"draft_id": draft.public_id})
    report_url = reverse("draft-report", kwargs={"draft_id": draft.public_id}) + "?revision=1"
    page = viewer.get(editor_url)
    html = page.content.decode()
    assert page.status_code == 200 and page.context["report"] is None
    assert "data-report-pending data-report-retry" in html and "Still validating this text" in html
    assert "The challenges, input sets and cases appear with the report." in html
    answer = viewer.get(report_url, **HTMX)
    assert answer.status_code == 200 and "data-report-retry" in answer.content.decode()
    assert held.calls == 1  # neither waiting request validated too
    held.release()
    first.join(DEADLINE)
    assert not first.is_alive() and "error" not in first_out, first_out
    answer = viewer.get(report_url, **HTMX)
    html = answer.content.decode()
    assert answer.status_code == 200 and "data-report-pending" not in html and 'data-valid="true"' in html
    assert held.calls == 1  # the stored report
    assert draft_reports._process_locks == {}


def test_a_failed_validation_leaves_the_next_request_to_validate(draft, lock_kind, monkeypatch):
    """The first request's validation fails: the lock is let go and the request waiting for
    it validates itself (nothing was stored)."""
    calls = []
    started, released = threading.Event(), threading.Event()
    real = services.drafts.draft_validate

    def failing_once(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            started.set()
            assert released.wait(DEADLINE)
            raise RuntimeError("validator crashed")
        return real(**kwargs)

    monkeypatch.setattr(services.drafts, "draft_validate", failing_once)
    first, first_out = in_thread(load, draft.pk)
    assert started.wait(DEADLINE)
    second, second_out = in_thread(load, draft.pk)
    until(lambda: waiters(lock_kind) == 1)
    released.set()
    for thread in (first, second):
        thread.join(DEADLINE)
        assert not thread.is_alive()
    assert isinstance(first_out.get("error"), RuntimeError)
    assert second_out["value"] == fresh(draft) and len(calls) == 2
