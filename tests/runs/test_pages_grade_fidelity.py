"""The case page shows what the stored grading document says (grading.md §2, §7, §8): every
outcome class of an ungraded expectation, detail values as the JSON they are (a huge one
cut, with the way to the whole), and every field of a claim with its evidence."""

from __future__ import annotations

import html
import re
from types import SimpleNamespace
from typing import Any

import pytest

from runs.models import Run, RunItem
from runs.seeding import seed_run
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(personas) -> Run:
    return seed_run(workspace=personas.workspace, items=8, lanes=2, name="fidelity", infra_error_rate=0.0)


@pytest.fixture
def owner(personas):
    return login(personas.owner)


def _expectation(key: str, status: str, outcome_class: str, reason_code: str | None, **extra: Any) -> dict:
    return {
        "key": key,
        "kind": "validator",
        "text": f"check {key}",
        "score": None,
        "gating": False,
        "passed": {"PASSED": True, "FAILED": False}.get(status),
        "status": status,
        "details": {},
        "evidence": f"{status}: evidence of {key}",
        "threshold": None,
        "reason_code": reason_code,
        "evidence_refs": [],
        "outcome_class": outcome_class,
        "per_invocation_scores": None,
        **extra,
    }


def _graded_item(run: Run, **changes: Any) -> RunItem:
    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    item.grade = {**item.grade, **changes}
    item.save(update_fields=["grade"])
    return item


def _text(body: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", body)))


# every (status, outcome class) pair of grading.md §2 that carries no verdict
UNGRADED = [
    ("NOT_EVALUATED", "pack_error", "reference_missing"),
    ("NOT_EVALUATED", "unavailable", "no_judge_provider"),
    ("UNAVAILABLE", "unavailable", "channel_unavailable"),
    ("UNAVAILABLE", "infra_error", "channel_unavailable"),
    ("ERROR", "evaluator_error", "timeout"),
    ("ERROR", "infra_error", "timeout"),
]


def test_each_ungraded_expectation_shows_its_outcome_class(run, owner):
    """ERROR could be the evaluator's fault or the sandbox's, NOT_EVALUATED the pack author's
    or not applicable: the page showed the status and reason code only, so an ERROR of a
    crashed evaluator and one of an unreachable sandbox read the same."""
    expectations = [_expectation(f"e{i}", *row) for i, row in enumerate(UNGRADED)]
    item = _graded_item(run, expectations=expectations)
    for url in (f"/runs/{run.id}/cases/{item.id}/", f"/runs/{run.id}/cases/{item.id}/expectations/"):
        body = owner.get(url, HTTP_HX_REQUEST="true" if "expectations/" in url else "").content.decode()
        shown = re.findall(r'data-testid="expectation-outcome">([^<]*)<', body)
        assert shown == [f"{status} · {outcome}" for status, outcome, _ in UNGRADED], url


def test_detail_values_show_as_json_and_a_huge_one_is_cut_with_the_way_to_all_of_it(run, owner):
    """Details rendered as Python reprs (``['a']``, ``True``, ``None``) where grading.json says
    ``["a"]``, ``true``, ``null``; and a 300,000-character value went into the page whole."""
    huge = {"rows": [f"ψ-row-{i:06d}" for i in range(30_000)]}
    details = {"observed_names": ["read_file", "write_file"], "ok": True, "missing": None, "blob": huge}
    item = _graded_item(run, expectations=[_expectation("big", "FAILED", "fail", None, details=details)])
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    text = _text(body)
    assert '["read_file", "write_file"]' in text and " true " in text and " null " in text
    assert "['read_file'" not in text and "True" not in text
    assert "ψ-row-000000" in text and "ψ-row-029999" not in text
    assert len(body) < 100_000
    assert re.search(r"[\d,]+ more characters: the whole value is in grading\.json", text)
    assert f'href="/runs/{run.id}/cases/{item.id}/?format=json"' in body


def test_the_claims_ledger_shows_every_claim_field_and_all_its_evidence(run, owner):
    """grading.md §8: each claim records its source (deterministic or llm) and evidence_refs;
    the ledger left out the source, and dropped every evidence ref the transcript has no
    anchor for (here ``case.expectations.answer``), so an llm claim's citation vanished."""
    claims = [
        {
            "id": "claim-1",
            "claim": "I ran the tests.",
            "type": "process",
            "kind": "tests_ran",
            "source": "deterministic",
            "verified": True,
            "evidence": "shell: pytest -q",
            "span": [0, 16],
            "evidence_refs": ["tool_call:0"],
        },
        {
            "id": "claim-2",
            "claim": "The total is 1280.5.",
            "type": "factual",
            "kind": "llm",
            "source": "llm",
            "verified": False,
            "evidence": "report.json says 1690.49",
            "span": [17, 37],
            "evidence_refs": ["case.expectations.answer"],
        },
        {
            "id": "claim-3",
            "claim": "The code is clean.",
            "type": "quality",
            "kind": "llm",
            "source": "llm",
            "verified": None,
            "evidence": "no pack judge covers it",
            "span": None,
            "evidence_refs": [],
        },
    ]
    item = _graded_item(run, claims=claims)
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    rows = re.findall(r'<tr data-testid="claim">(.*?)</tr>', body, re.S)
    assert len(rows) == 3
    first, second, third = (_text(r) for r in rows)
    assert "deterministic" in first and "verified" in first and "tests_ran" in first
    assert f'href="/runs/{run.id}/cases/{item.id}/transcript/?at=ev-tool_call-0#ev-tool_call-0"' in rows[0]
    assert "llm" in second and "contradicted" in second and "case.expectations.answer" in second
    assert "llm" in third and "unverifiable" in third and "quality" in third


def _leaderboard_rows(body: str) -> dict[str, str]:
    table = body.split('class="leaderboard"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>", 1)[1], re.S)
    return {re.search(r'<th scope="row">\s*<bdi>([^<]*)</bdi>', r).group(1): _text(r) for r in rows}


def test_a_lanes_cancelled_items_are_counted_on_the_leaderboard(personas, owner):
    """The "Not graded" column listed unavailable, not evaluated, error, infra, config and
    pending, but not cancelled: a cancelled run's lane showed fewer items than it had."""
    from runs.models import RunLane

    run = seed_run(workspace=personas.workspace, items=8, lanes=2, status="cancelled", done_fraction=0.5)
    lane = RunLane.objects.filter(run=run).order_by("position").first()
    RunLane.objects.filter(id=lane.id).update(cancelled=lane.pending, pending=0)
    lane.refresh_from_db()
    rows = _leaderboard_rows(owner.get(f"/runs/{run.id}/").content.decode())
    assert lane.cancelled and f"cancelled {lane.cancelled}" in rows[lane.deployment_name]


def test_each_leaderboard_interval_names_its_method_and_n(run, owner):
    """grading.md §10.3: the pass rate's interval is Wilson's over n graded cases, the mean
    score's a percentile bootstrap over n scored cases (none below 2). The leaderboard showed
    bare ranges: nothing said how they were made or over how many cases."""
    from runs.models import RunLane

    rows = _leaderboard_rows(owner.get(f"/runs/{run.id}/").content.decode())
    for lane in RunLane.objects.filter(run=run):
        shown, stats = rows[lane.deployment_name], lane.stats
        assert f"Wilson 95%, n = {stats['graded_cases']}" in shown
        if stats["mean_score_interval"]:
            assert f"bootstrap 95%, n = {stats['scored_cases']}" in shown
    lane = RunLane.objects.filter(run=run).first()
    RunLane.objects.filter(id=lane.id).update(
        stats={**lane.stats, "mean_score_interval": None, "scored_cases": 1}
    )
    rows = _leaderboard_rows(owner.get(f"/runs/{run.id}/").content.decode())
    assert "no interval below 2 scored cases (n = 1)" in rows[lane.deployment_name]


def test_the_case_page_links_the_runs_findings_and_shows_the_grades_notes(run, owner):
    """grading.md §9(b): the run's health findings are stored on the run, "which each case
    grade links to"; the case page showed only the case's own suggestions, and not at all the
    grade's ``eval_feedback.notes`` (a failed model-claims pass said nowhere)."""
    feedback = {
        "overall": "1 finding: 1 no_discrimination.",
        "suggestions": [
            {"assertion": "answer", "reason": "passes for every lane", "finding": "no_discrimination"}
        ],
    }
    Run.objects.filter(id=run.id).update(stats={**run.stats, "eval_feedback": feedback})
    note = "model claims failed: TimeoutError: judge timed out"
    item = _graded_item(run, eval_feedback={"overall": "No findings.", "suggestions": [], "notes": [note]})
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert note in _text(body)
    assert f'href="/runs/{run.id}/#eval-feedback"' in body and "1 finding: 1 no_discrimination." in body
    overview = owner.get(f"/runs/{run.id}/").content.decode()
    assert 'id="eval-feedback"' in overview and "passes for every lane" in overview


def test_a_long_output_is_cut_on_the_transcript_page_and_whole_in_its_download(run, owner):
    """A final output over the page's limit said "the export holds everything": the way to
    one case's whole output was the whole run's export, and the Markdown download next to
    it was cut the same."""
    from runs.transcript import MAX_SHOWN_CHARS

    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    tail = "—END-OF-OUTPUT-שלום"
    output = "x" * MAX_SHOWN_CHARS + tail
    evidence = dict(item.evidence)
    evidence["response"] = {**evidence["response"], "final_output": output}
    RunItem.objects.filter(id=item.id).update(evidence=evidence)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    body = owner.get(url).content.decode()
    note = re.search(r'data-testid="shown-in-part">(.*?)</p>', body, re.S)
    assert note and f"the first {MAX_SHOWN_CHARS} of {len(output)} characters" in note.group(1)
    assert 'href="?format=md"' in note.group(1) and tail not in body
    download = owner.get(url + "?format=md").content.decode()
    assert output in download


def test_a_file_truncated_at_capture_says_the_rest_was_never_recorded(run, owner):
    """A file cut when it was captured (over 1 MiB) said "the export holds everything"; the
    export holds what was captured, so the page now says the rest was never recorded."""
    from grading.engine.evidence import MAX_FILE_BYTES

    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    evidence = dict(item.evidence)
    files = {"big.log": "y" * (MAX_FILE_BYTES + 10)}
    evidence["response"] = {**evidence["response"], "files": files}
    RunItem.objects.filter(id=item.id).update(evidence=evidence)
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/").content.decode()
    big = body.split('id="ev-path-big_2e_log"', 1)[1].split("</li>", 1)[0]
    assert "truncated before AgentClash received it" in big and "the export holds everything" not in big


def _scorecard(overall: float | None, threshold: float | None, passed: bool | None) -> dict:
    dims = [
        {"key": "correctness", "gate": False, "score": 0.6, "source": "validators", "status": "PASSED",
         "weight": 1.0, "pass_threshold": None},
        {"key": "latency", "gate": False, "score": 1.0, "source": "latency", "status": "PASSED",
         "weight": 1.0, "pass_threshold": None},
    ]  # fmt: skip
    return {"strategy": "weighted", "overall_score": overall, "passed": passed,
            "pass_threshold": threshold, "dimensions": dims}  # fmt: skip


def test_the_scorecard_says_the_overall_threshold_that_decided_the_case(run, owner):
    """grading.md §10.2: with no gate the overall threshold (1.0 when none is declared) is
    the gating input. Every dimension read "PASSED ... cannot fail" next to a FAILED case,
    and the page never said the overall score fell below the threshold."""
    item = _graded_item(run, scorecard=_scorecard(0.8, 1.0, False), status="FAILED")
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    said = re.search(r'data-testid="overall-threshold">(.*?)</p>', body, re.S)
    assert said and "overall 0.8000 is below the pass threshold 1.0: the scorecard failed" in _text(
        said.group(1)
    )
    item = _graded_item(run, scorecard=_scorecard(0.8, 0.75, True), status="PASSED")
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    said = re.search(r'data-testid="overall-threshold">(.*?)</p>', body, re.S)
    assert said and "overall 0.8000 meets the pass threshold 0.75: the scorecard passed" in _text(
        said.group(1)
    )
    item = _graded_item(run, scorecard=_scorecard(None, 1.0, None), status="NOT_EVALUATED")
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    said = re.search(r'data-testid="overall-threshold">(.*?)</p>', body, re.S)
    assert said and "no dimension was graded, so the pass threshold 1.0 was not applied" in _text(
        said.group(1)
    )


def test_a_comparison_with_a_run_still_going_says_it_covers_the_cases_finished_so_far(personas, owner):
    """The stored comparison records each unfinished run (``result.unfinished``) and is
    recomputed as cases finish, but the page never said so: a half-finished candidate read
    as a final verdict, its pending cases as plain not_comparable rows."""
    from runs.compare_tasks import comparison_request, compute_comparison

    baseline = seed_run(workspace=personas.workspace, items=8, lanes=2, name="base", seed=1)
    candidate = seed_run(
        workspace=personas.workspace,
        items=8,
        lanes=2,
        name="cand",
        seed=2,
        status="running",
        done_fraction=0.5,
    )
    compute_comparison(comparison_request(baseline=baseline, candidate=candidate).id)
    candidate.refresh_from_db()
    body = owner.get(f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}").content.decode()
    said = re.search(r'data-testid="unfinished">(.*?)</p>', body, re.S)
    assert said and candidate.items_open
    assert f"The candidate is still running ({candidate.items_open} items not finished)" in _text(
        said.group(1)
    )


def test_the_grid_of_a_repeated_run_shows_every_repetition_of_a_cell(personas, owner):
    """With repetitions the grid read repetition 1 only and called it "the case's status":
    a case that passed once and failed twice showed PASSED."""
    run = seed_run(workspace=personas.workspace, items=4, lanes=2, infra_error_rate=0.0)
    Run.objects.filter(id=run.id).update(repetitions=3)
    first = RunItem.objects.filter(run=run, repetition=1, status="PASSED").order_by("id").first()
    for rep in (2, 3):
        clone = RunItem.objects.get(id=first.id)
        clone.pk = None
        clone.repetition, clone.status, clone.outcome_class, clone.score = rep, "FAILED", "fail", 0.0
        clone.save()
    body = owner.get(f"/runs/{run.id}/").content.decode()
    cell = re.search(
        rf'<td class="cell[^"]*">\s*<a href="/runs/{run.id}/cases/{first.id}/".*?</td>', body, re.S
    )
    assert cell and "1 of 3 passed" in _text(cell.group(0))
    others = re.findall(r'data-testid="cell-repetitions"[^>]*>([^<]*)<', body)
    assert len(others) == 4 and all(o.endswith("of 1 passed") or o == "1 of 3 passed" for o in others)


def test_the_case_list_of_a_repeated_run_names_every_rows_repetition(personas, owner):
    """Only repetitions 2 and up were labelled, so repetition 1 of a case read as the case."""
    run = seed_run(workspace=personas.workspace, items=4, lanes=2, infra_error_rate=0.0)
    Run.objects.filter(id=run.id).update(repetitions=2)
    body = owner.get(f"/runs/{run.id}/cases/").content.decode()
    rows = re.findall(r'<tr id="item-\d+">(.*?)</tr>', body, re.S)
    assert len(rows) == 4 and all("rep 1" in _text(r) for r in rows)


def test_right_to_left_deployment_names_are_isolated_next_to_their_figures(personas, owner):
    """An RTL deployment name followed by its counts ("שלום 3✓ 1✗") took the numbers into
    its right-to-left run, so they showed on the wrong side of the name: every page
    isolates names with <bdi>, the run list and the case page's panels did not."""
    from runs.models import RunLane

    run = seed_run(workspace=personas.workspace, items=4, lanes=2, name="rtl")
    lane = RunLane.objects.filter(run=run).order_by("position").first()
    RunLane.objects.filter(id=lane.id).update(deployment_name="שלום")
    assert "<bdi>שלום</bdi>" in owner.get("/runs/").content.decode()
    other = RunItem.objects.filter(run=run).exclude(lane=lane).filter(status__in=("PASSED", "FAILED")).first()
    body = owner.get(f"/runs/{run.id}/cases/{other.id}/").content.decode()
    side = body.split('aria-labelledby="side-h"', 1)[1]
    assert "<bdi>שלום</bdi>" in side
    listed = owner.get(f"/runs/{run.id}/cases/").content.decode()
    assert "<td><bdi>שלום</bdi></td>" in listed


def test_a_re_scored_case_lists_its_earlier_grades(run, owner):
    """A re-score archives the case's grade ("old ones stay viewable", runs/MODELS.md) and the
    API lists them, but the case page showed only the current grade: a case that flipped on
    re-scoring gave no sign of it."""
    from runs.models import GradeRevision

    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    old = {**item.grade, "status": "PASSED", "outcome_class": "pass"}
    GradeRevision.objects.create(
        item=item, revision=1, status="PASSED", outcome_class="pass", score=1.0, grade=old
    )
    RunItem.objects.filter(id=item.id).update(scoring_revision=2)
    Run.objects.filter(id=run.id).update(scoring_revision=2)
    url = f"/runs/{run.id}/cases/{item.id}/"
    body = owner.get(url).content.decode()
    rows = re.findall(r'<tr data-testid="grade-revision">(.*?)</tr>', body, re.S)
    assert len(rows) == 1 and "1 PASSED pass 1.0000" in _text(rows[0])
    assert f'href="{url}?format=json&amp;revision=1"' in rows[0]
    assert "revision 2 (current)" in _text(body)
    archived = owner.get(f"{url}?format=json&revision=1")
    assert archived.status_code == 200 and archived.json()["status"] == "PASSED"
    assert owner.get(f"{url}?format=json&revision=7").status_code == 404
    assert owner.get(f"{url}?format=json&revision=x").status_code == 404
    assert owner.get(f"{url}?format=json&revision=1%0D%0AX-Injected:%201").status_code == 404
    assert owner.get(f"{url}?format=json&revision=1%0A").status_code == 404


def test_the_error_filter_is_not_called_evaluator_error(run, owner):
    """grading.md §2: an ERROR is an evaluator_error or an infra_error (the sandbox or the
    judge provider failed after retries). The filter of ERROR cases read "Evaluator error",
    so a judge-provider outage was listed as the evaluator's fault."""
    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    RunItem.objects.filter(id=item.id).update(status="ERROR", outcome_class="infra_error", score=None)
    body = owner.get(f"/runs/{run.id}/cases/?status=error").content.decode()
    assert re.search(r'<option value="error" selected>Error \(grading failed\)</option>', body)
    row = re.search(rf'<tr id="item-{item.id}">(.*?)</tr>', body, re.S)
    assert row and "ERROR infra_error" in _text(row.group(1))


def test_a_graded_validator_below_its_threshold_does_not_read_as_above_it(run, owner):
    """A graded validator's line read "score 0.7500 ≥ 0.8" next to its FAIL badge: the
    threshold was printed as if the score met it."""
    partial = _expectation("similar", "FAILED", "fail", None, score=0.75, threshold=0.8)
    item = _graded_item(run, expectations=[partial])
    text = _text(owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode())
    assert "score 0.7500 ≥ 0.8" not in text
    assert "score 0.7500, passes at ≥ 0.8" in text


def test_an_ungraded_case_advises_a_retry_only_where_retry_failed_items_sends_it(personas, owner):
    """Every case without a grade said '"retry failed items" re-sends it', a cancelled case
    too (retry sends infra and config errors only) and any case of a cancelled run (which
    cannot retry)."""
    run = seed_run(workspace=personas.workspace, items=8, lanes=2, infra_error_rate=0.5)
    infra = RunItem.objects.filter(run=run, last_category="infra_error").order_by("id").first()
    cancelled = RunItem.objects.filter(run=run, status__in=("PASSED", "FAILED")).order_by("id").first()
    RunItem.objects.filter(id=cancelled.id).update(
        status="", outcome_class="", score=None, grade=None, state="cancelled", last_category="cancelled"
    )

    def said(item: RunItem) -> str:
        body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
        return _text(re.search(r'aria-labelledby="nograde-h">(.*?)</section>', body, re.S).group(1))

    assert "retry failed items" in said(infra).lower()
    assert "retry failed items" not in said(cancelled).lower() and "cancelled" in said(cancelled)
    Run.objects.filter(id=run.id).update(status="cancelled")
    assert "retry failed items" not in said(infra).lower() and "start a new run" in said(infra)


def test_a_lanes_worst_validity_shows_on_the_leaderboard(run, owner):
    """grading.md §10.2: lanes carry the worst case validity plus counts per value (a case is
    invalid when a validator or judge it scores by ERRORed). The stored figures were never
    shown: a lane whose pass rate rested on invalid cases looked like any other."""
    from runs.models import RunLane

    lane = RunLane.objects.filter(run=run).order_by("position").first()
    counts = {"valid": 2, "degraded": 1, "invalid": 1}
    RunLane.objects.filter(id=lane.id).update(
        stats={**lane.stats, "validity": "invalid", "validity_counts": counts}
    )
    rows = _leaderboard_rows(owner.get(f"/runs/{run.id}/").content.decode())
    assert "invalid : 1 invalid · 1 degraded · 2 valid" in rows[lane.deployment_name]
    other = next(name for name in rows if name != lane.deployment_name)
    assert "invalid" not in rows[other] and "degraded" not in rows[other]


def test_a_case_whose_grading_crashed_says_why(run, owner):
    """A case whose grading raised is ERROR / evaluator_error with no expectation, and its
    cause in ``message`` (and ``eval_feedback.overall``): the page showed the status and
    nothing else, so the crash's cause was only in the downloaded grading.json."""
    from grading.engine.grade import CaseGrade
    from grading.engine.types import GradeContext

    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    case = SimpleNamespace(case_key=item.case_key, challenge_key=item.challenge_key)
    doc = CaseGrade.crashed(case, GradeContext(), ValueError("boom: ψ")).to_dict()
    assert doc["status"] == "ERROR" and not doc["expectations"]
    RunItem.objects.filter(id=item.id).update(
        grade=doc, status="ERROR", outcome_class="evaluator_error", score=None
    )
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    said = re.search(r'data-testid="grade-message">(.*?)</', body, re.S)
    assert said and "grading crashed: ValueError: boom: ψ" in html.unescape(said.group(1))


def test_a_crashed_cases_row_expansion_says_why_not_no_expectations(run, owner):
    """The case list's in-place expansion of a crashed case said "No expectations." only."""
    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    message = "grading crashed: RuntimeError: rule engine failed"
    _graded_item(run, expectations=[], status="ERROR", outcome_class="evaluator_error", message=message)
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/expectations/", HTTP_HX_REQUEST="true").content.decode()
    assert message in _text(body)


def test_the_overview_shows_each_lanes_coverage_dimension_means_and_challenge_figures(run, owner):
    """grading.md §10.3: a lane's figures are its coverage, dimension and compliance means,
    its macro means and, per challenge, counts, pass rate and coverage. They were stored on
    each lane and shown nowhere."""
    from runs.models import RunLane

    lane = RunLane.objects.filter(run=run).order_by("position").first()
    stats = {
        **lane.stats,
        "coverage": 0.75,
        "dimension_means": {"correctness": 0.6667, "latency": 0.9},
        "compliance_mean": None,
        "macro": {"pass_rate": 0.5, "mean_score": 0.625, "coverage": 0.875},
        "challenges": {
            "sum": {"pass_rate": 0.5, "graded_cases": 2, "cases": 2, "coverage": 1.0},
            "mul": {"pass_rate": None, "graded_cases": 0, "cases": 2, "coverage": 0.0},
        },
    }
    RunLane.objects.filter(id=lane.id).update(stats=stats)
    body = owner.get(f"/runs/{run.id}/").content.decode()
    section = re.search(r'<section[^>]*id="lane-figures".*?</section>', body, re.S)
    assert section, "no lane figures section"
    rows = {
        _text(re.search(r"<th[^>]*>(.*?)</th>", r, re.S).group(1)).strip(): _text(r)
        for r in re.findall(r"<tr[^>]*>(.*?)</tr>", section.group(0), re.S)
    }
    own = rows[lane.deployment_name]
    assert "75.0%" in own and "0.6667" in own and "0.9000" in own
    assert "50.0%" in own and "0.6250" in own and "87.5%" in own
    assert "50.0% of 2 graded · coverage 100.0%" in rows["sum"]
    assert "– of 0 graded · coverage 0.0%" in rows["mul"]


def test_the_case_timing_shows_the_total_as_stored(run, owner):
    """grading.md §7 timing has executor, grader and total seconds; the page left out the
    total (which also counts the case's share of the n_wise ranking pass)."""
    timing = {
        "executor_duration_seconds": 1.5,
        "grader_duration_seconds": 0.25,
        "total_duration_seconds": 2.75,
    }
    item = _graded_item(run, timing=timing)
    text = _text(owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode())
    assert "Timing executor 1.5 s · grader 250 ms · total 2.8 s" in text


def test_the_overviews_counts_equal_what_each_case_list_filter_lists(personas, owner):
    """Each count of the overview's legend is the number of cases its case-list filter lists,
    and the counts add up to every item of the run."""
    run = seed_run(workspace=personas.workspace, items=40, lanes=2, infra_error_rate=0.25)
    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    RunItem.objects.filter(id=item.id).update(status="ERROR", outcome_class="evaluator_error", score=None)
    from runs.models import RunLane

    RunLane.objects.filter(id=item.lane_id).update(failed=item.lane.failed - 1, errored=item.lane.errored + 1)
    body = owner.get(f"/runs/{run.id}/").content.decode()
    legend = body.split('class="legend"', 1)[1].split("</ul>", 1)[0]
    counts = {k: int(n) for k, n in re.findall(r"</span>(\w+) (\d+)</li>", legend)}
    assert sum(counts.values()) == RunItem.objects.filter(run=run).count()
    assert {"PASSED", "FAILED", "ERROR", "infra_error"} <= set(counts)
    for status, n in counts.items():
        listed = owner.get(f"/runs/{run.id}/cases/?status={status.lower()}").content.decode()
        assert len(re.findall(r'<tr id="item-\d+">', listed)) == n, status


def test_the_comparisons_delta_intervals_name_their_method_and_n(personas, owner):
    """grading.md §10.4: the deltas' intervals are paired bootstraps over the matched graded
    cases; the headers said "95% CI" only."""
    from runs.compare_tasks import comparison_request, compute_comparison

    baseline = seed_run(workspace=personas.workspace, items=8, lanes=2, name="base", seed=1)
    candidate = seed_run(workspace=personas.workspace, items=8, lanes=2, name="cand", seed=2)
    compute_comparison(comparison_request(baseline=baseline, candidate=candidate).id)
    body = owner.get(f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}").content.decode()
    head = _text(body.split("<thead>", 1)[1].split("</thead>", 1)[0])
    assert "Pass-rate delta (95% paired bootstrap over n)" in head
    assert "Mean-score delta (95% paired bootstrap over n)" in head
    assert "Matched graded (n)" in head


def test_a_pending_case_of_a_trace_import_lane_says_it_waits_for_an_upload(personas, owner):
    """A trace_import lane's case is pending until its result is uploaded; its case page
    said "This case has not finished yet.", as if an agent were working on it."""
    from runs.services.deployments import deployment_create
    from tests.runs.runfactory import create_run, publish

    version = publish(personas.workspace, cases=2)
    trace = deployment_create(workspace=personas.workspace, name="ci", kind="trace_import").deployment
    run = create_run(personas.workspace, version, [trace])
    item = RunItem.objects.filter(run=run).order_by("id").first()
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    said = _text(re.search(r'aria-labelledby="nograde-h">(.*?)</section>', body, re.S).group(1))
    assert "waits for its result to be uploaded" in said and "has not finished yet" not in said
    assert f'href="/runs/{run.id}/#upload-results"' in body


def test_a_grid_cell_without_a_verdict_names_its_outcome_class(run, owner):
    """The grid showed "ERROR" for an evaluator crash and for a judge-provider outage alike."""
    item = RunItem.objects.filter(run=run, status="FAILED", repetition=1).order_by("id").first()
    RunItem.objects.filter(id=item.id).update(status="ERROR", outcome_class="infra_error", score=None)
    body = owner.get(f"/runs/{run.id}/").content.decode()
    cell = re.search(
        rf'<td class="cell[^"]*">\s*<a href="/runs/{run.id}/cases/{item.id}/".*?</td>', body, re.S
    )
    assert cell and "ERROR infra_error" in _text(cell.group(0))


def test_huge_user_notes_are_cut_on_the_case_page_with_the_way_to_all_of_them(run, owner):
    """The agent's notes went into the case page whole: 400 notes of 5,000 characters made a
    2 MB page. Now each bucket shows its first notes, each cut, and says how many more."""
    notes = [f"note {i}: " + "ψ" * 5_000 for i in range(400)]
    item = _graded_item(
        run, user_notes_summary={"uncertainties": notes, "needs_review": ["short"], "workarounds": []}
    )
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert len(body.encode()) < 500_000
    text = _text(body)
    assert "note 0: ψ" in text and "note 49: ψ" in text and "note 50: ψ" not in text
    assert "350 more notes: all of them are in grading.json" in text and "short" in text


def test_a_long_note_line_is_cut_on_the_transcript_page_like_any_text(run, owner):
    """Every text of the transcript is cut at the page's limit but the agent's note lines,
    which went into the page whole."""
    from runs.transcript import MAX_SHOWN_CHARS

    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    evidence = dict(item.evidence)
    evidence["response"] = {**evidence["response"], "user_notes": "n" * MAX_SHOWN_CHARS + "TAIL-OF-NOTE"}
    RunItem.objects.filter(id=item.id).update(evidence=evidence)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    body = owner.get(url).content.decode()
    note = body.split('id="ev-note-1"', 1)[1].split("</li>", 1)[0]
    assert "TAIL-OF-NOTE" not in body and 'data-testid="shown-in-part"' in note
    assert "TAIL-OF-NOTE" in owner.get(url + "?format=md").content.decode()


@pytest.mark.parametrize("where", ["args", "task"])
def test_long_tool_arguments_and_task_commands_are_cut_on_the_transcript_page(run, owner, where):
    """A tool call's arguments and a task's commands were not cut (its result and every
    message were): one long argument went into the page whole."""
    from runs.transcript import MAX_SHOWN_CHARS

    item = RunItem.objects.filter(run=run, status="FAILED").order_by("id").first()
    evidence = dict(item.evidence)
    response = dict(evidence["response"])
    long = "a" * MAX_SHOWN_CHARS + "TAIL-OF-TEXT"
    if where == "args":
        calls = [dict(c) for c in response["tool_calls"]]
        calls[0]["args"] = {"content": long}
        response["tool_calls"] = calls
        anchor = "ev-tool_call-0"
    else:
        response["tasks"] = [{"description": "build", "executed_commands": [long]}]
        anchor = "ev-task-0"
    evidence["response"] = response
    RunItem.objects.filter(id=item.id).update(evidence=evidence)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    body = owner.get(url).content.decode()
    shown = body.split(f'id="{anchor}"', 1)[1].split("</li>", 1)[0]
    assert "TAIL-OF-TEXT" not in body and 'data-testid="shown-in-part"' in shown
    assert "TAIL-OF-TEXT" in owner.get(url + "?format=md").content.decode()


def test_a_run_whose_critique_found_nothing_says_so(run, owner):
    """grading.md §9: ``overall`` is a count of findings "or a fixed sentence saying nothing
    was found". With no suggestion the overview hid the section, sentence included, so a
    clean run read the same as one never checked."""
    clean = {"overall": "No findings: every probe and run-health check came back clean.", "suggestions": []}
    Run.objects.filter(id=run.id).update(stats={**run.stats, "eval_feedback": clean})
    body = owner.get(f"/runs/{run.id}/").content.decode()
    section = re.search(r'<section[^>]*id="eval-feedback".*?</section>', body, re.S)
    assert section and clean["overall"] in _text(section.group(0))
