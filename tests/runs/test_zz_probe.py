import json
import pytest
from django.test import Client
from runs.models import Run
from tests.runs.runfactory import publish
pytestmark = pytest.mark.django_db
BASE = "/api/v1/workspaces/acme/runs"

@pytest.mark.parametrize("status", ["draft", "queued", "failed", "cancelled", "completed", "scoring"])
def test_probe(personas, status):
    version = publish(personas.workspace, cases=2)
    run = Run.objects.create(workspace=personas.workspace, pack_version=version, name="bare", status=status, stats={"lanes": [], "ranking": [], "eval_feedback": {"suggestions": [], "overall": "x"}} if status == "completed" else None)
    client = Client(); client.force_login(personas.viewer)
    api = personas.api(personas.viewer)
    for url in (f"/runs/{run.pk}/", f"/runs/{run.pk}/cases/", f"/runs/{run.pk}/?partial=live", f"/runs/{run.pk}/?partial=grid", "/runs/", f"/runs/{run.pk}/export/junit/", f"/runs/compare/?baseline={run.pk}&candidate={run.pk}"):
        r = client.get(url)
        if r.status_code >= 500: print("PAGE", url, r.status_code)
    for url in (f"{BASE}/{run.pk}", f"{BASE}/{run.pk}/cases", BASE, *(f"{BASE}/{run.pk}/export?format={f}" for f in ("jsonl","csv","junit","grading"))):
        r = api.get(url)
        if r.streaming: b"".join(r.streaming_content)
        if r.status_code >= 500: print("API", url, r.status_code)
    r = api.get(f"{BASE}/{run.pk}/export?format=junit")
    print(status, b"".join(r.streaming_content))
