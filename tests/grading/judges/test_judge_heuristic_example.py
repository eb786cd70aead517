"""The example heuristic judge (not a model) as a real process on loopback, driven by the
LLMJudge exactly as the demo uses it, and grading.demo.setup."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.grading.judges.helpers import assertion, case, evidence, grade, judge_result, spec
from tests.processes import free_port, wait_until

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "examples" / "judges" / "heuristic_judge.py"


@pytest.fixture(scope="module")
def heuristic():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import heuristic_judge
    finally:
        sys.path.remove(str(SCRIPT.parent))
    server = heuristic_judge.make_server("127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def _judge(url):
    from grading.judges import LLMJudge, ProviderConfig

    return LLMJudge(ProviderConfig(kind="openai", base_url=url, allow_private=True))


def test_reference_overlap_scores_and_cites(heuristic):
    j = {
        "key": "j",
        "mode": "reference",
        "rubric": "same as the reference",
        "model": "claude-haiku-4-5",
        "samples": 1,
        "reference_from": "case.expectations.answer",
    }
    with _judge(heuristic) as judge:
        good = judge_result(grade(judge, spec(j), ev=evidence("Paris"), c=case(answer="Paris")))
        bad = judge_result(grade(judge, spec(j), ev=evidence("Berlin"), c=case(answer="Paris")))
    assert good.status.value == "PASSED" and good.score == 1.0
    assert good.evidence_refs == ["final_output", "case.expectations.answer"]
    assert "example heuristic" in good.details["samples"][0]["reasoning"]
    assert "served by example-heuristic-judge" in good.evidence
    assert bad.status.value == "FAILED" and bad.score == 0.0


def test_assertion_and_zero_cost(heuristic):
    with _judge(heuristic) as judge:
        g = grade(judge, spec(assertion(samples=1, assertion="mentions Paris")), ev=evidence("It is Paris."))
    assert judge_result(g).status.value == "PASSED" and g.judge_usage.cost_usd == 0.0


@pytest.mark.slow
def test_runs_as_a_script(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", str(port), "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:

        def up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1) as r:
                    return b"example-heuristic-judge" in r.read()
            except OSError:
                return False

        wait_until(up, timeout=10)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.django_db
def test_demo_setup_points_the_workspace_at_the_example(personas):
    from grading.demo import setup
    from grading.models import JudgeProviderConfig

    out = io.StringIO()
    setup(workspace=personas.workspace, user=personas.owner, stdout=out)
    setup(workspace=personas.workspace, user=personas.owner, stdout=out)  # idempotent
    cfg = JudgeProviderConfig.objects.get(workspace=personas.workspace)
    assert cfg.base_url == "http://127.0.0.1:8765/v1" and cfg.model == "example-heuristic-judge"
    assert "not a model" in out.getvalue()
    cfg.set_api_key("sk-real")
    cfg.save()
    setup(workspace=personas.workspace, user=personas.owner, stdout=out)
    assert "kept" in out.getvalue().splitlines()[-1]
