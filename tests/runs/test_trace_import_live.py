"""The overview's upload panel, as a user takes it: the curl command copied from the page of a
live server and run as it is (with a results file beside it) uploads the results, and the
cases are graded and counted."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import urllib.request

import pytest
from django.test import Client

from agentclash_site.workspaces.services import token_create
from runs.models import RunItem
from runs.services.deployments import deployment_create
from tests.runs.runfactory import create_run, publish

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


def _page(live_server, user, run) -> str:
    client = Client()
    client.force_login(user)
    request = urllib.request.Request(
        f"{live_server.url}/runs/{run.id}/",
        headers={"Cookie": f"sessionid={client.cookies['sessionid'].value}"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


def _code(page: str, element_id: str) -> str:
    found = re.search(rf'<code id="{element_id}">(.*?)</code>', page, re.S)
    assert found, f"no #{element_id} on the page"
    return html.unescape(found.group(1))


@pytest.mark.django_db(transaction=True)
def test_the_pages_curl_command_uploads_the_results(personas, live_server, tmp_path):
    version = publish(personas.workspace, cases=2)
    deployment = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [deployment])
    page = _page(live_server, personas.editor, run)
    command = _code(page, "upload-curl")
    example = json.loads(_code(page, "upload-line"))
    assert command.startswith(f'curl --fail-with-body -X POST "{live_server.url}/api/')
    assert "Up to 64 MB an upload (decompressed): split a larger file into several uploads." in page
    lines = []
    for i in range(2):  # the page's sample line, filled in for each case
        lines.append(
            json.dumps({**example, "case_key": f"c{i}", "final_output": f"answer-{i}" if i else "no"})
        )
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n")
    token = token_create(user=personas.editor, workspace=personas.workspace, name="uploads").secret
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "AGENTCLASH_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout) == {"accepted": 2, "run": {"id": str(run.id), "status": "completed"}}
    assert dict(RunItem.objects.filter(run=run).values_list("case_key", "status")) == {
        "c0": "FAILED",
        "c1": "PASSED",
    }
    run.refresh_from_db()
    assert (run.items_open, run.stats["lanes"][0]["counts"]["PASSED"]) == (0, 1)
    # sent again to the completed run: refused, and curl fails with the answer
    again = subprocess.run(
        ["bash", "-c", command],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "AGENTCLASH_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 22 and json.loads(again.stdout)["error"]["code"] == "run_not_accepting_results"
