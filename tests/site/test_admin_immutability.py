"""The admin console cannot change published, immutable data (pack-format §12: published
versions, their cases and assets are immutable; runs reference versions, never packs), nor
run records, whose state moves only through the services."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.db import transaction
from django.test import RequestFactory

from packs import services
from packs.models import Artifact, Asset, Case, Challenge, Draft, InputSet, Pack, PackVersion
from runs.models import Attempt, Deployment, Run, RunItem, RunLane
from runs.seeding import seed_run
from tests.clients import logged_in
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db

IMMUTABLE = {PackVersion, Challenge, InputSet, Case, Asset} | {
    model for model in apps.get_app_config("runs").get_models() if model is not Deployment
}
# The tag names of form controls an operator could type into (the nav filter is a search box).
EDITABLE = re.compile(r'<(?:textarea|select)\b|<input\b(?![^>]*type="(?:hidden|search)")')


@pytest.fixture
def root(personas):
    return get_user_model().objects.create_superuser("root", password="pw-root-123")


@pytest.fixture
def published(personas):
    """A published version with an asset bound to an artifact, and a run with attempts."""
    artifact = services.artifact_store(
        workspace=personas.workspace, data=b'{"a": 1}', filename="answers.json"
    ).artifact
    result = services.pack_version_publish(
        workspace=personas.workspace,
        data=mental_math(asset_artifact_id=str(artifact.public_id)).encode(),
        user=personas.owner,
    )
    seed_run(workspace=personas.workspace, items=4, lanes=2, infra_error_rate=0.5)
    return result.version


def _admin_request(user):
    request = RequestFactory().get("/admin/")
    request.user = user
    return request


def _registered_immutable():
    return {model: model_admin for model, model_admin in admin.site._registry.items() if model in IMMUTABLE}


def test_every_admin_of_an_immutable_model_refuses_add_change_and_delete(root, published):
    request = _admin_request(root)
    registered = _registered_immutable()
    assert {PackVersion, Case, Asset, Run, RunLane, RunItem, Attempt} <= set(registered)
    for model, model_admin in registered.items():
        obj = model.objects.first()
        assert obj is not None, model
        assert not model_admin.has_add_permission(request), model
        for target in (None, obj):
            assert not model_admin.has_change_permission(request, target), model
            assert not model_admin.has_delete_permission(request, target), model
        assert model_admin.has_view_permission(request, obj), model  # still there to inspect
        assert "delete_selected" not in model_admin.get_actions(request), model


def test_every_inline_of_an_immutable_model_refuses_add_change_and_delete(root, published):
    request = _admin_request(root)
    seen = set()
    for parent, model_admin in admin.site._registry.items():
        for inline in model_admin.get_inline_instances(request, parent.objects.first()):
            if inline.model not in IMMUTABLE:
                continue
            seen.add(inline.model)
            assert not inline.has_add_permission(request, None), inline
            assert not inline.has_change_permission(request, None), inline
            assert not inline.has_delete_permission(request, None), inline
    assert {PackVersion, Challenge, InputSet, RunLane, Attempt} <= seen


def test_the_admin_pages_of_immutable_rows_show_no_inputs_and_refuse_every_write(root, published):
    client = logged_in(root)
    for model, _ in _registered_immutable().items():
        obj = model.objects.first()
        opts = model._meta
        base = f"/admin/{opts.app_label}/{opts.model_name}/"
        before = model.objects.filter(pk=obj.pk).values().get()
        page = client.get(f"{base}{obj.pk}/change/")
        assert page.status_code == 200, model
        body = page.content.decode()
        assert not EDITABLE.search(body), (model, EDITABLE.search(body))
        assert 'name="_save"' not in body and f"{base}{obj.pk}/delete/" not in body, model
        assert client.get(f"{base}add/").status_code == 403, model
        assert client.post(f"{base}{obj.pk}/change/", {}).status_code == 403, model
        assert client.get(f"{base}{obj.pk}/delete/").status_code == 403, model
        assert client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403, model
        client.post(base, {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"})
        assert model.objects.filter(pk=obj.pk).values().get() == before, model


def test_a_case_of_a_published_version_cannot_be_deleted(root, published):
    case = Case.objects.filter(input_set__version=published).first()
    cases = Case.objects.filter(input_set=case.input_set).count()
    response = logged_in(root).post(f"/admin/packs/case/{case.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert Case.objects.filter(input_set=case.input_set).count() == cases


def test_a_packs_slug_name_family_and_workspace_are_read_only(personas, root, published):
    pack = published.pack
    client = logged_in(root)
    body = client.get(f"/admin/packs/pack/{pack.pk}/change/").content.decode()
    for field in ("slug", "name", "family", "workspace"):
        assert f'name="{field}"' not in body
    response = client.post(
        f"/admin/packs/pack/{pack.pk}/change/",
        {
            "slug": "renamed-by-admin",
            "name": "Renamed",
            "family": "other",
            "workspace": personas.other_workspace.pk,
            "description": "Kept up to date by operators.",
            "versions-TOTAL_FORMS": "1",
            "versions-INITIAL_FORMS": "1",
            "versions-MIN_NUM_FORMS": "0",
            "versions-MAX_NUM_FORMS": "0",
            "versions-0-id": str(published.pk),
            "versions-0-pack": str(pack.pk),
        },
    )
    assert response.status_code == 302
    pack.refresh_from_db()
    assert (pack.slug, pack.name, pack.family, pack.workspace) == (
        "mental-math",
        "Mental Math",
        "reasoning",
        personas.workspace,
    )
    assert pack.description == "Kept up to date by operators."
    assert client.get("/admin/packs/pack/add/").status_code == 403


def test_a_pack_with_versions_cannot_be_deleted_and_one_without_can(personas, root, published):
    client = logged_in(root)
    pack = published.pack
    assert client.get(f"/admin/packs/pack/{pack.pk}/delete/").status_code == 403
    assert client.post(f"/admin/packs/pack/{pack.pk}/delete/", {"post": "yes"}).status_code == 403
    empty = Pack.objects.create(workspace=personas.workspace, slug="empty", name="Empty", family="x")
    page = client.post(
        "/admin/packs/pack/",
        {"action": "delete_selected", "_selected_action": [pack.pk, empty.pk], "post": "yes"},
    )
    assert "mental-math: has published versions" in page.content.decode()
    assert Pack.objects.filter(pk__in=[pack.pk, empty.pk]).count() == 2  # nothing deleted
    assert PackVersion.objects.filter(pk=published.pk).exists()
    response = client.post(f"/admin/packs/pack/{empty.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Pack.objects.filter(pk=empty.pk).exists()


def _artifact(personas, data: bytes) -> Artifact:
    return services.artifact_store(workspace=personas.workspace, data=data, filename="x.json").artifact


def test_an_artifact_is_deleted_only_when_nothing_references_it(personas, root, published):
    client = logged_in(root)
    bound = services.draft_file_add(
        draft=services.draft_create(
            workspace=personas.workspace, user=personas.owner, name="Bound draft", bundle_text=mental_math()
        ),
        path="data/answers.json",
        data=b'{"bound": 1}',
        user=personas.owner,
    )
    bound_artifact = Artifact.objects.get(public_id=bound.files["data/answers.json"])
    named_artifact = _artifact(personas, b'{"named": 1}')
    services.draft_create(
        workspace=personas.workspace,
        user=personas.owner,
        name="Naming draft",
        bundle_text=mental_math(asset_artifact_id=str(named_artifact.public_id)),
    )
    asset_artifact = Asset.objects.get(version=published).artifact
    cases = [
        (bound_artifact, "Bound draft", "binds it as data/answers.json"),
        (named_artifact, "Naming draft", "names it in pack.yaml"),
        (asset_artifact, "version:gold", ""),
    ]
    for artifact, referrer, how in cases:
        url = f"/admin/packs/artifact/{artifact.pk}/delete/"
        page = client.get(url).content.decode()
        assert "protected related objects" in page and referrer in page and how in page, referrer
        client.post(url, {"post": "yes"})
        assert Artifact.objects.filter(pk=artifact.pk).exists(), referrer
    page = client.post(
        "/admin/packs/artifact/",
        {"action": "delete_selected", "_selected_action": [bound_artifact.pk], "post": "yes"},
    )
    assert "Bound draft" in page.content.decode() and Artifact.objects.filter(pk=bound_artifact.pk).exists()
    unused = _artifact(personas, b'{"unused": 1}')
    assert client.post(f"/admin/packs/artifact/{unused.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Artifact.objects.filter(pk=unused.pk).exists()
    assert Draft.objects.count() == 2  # drafts are untouched either way
    for artifact, _referrer, _how in cases:  # a refused delete keeps the file too
        assert default_storage.exists(artifact.file.name)


def test_deleting_an_artifact_deletes_its_file_once_the_delete_commits(
    personas, root, django_capture_on_commit_callbacks
):
    # The row went and its file stayed in storage for good: nothing names it any more.
    client = logged_in(root)
    unused = _artifact(personas, b'{"unused": 1}')
    name = unused.file.name
    assert default_storage.exists(name)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/admin/packs/artifact/{unused.pk}/delete/", {"post": "yes"})
    assert not Artifact.objects.filter(pk=unused.pk).exists()
    assert not default_storage.exists(name)

    # A delete that rolls back keeps both.
    kept = _artifact(personas, b'{"kept": 1}')
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        Artifact.objects.filter(pk=kept.pk).delete()
        raise RuntimeError("rolled back")
    assert callbacks == [] and Artifact.objects.filter(pk=kept.pk).exists()
    assert default_storage.exists(kept.file.name)

    # The same bytes stored again after the delete: a new row and its file, readable.
    again = _artifact(personas, b'{"unused": 1}')
    assert again.file.name == name and services.artifact_read(artifact=again) == b'{"unused": 1}'


def test_an_api_tokens_user_and_workspace_cannot_be_changed_in_the_admin(personas, root):
    # The change form offered both: an operator could hand one person's credential to another.
    from agentclash_site.workspaces.models import ApiToken
    from agentclash_site.workspaces.services import token_create

    token_create(user=personas.owner, workspace=personas.workspace, name="ci")
    token = ApiToken.objects.get(name="ci")
    client = logged_in(root)
    page = client.get(f"/admin/workspaces/apitoken/{token.pk}/change/").content.decode()
    assert 'name="user"' not in page and 'name="workspace"' not in page
    client.post(
        f"/admin/workspaces/apitoken/{token.pk}/change/",
        {"user": personas.viewer.pk, "workspace": personas.other_workspace.pk, "name": "renamed", "revoked_at_0": "", "revoked_at_1": ""},
    )  # fmt: skip
    token.refresh_from_db()
    assert (token.user_id, token.workspace_id, token.name) == (
        personas.owner.pk,
        personas.workspace.pk,
        "renamed",
    )


def test_a_draft_is_shown_not_edited_in_the_admin(personas, root):
    # The change form let operators rewrite pack.yaml and bound files past the draft's checks.
    draft = Draft.objects.create(workspace=personas.workspace, name="wip", bundle_text="pack: {}\n")
    client = logged_in(root)
    page = client.get(f"/admin/packs/draft/{draft.pk}/change/").content.decode()
    for field in ("name", "bundle_text", "files", "workspace", "based_on", "revision"):
        assert f'name="{field}"' not in page
    client.post(
        f"/admin/packs/draft/{draft.pk}/change/", {"name": "x", "bundle_text": "changed", "files": "{}"}
    )
    draft.refresh_from_db()
    assert (draft.name, draft.bundle_text) == ("wip", "pack: {}\n")
    assert client.get("/admin/packs/draft/add/").status_code == 403


def test_a_judge_providers_workspace_cannot_be_changed_in_the_admin(personas, root):
    # The change form offered the workspace: moving the row handed one workspace's stored
    # API key (and its spend) to another workspace's judges.
    from grading.models import JudgeProviderConfig

    config = JudgeProviderConfig.objects.create(workspace=personas.workspace, kind="openai")
    config.set_api_key("sk-acme")
    config.save()
    client = logged_in(root)
    url = f"/admin/grading/judgeproviderconfig/{config.pk}/change/"
    assert 'name="workspace"' not in client.get(url).content.decode()
    response = client.post(
        url, {"workspace": personas.other_workspace.pk, "kind": "openai", "base_url": "", "model": "m"}
    )
    assert response.status_code == 302
    config.refresh_from_db()
    assert (config.workspace_id, config.model, config.api_key()) == (personas.workspace.pk, "m", "sk-acme")
    # The workspace's private-endpoint rule still applies on a change.
    private = {"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    assert client.post(url, private).status_code == 200
    config.refresh_from_db()
    assert config.base_url == ""
    # A new provider still names its workspace.
    assert 'name="workspace"' in client.get("/admin/grading/judgeproviderconfig/add/").content.decode()


def test_a_revoked_api_token_cannot_be_made_active_again_in_the_admin(personas, root):
    # revoked_at was an editable field: clearing it brought a revoked (say, leaked) token back.
    from agentclash_site.workspaces.services import token_create, token_revoke

    issued = token_create(user=personas.owner, workspace=personas.workspace, name="leaked")
    token = token_revoke(token=issued.token)
    client = logged_in(root)
    url = f"/admin/workspaces/apitoken/{token.pk}/change/"
    assert 'name="revoked_at_0"' not in client.get(url).content.decode()
    client.post(url, {"name": "leaked", "revoked_at_0": "", "revoked_at_1": ""})
    token.refresh_from_db()
    assert token.revoked_at is not None
    answer = personas.api(None)
    answer.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert answer.get("/api/v1/workspaces").status_code == 401


def test_a_workspace_with_runs_or_packs_is_refused_for_that_reason_without_reading_its_items(
    personas, root, published
):
    # The delete page collected every row the delete would cascade to, every run item with
    # its evidence and grade, to say the operator lacked permission to delete run items.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agentclash_site.workspaces.models import Workspace

    client = logged_in(root)
    url = f"/admin/workspaces/workspace/{personas.workspace.pk}/delete/"
    with CaptureQueriesContext(connection) as captured:
        page = client.get(url).content.decode()
    assert "Workspace acme: has runs and published pack versions, which are kept for good" in page
    assert not any(
        '"runs_runitem"' in q["sql"] or '"packs_case"' in q["sql"] for q in captured.captured_queries
    )
    assert client.post(url, {"post": "yes"}).status_code == 200
    page = client.post(
        "/admin/workspaces/workspace/",
        {"action": "delete_selected", "_selected_action": [personas.workspace.pk], "post": "yes"},
    ).content.decode()
    assert "Workspace acme: has runs" in page
    assert Workspace.objects.filter(pk=personas.workspace.pk).exists() and Run.objects.exists()
    # A workspace without that history is deleted as before.
    response = client.post(
        f"/admin/workspaces/workspace/{personas.other_workspace.pk}/delete/", {"post": "yes"}
    )
    assert response.status_code == 302 and not Workspace.objects.filter(slug="globex").exists()


class TestHistoryCreatedWhileAWorkspaceDeleteIsConfirmed:
    """get_deleted_objects found no history; a version is published (and a run created)
    before the delete itself. The version went with the workspace unseen (CASCADE), a run
    made it a 500 (ProtectedError: runs protect their version). The delete counts again under
    the lock and refuses, as a message; nothing of it is kept (no "deleted" log entry)."""

    @pytest.fixture(params=["version", "run"])
    def race(self, request, personas, monkeypatch):
        from agentclash_site.workspaces.admin import WorkspaceAdmin
        from runs.services.deployments import deployment_create
        from tests.runs.runfactory import create_run, publish

        check = WorkspaceAdmin.get_deleted_objects
        spare = personas.other_workspace

        def check_then_history_comes(admin, objs, request_):
            answer = check(admin, objs, request_)
            if request_.method == "POST":
                version = publish(spare, cases=1)
                if request.param == "run":
                    deployment = deployment_create(workspace=spare, name="d", kind="trace_import").deployment
                    create_run(spare, version, [deployment])
            return answer

        monkeypatch.setattr(WorkspaceAdmin, "get_deleted_objects", check_then_history_comes)
        held = "runs and published pack versions" if request.param == "run" else "published pack versions"
        self.REASON = f"Workspace globex: has {held}, which are kept for good"
        return spare

    def test_on_its_delete_page(self, root, race):
        from django.contrib.admin.models import LogEntry

        from agentclash_site.workspaces.models import Workspace

        response = logged_in(root).post(
            f"/admin/workspaces/workspace/{race.pk}/delete/", {"post": "yes"}, follow=True
        )
        assert response.redirect_chain == [(f"/admin/workspaces/workspace/{race.pk}/change/", 302)]
        assert [str(m) for m in response.context["messages"]] == [f"Not deleted: {self.REASON}."]
        assert Workspace.objects.filter(pk=race.pk).exists()
        assert not LogEntry.objects.exists()  # (the history, made in the page's transaction, went with it)

    def test_with_the_bulk_delete(self, personas, root, race):
        from django.contrib.admin.models import LogEntry

        from agentclash_site.workspaces.models import Workspace

        idle = Workspace.objects.create(slug="idle", name="Idle")
        response = logged_in(root).post(
            "/admin/workspaces/workspace/",
            {"action": "delete_selected", "_selected_action": [race.pk, idle.pk], "post": "yes"},
            follow=True,
        )
        assert response.status_code == 200
        assert [str(m) for m in response.context["messages"]] == [f"Not deleted: {self.REASON}."]
        assert Workspace.objects.filter(pk__in=[race.pk, idle.pk]).count() == 2  # none of them
        assert not LogEntry.objects.exists()


def test_a_workspace_delete_counts_its_history_with_its_packs_and_row_locked(personas, root):
    """What keeps a run or a version from committing between the count and the delete: the
    workspace's packs, then its row, locked before the count (see _workspaces_delete)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    spare = personas.other_workspace
    Pack.objects.create(workspace=spare, slug="unpublished", name="U", family="x")
    with CaptureQueriesContext(connection) as captured:
        response = logged_in(root).post(f"/admin/workspaces/workspace/{spare.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    sql = [q["sql"] for q in captured.captured_queries]
    first = {
        what: next(i for i, q in enumerate(sql) if q.endswith("FOR UPDATE") and f'FROM "{what}"' in q)
        for what in ("packs_pack", "workspaces_workspace")
    }
    counts = [i for i, q in enumerate(sql) if 'FROM "runs_run"' in q]
    assert first["packs_pack"] < first["workspaces_workspace"] < counts[-1], sql


def test_a_deployment_runs_used_is_refused_for_that_reason_and_an_unused_one_goes_through_the_service(
    personas, root, published, monkeypatch
):
    from runs.services import deployments

    client = logged_in(root)
    used = Deployment.objects.filter(lanes__isnull=False).distinct().first()
    page = client.get(f"/admin/runs/deployment/{used.pk}/delete/").content.decode()
    assert f"Deployment {used.name} (acme): used by runs, whose history names it" in page
    assert "permission to delete" not in page  # the old, wrong, reason
    client.post(f"/admin/runs/deployment/{used.pk}/delete/", {"post": "yes"})
    assert Deployment.objects.filter(pk=used.pk).exists()

    calls = []
    real = deployments.deployment_delete
    monkeypatch.setattr(
        deployments, "deployment_delete", lambda **kw: calls.append(kw["deployment"].pk) or real(**kw)
    )
    unused = deployments.deployment_create(
        workspace=personas.workspace, name="idle", kind="trace_import"
    ).deployment
    response = client.post(f"/admin/runs/deployment/{unused.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Deployment.objects.filter(pk=unused.pk).exists()
    assert calls == [unused.pk]


def test_an_api_tokens_digest_is_never_shown(personas, root):
    from agentclash_site.workspaces.models import ApiToken
    from agentclash_site.workspaces.services import token_create

    issued = token_create(user=personas.owner, workspace=personas.workspace, name="ci")
    token = ApiToken.objects.get(pk=issued.token.pk)
    client = logged_in(root)
    for url in (
        "/admin/workspaces/apitoken/",
        f"/admin/workspaces/apitoken/{token.pk}/change/",
        f"/admin/workspaces/apitoken/{token.pk}/history/",
    ):
        body = client.get(url).content.decode()
        assert token.digest not in body and issued.secret not in body, url
    assert token.hint in client.get(f"/admin/workspaces/apitoken/{token.pk}/change/").content.decode()


def test_artifact_and_asset_pages_link_no_media_address(root, published):
    # The read-only file field linked file.url, a /media/ address this site never serves
    # (stored files go out through the members' download views only): a 404 in the console.
    client = logged_in(root)
    asset = Asset.objects.get(version=published)
    pages = {
        f"/admin/packs/artifact/{asset.artifact.pk}/change/": asset.artifact.file.name,
        f"/admin/packs/asset/{asset.pk}/change/": asset.file.name or "-",
    }
    for url, name in pages.items():
        page = client.get(url)
        assert page.status_code == 200, url
        html = page.content.decode()
        assert not re.search(r'href="[^"]*/media/', html), url
        assert name in html, url


def test_a_worker_heartbeat_is_shown_not_written_in_the_admin(root):
    # Saving a heartbeat in the admin stamped it "seen now" (auto_now): a worker that does
    # not run, said to run.
    from agentclash_site.workspaces.models import WorkerHeartbeat

    beat = WorkerHeartbeat.objects.create(marker="worker-1")
    WorkerHeartbeat.objects.filter(pk=beat.pk).update(seen_at=beat.seen_at.replace(year=2020))
    client = logged_in(root)
    assert client.get("/admin/workspaces/workerheartbeat/add/").status_code == 403
    url = f"/admin/workspaces/workerheartbeat/{beat.pk}/change/"
    assert client.get(url).status_code == 200
    client.post(url, {"marker": "worker-1"})
    assert WorkerHeartbeat.objects.get(pk=beat.pk).seen_at.year == 2020
    assert (
        client.post(f"/admin/workspaces/workerheartbeat/{beat.pk}/delete/", {"post": "yes"}).status_code
        == 302
    )
    assert not WorkerHeartbeat.objects.exists()


class TestAVersionPublishedWhileAPackDeleteIsConfirmed:
    """The pack had no version when the delete was checked; one is published (and a run
    created on it) before the delete itself. The version went with the pack unseen
    (CASCADE), a run made it a 500 (runs protect their version). The delete counts again
    with the pack's row locked and refuses, as a message; nothing of it is kept."""

    @pytest.fixture(params=["version", "run"])
    def race(self, request, personas, monkeypatch):
        from packs.admin import PackAdmin
        from runs.services.deployments import deployment_create
        from tests.runs.runfactory import create_run

        pack = Pack.objects.create(
            workspace=personas.workspace, slug="mental-math", name="Mental Math", family="reasoning"
        )
        check = PackAdmin.get_deleted_objects

        def check_then_a_version_comes(admin, objs, request_):
            answer = check(admin, objs, request_)
            if request_.method == "POST":
                version = services.pack_version_publish(
                    workspace=personas.workspace, data=mental_math().encode(), user=personas.owner
                ).version
                if request.param == "run":
                    deployment = deployment_create(
                        workspace=personas.workspace, name="d", kind="trace_import"
                    )
                    create_run(personas.workspace, version, [deployment.deployment])
            return answer

        monkeypatch.setattr(PackAdmin, "get_deleted_objects", check_then_a_version_comes)
        return pack

    def test_on_its_delete_page(self, root, race):
        from django.contrib.admin.models import LogEntry

        response = logged_in(root).post(f"/admin/packs/pack/{race.pk}/delete/", {"post": "yes"}, follow=True)
        assert response.redirect_chain == [(f"/admin/packs/pack/{race.pk}/change/", 302)]
        messages = [str(m) for m in response.context["messages"]]
        assert messages == ["Not deleted: Pack mental-math: has published versions."]
        assert Pack.objects.filter(pk=race.pk).exists()
        assert not LogEntry.objects.exists()  # (the version, made in the page's transaction, went with it)

    def test_with_the_bulk_delete(self, personas, root, race):
        empty = Pack.objects.create(workspace=personas.workspace, slug="empty", name="Empty", family="x")
        response = logged_in(root).post(
            "/admin/packs/pack/",
            {"action": "delete_selected", "_selected_action": [race.pk, empty.pk], "post": "yes"},
            follow=True,
        )
        assert response.status_code == 200
        messages = [str(m) for m in response.context["messages"]]
        assert messages == ["Not deleted: Pack mental-math: has published versions."]
        assert Pack.objects.filter(pk__in=[race.pk, empty.pk]).count() == 2  # none of them


def test_a_pack_delete_counts_its_versions_with_its_row_locked(personas, root):
    # What keeps a publish onto the pack (which locks the pack's row) from committing
    # between the count and the delete.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    empty = Pack.objects.create(workspace=personas.workspace, slug="empty", name="Empty", family="x")
    with CaptureQueriesContext(connection) as captured:
        response = logged_in(root).post(f"/admin/packs/pack/{empty.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302 and not Pack.objects.filter(pk=empty.pk).exists()
    sql = [q["sql"] for q in captured.captured_queries]
    locked = next(i for i, q in enumerate(sql) if q.endswith("FOR UPDATE") and 'FROM "packs_pack"' in q)
    counted = max(i for i, q in enumerate(sql) if 'FROM "packs_packversion"' in q and "pack_id" in q)
    deleted = next(i for i, q in enumerate(sql) if q.startswith('DELETE FROM "packs_pack"'))
    assert locked < counted < deleted, sql


class TestAnAssetPublishedWhileAnArtifactDeleteIsConfirmed:
    """Nothing named the artifact when its delete was checked; a version is published with
    an asset on it before the delete itself: a 500 (ProtectedError). The delete checks again
    with the artifact's row locked and refuses, as a message; the artifact stays."""

    @pytest.fixture
    def race(self, personas, monkeypatch):
        from packs.admin import ArtifactAdmin

        artifact = _artifact(personas, b'{"answers": 1}')
        check = ArtifactAdmin.get_deleted_objects

        def check_then_an_asset_comes(admin, objs, request_):
            answer = check(admin, objs, request_)
            if request_.method == "POST":
                services.pack_version_publish(
                    workspace=personas.workspace,
                    data=mental_math(asset_artifact_id=str(artifact.public_id)).encode(),
                    user=personas.owner,
                )
            return answer

        monkeypatch.setattr(ArtifactAdmin, "get_deleted_objects", check_then_an_asset_comes)
        return artifact

    def test_on_its_delete_page(self, root, race):
        url = f"/admin/packs/artifact/{race.pk}/delete/"
        response = logged_in(root).post(url, {"post": "yes"}, follow=True)
        assert response.redirect_chain == [(f"/admin/packs/artifact/{race.pk}/change/", 302)]
        messages = [str(m) for m in response.context["messages"]]
        assert messages == [f"Not deleted: Artifact {race}: published assets use it."]
        assert Artifact.objects.filter(pk=race.pk).exists()

    def test_with_the_bulk_delete(self, personas, root, race):
        unused = _artifact(personas, b'{"unused": 1}')
        response = logged_in(root).post(
            "/admin/packs/artifact/",
            {"action": "delete_selected", "_selected_action": [race.pk, unused.pk], "post": "yes"},
            follow=True,
        )
        assert response.status_code == 200
        messages = [str(m) for m in response.context["messages"]]
        assert messages == [f"Not deleted: Artifact {race}: published assets use it."]
        assert Artifact.objects.filter(pk__in=[race.pk, unused.pk]).count() == 2  # none of them
