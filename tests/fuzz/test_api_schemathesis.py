"""schemathesis against the app's own OpenAPI schema (``/api/v1/schema/``), in-process (WSGI).

Every operation gets a bounded number of generated requests with an owner's bearer token;
the workspace path parameter is pinned to that owner's workspace (random slugs would only
ever reach the 404 branch). Checks: no 5xx, and every response conforms to the schema
(documented status code, content type, body). ``SCHEMATHESIS_EXAMPLES`` raises the count.

The examples are derandomised so the suite gives the same answer on every run (a fuzz test
that fails only sometimes is a flaky build, not a finding); ``SCHEMATHESIS_RANDOM=1`` explores
new examples, e.g. ``SCHEMATHESIS_RANDOM=1 SCHEMATHESIS_EXAMPLES=50 make pytest
ARGS=tests/fuzz/test_api_schemathesis.py``, and every bug found that way gets its own test.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agentclash_site.workspaces.services import token_create
from agentclash_site.wsgi import application

pytestmark = pytest.mark.django_db(transaction=False)

SNIPPET = int(os.environ.get("SCHEMATHESIS_SNIPPET", "1500"))
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "8"))
DERANDOMIZE = os.environ.get("SCHEMATHESIS_RANDOM") != "1"
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
WORKSPACE_PARAMS = ("ws", "workspace", "workspace_slug", "slug_ws")


@pytest.fixture
def keep_test_connection():
    """The WSGI handler closes old connections around each request; the test's transaction
    must survive (Django's own test client disconnects the same receivers)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def _operations():
    schema = schemathesis.openapi.from_wsgi("/api/v1/schema/", application)
    for result in schema.get_all_operations():
        yield result.ok()


def test_every_operation_answers_without_5xx_and_within_its_schema(personas, keep_test_connection):
    issued = token_create(user=personas.owner, workspace=None)
    headers = {"Authorization": f"Bearer {issued.secret}"}
    operations = list(_operations())
    assert operations, "the schema lists no operations"
    failures: list[str] = []
    for operation in operations:

        @settings(
            max_examples=EXAMPLES,
            derandomize=DERANDOMIZE,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def run(case):
            for name in WORKSPACE_PARAMS:
                if case.path_parameters and name in case.path_parameters:
                    case.path_parameters[name] = personas.workspace.slug
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            run()
        except FailureGroup as exc:  # collected so one run reports every failing operation
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:SNIPPET]}")
        except Exception as exc:
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:SNIPPET]}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/no-such-route",
        # Not under packs/: any text there is a pack slug (pack-format §1), so it is routed.
        "/api/v1/workspaces/acme/runs/x/cases/-3",  # <uuid:run_id> does not match x
        "/api/v1/workspaces/acme/deployments/%0A%C3%81X",  # a newline where a UUID goes
    ],
)
def test_an_unrouted_api_url_is_a_json_404_not_the_html_page(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "not_found"
