"""Admin lists cost the same number of queries for any number of rows."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentclash_site.workspaces.models import Workspace
from agentclash_site.workspaces.services import token_create
from runs.services.deployments import deployment_create
from tests.clients import logged_in

pytestmark = pytest.mark.django_db


def queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured.captured_queries)


def test_the_api_token_list_does_not_query_each_tokens_workspace(personas):
    # Django's automatic select_related follows only non-null keys: the workspace column
    # (null for a token of all the user's workspaces) cost one query per row.
    client = logged_in(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    token_create(user=personas.owner, workspace=personas.workspace, name="one")
    client.get("/admin/workspaces/apitoken/")  # the session and the like settle first
    one = queries(client, "/admin/workspaces/apitoken/")
    for n in range(4):
        workspace = Workspace.objects.create(slug=f"team-{n}", name=f"Team {n}")
        token_create(user=personas.editor, workspace=workspace, name=f"t{n}")
    assert queries(client, "/admin/workspaces/apitoken/") == one


# --- packs: versions, cases, assets and drafts at scale -------------------------------------

PACK_LISTS = [
    "/admin/packs/pack/",
    "/admin/packs/packversion/",
    "/admin/packs/case/",
    "/admin/packs/asset/",
    "/admin/packs/draft/",
]
# A version's bundle bytes and manifest (every case), its findings; a case's document; a
# draft's pack.yaml (up to 5 MiB) and bound files.
PACK_HEAVY = [
    '"packs_packversion"."manifest"',
    '"packs_packversion"."source"',
    '"packs_packversion"."critique_findings"',
    '"packs_case"."document"',
    '"packs_challenge"."definition"',
    '"packs_draft"."bundle_text"',
    '"packs_draft"."files"',
]


def sql_of(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    return [query["sql"] for query in captured.captured_queries]


def publish_versions(personas, numbers, *, slug: str = "mental-math") -> None:
    from packs import services
    from tests.packs.publish_fixtures import mental_math

    artifact = services.artifact_store(workspace=personas.workspace, data=b"{}", filename="a.json").artifact
    for number in numbers:
        services.pack_version_publish(
            workspace=personas.workspace,
            data=mental_math(
                slug=slug, number=number, extra_case=True, asset_artifact_id=str(artifact.public_id)
            ).encode(),
            user=personas.owner,
        )
        services.draft_create(
            workspace=personas.workspace,
            user=personas.owner,
            name=f"{slug} draft {number}",
            bundle_text=mental_math(slug=slug, number=number + 1),
        )


@pytest.fixture
def root_client(personas):
    client = logged_in(get_user_model().objects.create_superuser("root", password="pw-root-123"))
    client.get("/admin/")  # the session settles
    return client


def test_the_pack_lists_cost_the_same_queries_at_any_size_and_read_no_big_column(personas, root_client):
    publish_versions(personas, [1])
    small = {url: len(sql_of(root_client, url)) for url in PACK_LISTS}
    publish_versions(personas, range(2, 6))
    publish_versions(personas, range(1, 4), slug="other-math")
    for url in PACK_LISTS:
        queries = sql_of(root_client, url)
        assert len(queries) == small[url], url
        assert [c for c in PACK_HEAVY if any(c in sql for sql in queries)] == [], url
        assert sum("COUNT(*)" in sql for sql in queries) <= 2, url
    # The big tables count once, within a LIMIT, in their own order.
    for url in ("/admin/packs/packversion/", "/admin/packs/case/", "/admin/packs/asset/"):
        counts = [sql for sql in sql_of(root_client, url) if "COUNT(*)" in sql]
        assert len(counts) == 1 and "LIMIT 10001" in counts[0], url
    (cases,) = [sql for sql in sql_of(root_client, "/admin/packs/case/") if '"packs_case"."case_key"' in sql]
    assert cases.endswith('ORDER BY "packs_case"."id" DESC'), cases  # not through pack, version, set
    # Nor the versions through their pack's slug.
    (versions,) = [
        sql
        for sql in sql_of(root_client, "/admin/packs/packversion/")
        if '"packs_packversion"."number"' in sql and not sql.startswith("SELECT COUNT(*)")
    ]
    assert re.search(r'ORDER BY "packs_packversion"."id" DESC( LIMIT \d+)?$', versions), versions


def test_a_packs_page_lists_its_newest_versions_without_their_bundles(personas, root_client):
    from packs.models import Pack

    publish_versions(personas, range(1, 13))
    pack = Pack.objects.get(slug="mental-math")
    url = f"/admin/packs/pack/{pack.pk}/change/"
    queries = sql_of(root_client, url)
    assert [c for c in PACK_HEAVY if any(c in sql for sql in queries)] == []
    body = root_client.get(url).content.decode()
    assert "12 (the newest 10 below)" in body
    assert f'href="/admin/packs/packversion/?pack__id__exact={pack.pk}">all versions</a>' in body
    numbers = [int(n) for n in re.findall(r'<td class="field-number">\s*<p>(\d+)</p>', body)]
    assert numbers == list(range(12, 2, -1))
    listed = root_client.get(f"/admin/packs/packversion/?pack__id__exact={pack.pk}").content.decode()
    assert "12 pack versions" in listed


def test_a_draft_search_does_not_read_every_drafts_text(personas, root_client):
    publish_versions(personas, [1])
    queries = sql_of(root_client, "/admin/packs/draft/?q=Three+bags")
    assert not any('"packs_draft"."bundle_text"' in sql for sql in queries)
    assert "mental-math draft 1" in root_client.get("/admin/packs/draft/?q=draft+1").content.decode()


# --- the workspace filter of ten lists ------------------------------------------------------

# Each list's workspace filter and the parameter its slug box sends.
WORKSPACE_FILTERS = {
    "/admin/workspaces/membership/": "workspace__slug",
    "/admin/workspaces/apitoken/": "workspace__slug",
    "/admin/runs/deployment/": "workspace__slug",
    "/admin/runs/run/": "workspace__slug",
    "/admin/packs/pack/": "workspace__slug",
    "/admin/packs/packversion/": "pack__workspace__slug",
    "/admin/packs/case/": "input_set__version__pack__workspace__slug",
    "/admin/packs/asset/": "version__pack__workspace__slug",
    "/admin/packs/artifact/": "workspace__slug",
    "/admin/packs/draft/": "workspace__slug",
}


def test_the_workspace_filters_list_no_workspaces_and_cost_the_same_for_any_number(personas, root_client):
    """Django's related-field filter listed every workspace, a link each, on every load of
    these lists: a sidebar without bound. The slug box lists none."""
    from tests.runs.runfactory import create_run, publish

    publish_versions(personas, [1])
    token_create(user=personas.owner, workspace=personas.workspace, name="ci")
    deployment = deployment_create(workspace=personas.workspace, name="d", kind="trace_import").deployment
    create_run(personas.workspace, publish(personas.workspace, cases=1), [deployment])
    before = {url: len(sql_of(root_client, url)) for url in WORKSPACE_FILTERS}
    for n in range(12):
        Workspace.objects.create(slug=f"team-{n:02}", name=f"Team {n}")
    for url, param in WORKSPACE_FILTERS.items():
        assert len(sql_of(root_client, url)) == before[url], url
        body = root_client.get(url).content.decode()
        assert "team-00" not in body, url  # no workspace listed
        assert f'<input type="search" name="{param}" value=""' in body, url
        assert root_client.get(f"{url}?{param}=acme").context["cl"].result_count > 0, url
        assert root_client.get(f"{url}?{param}=team-00").context["cl"].result_count == 0, url
        assert root_client.get(f"{url}?_facets=True&{param}=acme").status_code == 200, url


def test_the_slug_box_keeps_the_lists_other_filters_and_an_empty_box_filters_nothing(personas, root_client):
    body = root_client.get("/admin/runs/run/?status__exact=queued&q=x&p=2").content.decode()
    assert '<input type="hidden" name="status__exact" value="queued">' in body
    assert '<input type="hidden" name="q" value="x">' in body
    assert 'name="p"' not in body  # a new filter starts on the first page
    everyone = root_client.get("/admin/workspaces/membership/").context["cl"]
    empty = root_client.get("/admin/workspaces/membership/?workspace__slug=+").context["cl"]
    assert empty.result_count == everyone.result_count
    acme = root_client.get("/admin/workspaces/membership/?workspace__slug=acme")
    assert acme.context["cl"].result_count == 3
    assert '<input type="search" name="workspace__slug" value="acme"' in acme.content.decode()


def test_the_artifact_lists_media_type_filter_reads_no_types_and_costs_the_same_for_any_number(
    personas, root_client
):
    """The field filter read every artifact's media type (a SELECT DISTINCT over the table)
    on each load and listed each one: fixed choices now, and "other" for the rest."""
    from packs.services import artifact_store

    url = "/admin/packs/artifact/"
    artifact_store(workspace=personas.workspace, data=b"{}", filename="a.json")
    before = sql_of(root_client, url)
    assert not any("DISTINCT" in sql for sql in before)
    for n in range(12):
        artifact_store(workspace=personas.workspace, data=b"%d" % n, media_type=f"application/x-kind-{n}")
    assert len(sql_of(root_client, url)) == len(before)
    body = root_client.get(url).content.decode()
    assert "application/x-kind-0" not in body.split('id="changelist-filter"')[1]  # not listed
    assert '?media_type=other"' in body
    assert root_client.get(f"{url}?media_type=application/json").context["cl"].result_count == 1
    assert root_client.get(f"{url}?media_type=other").context["cl"].result_count == 12
    assert root_client.get(f"{url}?_facets=True&media_type=other").status_code == 200


def test_a_public_id_searches_through_its_index_and_other_terms_as_before(personas, root_client):
    # icontains on public_id cast every row's UUID to text: a scan of every case, asset
    # and artifact for each search.
    from packs import services
    from packs.models import Artifact, Asset, Case, Draft, Pack, PackVersion

    publish_versions(personas, [1, 2])
    publish_versions(personas, [1], slug="other-math")
    services.artifact_store(workspace=personas.workspace, data=b"[]", filename="other.json")
    for model in (Pack, PackVersion, Case, Asset, Artifact, Draft):
        name = model._meta.model_name
        first, second = model.objects.order_by("pk")[:2]
        url = f"/admin/packs/{name}/?q={first.public_id}"
        queries = sql_of(root_client, url)
        assert not any("LIKE" in sql for sql in queries), name
        body = root_client.get(url).content.decode()
        assert f"/admin/packs/{name}/{first.pk}/change/" in body, name
        assert f"/admin/packs/{name}/{second.pk}/change/" not in body, name
    assert "other-math" in root_client.get("/admin/packs/pack/?q=other").content.decode()


def test_the_artifact_list_counts_within_a_limit_in_its_own_order(personas, root_client):
    # Every upload is an artifact: the list counted the whole table and sorted it by
    # created_at, which no index serves, before its first page.
    publish_versions(personas, [1])
    queries = sql_of(root_client, "/admin/packs/artifact/")
    counts = [sql for sql in queries if "COUNT(*)" in sql]
    assert len(counts) == 1 and "LIMIT 10001" in counts[0], counts
    (page,) = [sql for sql in queries if '"packs_artifact"."sha256"' in sql and "COUNT(" not in sql]
    assert re.search(r'ORDER BY "packs_artifact"."id" DESC( LIMIT \d+)?$', page), page


def test_a_packs_page_costs_the_same_queries_for_any_number_of_versions(personas, root_client):
    # Each version row read its publisher and its pack (its title) with a query of its own.
    from packs.models import Pack

    publish_versions(personas, [1])
    url = f"/admin/packs/pack/{Pack.objects.get(slug='mental-math').pk}/change/"
    sql_of(root_client, url)
    one = len(sql_of(root_client, url))
    publish_versions(personas, range(2, 8))
    assert len(sql_of(root_client, url)) == one


def test_the_other_lists_cost_the_same_queries_at_any_size(personas, root_client):
    from django.contrib.auth.models import Group

    from agentclash_site.workspaces.models import Membership, WorkerHeartbeat
    from grading.models import JudgeProviderConfig, ModelPrice

    lists = [
        "/admin/runs/deployment/",
        "/admin/workspaces/workspace/",
        "/admin/workspaces/membership/",
        "/admin/workspaces/workerheartbeat/",
        "/admin/grading/judgeproviderconfig/",
        "/admin/grading/modelprice/",
        "/admin/auth/user/",
        "/admin/auth/group/",
    ]

    def add_rows(start: int, stop: int) -> None:
        users = get_user_model().objects.bulk_create(
            get_user_model()(username=f"member-{n}") for n in range(start, stop)
        )
        for n, user in zip(range(start, stop), users, strict=True):
            workspace = Workspace.objects.create(slug=f"team-{n}", name=f"Team {n}")
            Membership.objects.create(workspace=workspace, user=user, role="owner")
            deployment_create(workspace=workspace, name=f"agent-{n}", kind="trace_import")
            JudgeProviderConfig.objects.create(workspace=workspace, kind="openai", model=f"judge-{n}")
            ModelPrice.objects.create(model=f"judge-{n}", input_usd_per_million=1, output_usd_per_million=2)
            WorkerHeartbeat.objects.create(marker=f"worker-{n}")
            Group.objects.create(name=f"group-{n}")

    add_rows(0, 1)
    small = {url: len(sql_of(root_client, url)) for url in lists}
    add_rows(1, 6)
    assert {url: len(sql_of(root_client, url)) for url in lists} == small


def test_the_version_lists_execution_mode_filter_reads_no_modes(personas, root_client):
    # A filter on the column's values read every version's mode (SELECT DISTINCT over the
    # whole table) on each page load.
    publish_versions(personas, [1, 2])
    queries = sql_of(root_client, "/admin/packs/packversion/")
    assert not any("DISTINCT" in sql for sql in queries), queries
    body = root_client.get("/admin/packs/packversion/").content.decode()
    assert "?execution_mode=multi_turn" in body  # every mode offered, used or not

    def listed(mode: str) -> int:
        body = root_client.get(f"/admin/packs/packversion/?execution_mode={mode}").content.decode()
        return len(re.findall(r'href="/admin/packs/packversion/\d+/change/', body))

    assert (listed("prompt_eval"), listed("native")) == (2, 0)
