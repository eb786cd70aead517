"""The admin's Deployment form applies the deployments service's checks (name, kind, URL,
model, limits, config) and saves through deployment_update, as the Deployments page does."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from runs.models import Deployment
from runs.services.deployments import deployment_create
from tests.clients import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(personas):
    return logged_in(get_user_model().objects.create_superuser("root", password="pw-root-123"))


@pytest.fixture
def deployment(personas):
    deployment_create(workspace=personas.workspace, name="taken", kind="trace_import")
    return deployment_create(
        workspace=personas.workspace,
        name="careful",
        kind="hosted_http",
        url="https://agent.example.com/run",
        secret="sk-kept",
    ).deployment


def post(**changes):
    return {
        "name": "careful",
        "kind": "hosted_http",
        "url": "https://agent.example.com/run",
        "model": "",
        "max_in_flight": "8",
        "timeout_seconds": "120",
        "max_attempts": "3",
        "evidence_level": "structured",
        "config": "{}",
        **changes,
    }


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"url": "not a url at all"}, "url", "endpoint_url must be an absolute http(s) URL"),
        ({"url": "ftp://agent.example.com/"}, "url", "endpoint_url must be an absolute http(s) URL"),
        ({"url": "https://user:pw@agent.example.com/"}, "url", "must not carry credentials"),
        ({"url": ""}, "url", "endpoint_url is required for hosted_http deployments"),
        ({"name": "  "}, "name", "This field is required."),
        ({"name": "bell\x07"}, "name", "without control characters"),
        ({"name": "taken"}, "name", "a deployment named &#x27;taken&#x27; already exists"),
        ({"model": "gpt-4o"}, "model", "model applies to openai_chat deployments only"),
        ({"kind": "openai_chat"}, "model", "model is required for openai_chat deployments"),
        ({"max_in_flight": "0"}, "max_in_flight", "max_in_flight must be a whole number from 1 to"),
        ({"max_attempts": "11"}, "max_attempts", "max_attempts must be a whole number from 1 to 10"),
        ({"timeout_seconds": "0"}, "timeout_seconds", "timeout_seconds must be more than 0"),
        ({"config": '{"temperature": 0.5}'}, "config", "config.temperature applies to openai_chat"),
        ({"config": "[1]"}, "config", "config must be a JSON object"),
    ],
)
def test_the_admin_refuses_what_the_deployments_service_refuses(client, deployment, changes, field, message):
    before = Deployment.objects.filter(pk=deployment.pk).values().get()
    response = client.post(f"/admin/runs/deployment/{deployment.pk}/change/", post(**changes))
    assert response.status_code == 200  # the form again, with its errors
    errors = response.context["adminform"].form.errors
    assert field in errors, errors
    assert message in response.content.decode()
    assert Deployment.objects.filter(pk=deployment.pk).values().get() == before


def test_a_valid_change_saves_through_the_service(client, deployment):
    response = client.post(
        f"/admin/runs/deployment/{deployment.pk}/change/",
        post(name="  renamed  ", kind="openai_chat", url=" https://api.example.com/v1 ", model="gpt-4o"),
    )
    assert response.status_code == 302
    deployment.refresh_from_db()
    assert (deployment.name, deployment.kind, deployment.url, deployment.model) == (
        "renamed",
        "openai_chat",
        "https://api.example.com/v1",
        "gpt-4o",
    )
    assert deployment.get_secret() == "sk-kept" and deployment.has_signing_key


def test_the_admin_keeps_the_kind_while_an_unfinished_run_uses_the_deployment(client, deployment, personas):
    """The admin saved through deployment_update with the instance the form had already
    changed, so the service saw no kind change and never checked the runs: a queued run's
    hosted_http deployment became trace_import. The form now says why on the kind field;
    other fields still change, and the kind once the run is cancelled."""
    from runs.services.operations import run_cancel
    from tests.runs.runfactory import create_run, publish

    run = create_run(personas.workspace, publish(personas.workspace, cases=1), [deployment])
    url = f"/admin/runs/deployment/{deployment.pk}/change/"
    before = Deployment.objects.filter(pk=deployment.pk).values().get()
    response = client.post(url, post(kind="trace_import", url=""))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert list(errors) == ["kind"], errors
    assert f"used by run {run.pk} (queued)" in errors["kind"][0]
    assert Deployment.objects.filter(pk=deployment.pk).values().get() == before
    assert client.post(url, post(max_in_flight="3")).status_code == 302
    run_cancel(run=run)
    assert client.post(url, post(kind="trace_import", url="", max_in_flight="3")).status_code == 302
    deployment.refresh_from_db()
    assert (deployment.kind, deployment.max_in_flight) == ("trace_import", 3)


def test_the_admin_save_checks_the_runs_against_the_stored_kind(deployment, personas):
    """A run queued between the form's check and the save: the save goes through the
    service with the stored row, which refuses (the admin's view is atomic)."""
    from django.contrib.admin.sites import site
    from django.test import RequestFactory

    from agentclash_site.lib.admin import SaveRefused
    from runs.admin import DeploymentAdmin, DeploymentAdminForm
    from tests.runs.runfactory import create_run, publish

    edited = Deployment.objects.get(pk=deployment.pk)
    form = DeploymentAdminForm(data=post(kind="trace_import", url=""), instance=edited)
    assert form.is_valid(), form.errors
    create_run(personas.workspace, publish(personas.workspace, cases=1), [deployment])
    with pytest.raises(SaveRefused, match="is used by run"):
        DeploymentAdmin(Deployment, site).save_model(RequestFactory().post("/"), edited, form, True)
    assert Deployment.objects.get(pk=deployment.pk).kind == "hosted_http"


class TestTheSaveRefusedAfterTheFormsCheck:
    """What the form's check let through and the service then refused (a run queued, or the
    name taken, in between) was a 500, then a "Not saved" message on the change page, which
    showed the stored values (the operator's edits lost). The form is shown again now, with
    what was typed and the reason on its field, nothing saved and no log entry."""

    @pytest.fixture
    def meanwhile(self, monkeypatch):
        from runs.admin import DeploymentAdminForm

        clean = DeploymentAdminForm.clean
        happened = []

        def check_then(form):
            data = clean(form)
            while happened:  # once: what another operator did meanwhile
                happened.pop(0)()
            return data

        monkeypatch.setattr(DeploymentAdminForm, "clean", check_then)
        return happened

    def refused(self, client, deployment, changes) -> tuple[dict, str]:
        """The form's errors of the refused save, and the page."""
        from django.contrib.admin.models import LogEntry

        url = f"/admin/runs/deployment/{deployment.pk}/change/"
        before = Deployment.objects.filter(pk=deployment.pk).values().get()
        response = client.post(url, post(**changes))
        assert response.status_code == 200
        assert Deployment.objects.filter(pk=deployment.pk).values().get() == before
        assert not LogEntry.objects.exists()
        assert not list(response.context["messages"])
        return response.context["adminform"].form.errors, response.content.decode()

    def test_a_run_queued_meanwhile_keeps_the_kind(self, client, deployment, personas, meanwhile):
        from runs.models import Run
        from tests.runs.runfactory import create_run, publish

        version = publish(personas.workspace, cases=1)
        runs = []
        meanwhile.append(lambda: runs.append(create_run(personas.workspace, version, [deployment])))
        errors, page = self.refused(
            client, deployment, {"kind": "trace_import", "url": "", "max_in_flight": "3"}
        )
        assert errors == {
            "kind": [
                f"'careful' is used by run {runs[0].pk} (queued); its kind can change once"
                " that run has finished or is cancelled"
            ]
        }
        assert '<option value="trace_import" selected>' in page and 'name="max_in_flight" value="3"' in page
        assert not Run.objects.exists()  # queued here in the page's transaction, rolled back with it

    def test_a_name_taken_meanwhile(self, client, deployment, personas, meanwhile):
        meanwhile.append(
            lambda: deployment_create(workspace=personas.workspace, name="renamed", kind="trace_import")
        )
        errors, page = self.refused(client, deployment, {"name": "renamed", "max_attempts": "5"})
        assert errors == {"name": ["a deployment named 'renamed' already exists in this workspace"]}
        assert 'name="name" value="renamed"' in page and 'name="max_attempts" value="5"' in page
        assert not Deployment.objects.filter(name="renamed").exists()  # rolled back with the page

    def test_once_the_other_name_is_committed_the_forms_check_says_it_once(
        self, client, deployment, personas, monkeypatch
    ):
        """Shown again, the form's own checks see the other operator's row (committed in
        earnest, unlike the tests above, where it goes with the refused pass): their error
        is shown, not repeated. The first pass's check is made blind to the row here."""
        from django import forms

        from agentclash_site.lib.admin import SaveRefused
        from runs.admin import DeploymentAdmin, DeploymentAdminForm

        deployment_create(workspace=personas.workspace, name="renamed", kind="trace_import")
        clean, passes = DeploymentAdminForm.clean, []

        def blind_the_first_time(form):
            passes.append(form)
            return forms.ModelForm.clean(form) if len(passes) == 1 else clean(form)

        def refused(admin, request, obj, form, change):
            raise SaveRefused("a deployment named 'renamed' already exists in this workspace", "name")

        monkeypatch.setattr(DeploymentAdminForm, "clean", blind_the_first_time)
        monkeypatch.setattr(DeploymentAdmin, "save_model", refused)
        response = client.post(f"/admin/runs/deployment/{deployment.pk}/change/", post(name="renamed"))
        assert response.status_code == 200 and len(passes) == 2
        assert response.context["adminform"].form.errors == {
            "name": ["a deployment named 'renamed' already exists in this workspace"]
        }
        assert Deployment.objects.get(pk=deployment.pk).name == "careful"


class TestARunCreatedWhileTheDeleteIsConfirmed:
    """get_deleted_objects found no run; one is created before the delete itself, whose lane
    PROTECTs the deployment: the delete is refused with the check's reason, as a message (it
    was a 500), and nothing of it is kept (no "deleted" entry in the log)."""

    REASON = "Deployment careful (acme): used by runs, whose history names it"

    @pytest.fixture
    def race(self, personas, deployment, monkeypatch):
        from runs.admin import DeploymentAdmin
        from tests.runs.runfactory import create_run, publish

        version = publish(personas.workspace, cases=1)
        check = DeploymentAdmin.get_deleted_objects

        def check_then_a_run_comes(admin, objs, request):
            answer = check(admin, objs, request)
            if request.method == "POST":
                create_run(personas.workspace, version, [deployment])
            return answer

        monkeypatch.setattr(DeploymentAdmin, "get_deleted_objects", check_then_a_run_comes)

    def test_on_its_delete_page(self, client, deployment, race):
        from django.contrib.admin.models import LogEntry

        response = client.post(
            f"/admin/runs/deployment/{deployment.pk}/delete/", {"post": "yes"}, follow=True
        )
        assert response.status_code == 200
        assert response.redirect_chain[-1][0] == f"/admin/runs/deployment/{deployment.pk}/change/"
        assert [str(m) for m in response.context["messages"]] == [f"Not deleted: {self.REASON}."]
        assert Deployment.objects.filter(pk=deployment.pk).exists()
        assert not LogEntry.objects.exists()

    def test_with_the_bulk_delete(self, client, deployment, race):
        from django.contrib.admin.models import LogEntry

        idle = Deployment.objects.get(name="taken")
        response = client.post(
            "/admin/runs/deployment/",
            {"action": "delete_selected", "_selected_action": [deployment.pk, idle.pk], "post": "yes"},
            follow=True,
        )
        assert response.status_code == 200
        assert [str(m) for m in response.context["messages"]] == [f"Not deleted: {self.REASON}."]
        assert Deployment.objects.filter(pk__in=[deployment.pk, idle.pk]).count() == 2  # none of them
        assert not LogEntry.objects.exists()


class TestCredentialsInTheUrlAndConfig:
    """The change page and the list showed the values of config.extra_headers (an x-api-key
    is as much a credential as the secret) and of URL query parameters named like one
    (Azure Functions' ?code=) to every operator. They show (hidden) now; saved as shown, the
    stored values stay, and a value typed over replaces the stored one."""

    @pytest.fixture
    def keyed(self, personas):
        return deployment_create(
            workspace=personas.workspace,
            name="keyed",
            kind="hosted_http",
            url="https://fn.example.com/api/run?api-version=1&code=AZ-SECRET-1",
            secret="sk-kept",
            config={"extra_headers": {"x-api-key": "HDR-SECRET-2", "x-team": "evals"}},
        ).deployment

    def keyed_post(self, **changes):
        shown = {
            "name": "keyed",
            "url": "https://fn.example.com/api/run?api-version=1&code=(hidden)",
            "config": '{"extra_headers": {"x-api-key": "(hidden)", "x-team": "(hidden)"}}',
        }
        return post(**{**shown, **changes})

    def test_the_change_page_and_the_list_hide_them(self, client, keyed):
        for url in (f"/admin/runs/deployment/{keyed.pk}/change/", "/admin/runs/deployment/"):
            body = client.get(url).content.decode()
            assert "AZ-SECRET-1" not in body and "HDR-SECRET-2" not in body, url
            assert "code=(hidden)" in body, url
        assert "api-version=1" in body  # what is no credential still shows

    def test_saving_the_page_as_shown_keeps_the_stored_values(self, client, keyed):
        response = client.post(
            f"/admin/runs/deployment/{keyed.pk}/change/", self.keyed_post(max_in_flight="3")
        )
        assert response.status_code == 302
        keyed.refresh_from_db()
        assert keyed.url == "https://fn.example.com/api/run?api-version=1&code=AZ-SECRET-1"
        assert keyed.config["extra_headers"] == {"x-api-key": "HDR-SECRET-2", "x-team": "evals"}
        assert keyed.max_in_flight == 3 and keyed.get_secret() == "sk-kept"

    def test_a_value_typed_over_replaces_the_stored_one(self, client, keyed):
        changes = {
            "url": "https://fn.example.com/api/run?api-version=2&code=NEW-CODE",
            "config": '{"extra_headers": {"x-api-key": "NEW-KEY", "x-team": "(hidden)"}}',
        }
        assert (
            client.post(f"/admin/runs/deployment/{keyed.pk}/change/", self.keyed_post(**changes)).status_code
            == 302
        )
        keyed.refresh_from_db()
        assert keyed.url == "https://fn.example.com/api/run?api-version=2&code=NEW-CODE"
        assert keyed.config["extra_headers"] == {"x-api-key": "NEW-KEY", "x-team": "evals"}

    @pytest.mark.parametrize(
        ("changes", "field", "message"),
        [
            (
                {"url": "https://fn.example.com/api/run?api-version=1&code=(hidden)&sig=(hidden)"},
                "url",
                "the query parameter sig shows (hidden) but has no stored value: type its value",
            ),
            (
                {"config": '{"extra_headers": {"x-other": "(hidden)"}}'},
                "config",
                "config.extra_headers: x-other shows (hidden) but has no stored value: type its value",
            ),
        ],
    )
    def test_a_hidden_value_with_nothing_stored_is_refused_on_its_field(
        self, client, keyed, changes, field, message
    ):
        before = Deployment.objects.filter(pk=keyed.pk).values().get()
        response = client.post(f"/admin/runs/deployment/{keyed.pk}/change/", self.keyed_post(**changes))
        assert response.status_code == 200
        assert response.context["adminform"].form.errors[field] == [message]
        assert Deployment.objects.filter(pk=keyed.pk).values().get() == before

    def test_a_lanes_recorded_settings_hide_the_urls_credential(self, client, keyed, personas):
        from tests.runs.runfactory import create_run, publish

        run = create_run(personas.workspace, publish(personas.workspace, cases=1), [keyed])
        lane = run.lanes.get()
        assert "AZ-SECRET-1" in lane.settings["url"]  # recorded as called
        body = client.get(f"/admin/runs/runlane/{lane.pk}/change/").content.decode()
        assert "AZ-SECRET-1" not in body and "HDR-SECRET-2" not in body
        assert "api-version=1&amp;code=…" in body

    def test_a_view_only_staff_user_sees_them_hidden_too(self, keyed):
        # Without the change permission every field is shown read-only from the row, not
        # the form: the values showed in clear.
        from django.contrib.auth.models import Permission

        viewer = get_user_model().objects.create_user("viewer", password="pw-viewer-123", is_staff=True)
        viewer.user_permissions.add(Permission.objects.get(codename="view_deployment"))
        response = logged_in(viewer).get(f"/admin/runs/deployment/{keyed.pk}/change/")
        assert response.status_code == 200
        body = response.content.decode()
        assert "AZ-SECRET-1" not in body and "HDR-SECRET-2" not in body
        assert "code=(hidden)" in body and "x-api-key" in body and "(hidden)" in body
