"""A deployment's kind stays while an unfinished run uses it (f8d21c2), on every path: a run
created at the same moment as the kind change (both orders of the two transactions), a run
created with a deployment whose kind changed after it was resolved."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection

from runs.models import Deployment, Run, RunLane
from runs.services import deployments as deployment_services
from runs.services import runs as run_services
from runs.services.deployments import DeploymentInUse, deployment_update
from runs.services.runs import RunError
from tests.processes import waiting_on_a_lock
from tests.runs.runfactory import create_run, hosted, publish

LOCK_DEADLINE_S = 10


@pytest.mark.django_db
def test_a_run_of_a_deployment_whose_kind_changed_since_it_was_resolved_is_refused(personas):
    version = publish(personas.workspace, cases=1)
    stale = hosted(personas.workspace, "http://127.0.0.1:9/agent", name="agent")
    Deployment.objects.filter(pk=stale.pk).update(kind="trace_import", url="")
    with pytest.raises(RunError) as caught:
        create_run(personas.workspace, version, [stale])  # resolved (and checked) as hosted_http
    assert (caught.value.code, caught.value.status_code) == ("deployment_changed", 409)
    assert "'agent' changed from hosted_http to trace_import" in caught.value.message
    assert not Run.objects.exists()


def _hold_after(
    module: Any, name: str, monkeypatch: Any, thread: str
) -> tuple[threading.Event, threading.Event]:
    """Patch ``module.name`` so that, in the thread named ``thread``, it waits for ``go``
    after it returned (inside its transaction) and says so with ``held``."""
    held, go = threading.Event(), threading.Event()
    original = getattr(module, name)

    def hold(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        if threading.current_thread().name == thread:
            held.set()
            assert go.wait(LOCK_DEADLINE_S)
        return result

    monkeypatch.setattr(module, name, hold)
    return held, go


def _in_thread(name: str, outcomes: dict[str, Any], call: Any) -> threading.Thread:
    def body() -> None:
        try:
            outcomes[name] = call()
        except Exception as exc:  # the outcome is what the test inspects
            outcomes[name] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=body, name=name)
    thread.start()
    return thread


def _until_waiting(thread: threading.Thread) -> None:
    deadline = time.monotonic() + LOCK_DEADLINE_S
    while thread.is_alive() and not waiting_on_a_lock():  # done unlocked, or queued behind
        assert time.monotonic() < deadline, f"{thread.name} neither finished nor waited"
        time.sleep(0.01)


@pytest.mark.django_db(transaction=True)
def test_a_kind_change_that_locked_first_makes_the_run_created_meanwhile_fail(personas, monkeypatch):
    """The kind change checked that no run uses the deployment and has not committed when a
    run of it is created: without the row lock the run was created with the old kind on its
    lane while the deployment had the new one."""
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent connections")
    version = publish(personas.workspace, cases=1)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/agent", name="agent")
    held, go = _hold_after(deployment_services, "ensure_kind_may_change", monkeypatch, "change")
    outcomes: dict[str, Any] = {}
    change = _in_thread(
        "change",
        outcomes,
        lambda: deployment_update(deployment=Deployment.objects.get(pk=dep.pk), kind="trace_import"),
    )
    assert held.wait(LOCK_DEADLINE_S)
    create = _in_thread("create", outcomes, lambda: create_run(personas.workspace, version, [dep]))
    _until_waiting(create)
    go.set()
    change.join(LOCK_DEADLINE_S)
    create.join(LOCK_DEADLINE_S)
    assert isinstance(outcomes["change"], Deployment), outcomes
    assert isinstance(outcomes["create"], RunError) and outcomes["create"].code == "deployment_changed", (
        outcomes
    )
    assert not RunLane.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_run_created_first_makes_the_kind_change_meanwhile_fail(personas, monkeypatch):
    """The run has its lane and has not committed when the kind changes: the change's check
    saw no run (the lane was not committed) and its UPDATE did not wait for the run."""
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent connections")
    version = publish(personas.workspace, cases=1)
    dep = hosted(personas.workspace, "http://127.0.0.1:9/agent", name="agent")
    held, go = _hold_after(run_services, "_lock_kinds", monkeypatch, "create")
    outcomes: dict[str, Any] = {}
    create = _in_thread("create", outcomes, lambda: create_run(personas.workspace, version, [dep]))
    assert held.wait(LOCK_DEADLINE_S)
    change = _in_thread(
        "change",
        outcomes,
        lambda: deployment_update(deployment=Deployment.objects.get(pk=dep.pk), kind="trace_import"),
    )
    _until_waiting(change)
    go.set()
    create.join(LOCK_DEADLINE_S)
    change.join(LOCK_DEADLINE_S)
    assert isinstance(outcomes["create"], Run), outcomes
    assert isinstance(outcomes["change"], DeploymentInUse), outcomes
    assert str(outcomes["create"].pk) in outcomes["change"].message
    assert Deployment.objects.get(pk=dep.pk).kind == "hosted_http"


@pytest.mark.django_db
def test_an_update_through_an_instance_read_before_a_kind_change_is_checked_against_the_stored_kind(
    personas,
):
    """A page or an API call reads the deployment, then updates it: when another change of
    kind and a run using the new kind came in between, the update compared the kind it sent
    with the kind it had read (the same) and wrote the old kind back under the run's lane,
    unchecked; a change of the name alone wrote the old kind back too."""
    version = publish(personas.workspace, cases=1)
    read_earlier = hosted(personas.workspace, "http://127.0.0.1:9/agent", name="agent")
    stored = Deployment.objects.get(pk=read_earlier.pk)
    deployment_update(deployment=stored, kind="openai_chat", url="http://127.0.0.1:9/v1", model="m")
    run = create_run(personas.workspace, version, [Deployment.objects.get(pk=read_earlier.pk)])
    with pytest.raises(DeploymentInUse) as caught:
        deployment_update(deployment=read_earlier, kind="hosted_http", url="http://127.0.0.1:9/agent")
    assert str(run.pk) in caught.value.message
    assert Deployment.objects.get(pk=read_earlier.pk).kind == "openai_chat"
    renamed = deployment_update(deployment=read_earlier, name="renamed")
    assert (renamed.name, renamed.kind) == ("renamed", "openai_chat")
    assert Deployment.objects.get(pk=read_earlier.pk).kind == "openai_chat"
