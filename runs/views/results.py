"""Case pages: the keyset-paged case list (filters, score sort, rows that expand in place to
their expectations), the grader-style case result page and the transcript viewer.

A case is one RunItem (case x deployment x repetition). Items are looked up inside their
run, and the run through the workspace-scoped helper, so an outsider gets 404.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from agentclash_site.lib.pagination import InvalidCursor
from agentclash_site.lib.params import BadParameter, choice_param
from grading.engine.evidence import ProtocolError, evidence_from_response
from grading.engine.types import Evidence, Timing
from runs.lane_settings import CallSettings
from runs.models import Run, RunItem, RunLane
from runs.results import (
    CaseQuery,
    attempts_of,
    case_page,
    challenge_keys,
    file_check_paths,
    grade_revision_document,
    grade_revisions_of,
    item_for_run,
    lanes_of,
    progress_of,
    run_for_user,
    siblings_of,
)
from runs.transcript import (
    CONVERSATION_ANCHORS,
    MAX_SHOWN_CHARS,
    TRANSCRIPT_CHUNK,
    anchor_for,
    transcript_items,
    transcript_markdown,
    transcript_window,
)

TEMPLATES = "runs/"
STATUS_FILTERS = (
    ("", "All"),
    ("passed", "Passed"),
    ("failed", "Failed"),
    ("unavailable", "Unavailable"),
    ("not_evaluated", "Not evaluated"),
    ("error", "Error (grading failed)"),  # evaluator_error or infra_error (grading.md §2)
    ("infra_error", "Infra error"),
    ("config_error", "Config error"),
    ("cancelled", "Cancelled"),
    ("pending", "Pending"),
)
SORTS = (("id", "Run order"), ("score", "Score, lowest first"), ("-score", "Score, highest first"))

# ?status= accepts the filters of the page, which are the case statuses of
# spec/interfaces.md §3 (and pending), in any case: each status is its own filter, as in the API.
STATUS_VALUES = {value: value for value, _ in STATUS_FILTERS if value}
STATUS_ACCEPTED = (
    "PASSED", "FAILED", "UNAVAILABLE", "NOT_EVALUATED", "ERROR", "infra_error", "config_error", "cancelled",
    "pending",
)  # fmt: skip
SORT_VALUES = {value: value for value, _ in SORTS}


def _case_query(
    request: HttpRequest, run: Run, lanes: list[RunLane], challenges: list[str]
) -> tuple[CaseQuery, list[BadParameter]]:
    """The case list's filters, and a ``BadParameter`` for each value the page does not
    know (ignoring one would list every case as if filtered). The values it knows are kept,
    so the form shows them again next to the errors."""
    params = request.GET
    errors: list[BadParameter] = []

    def checked(parse: Any, default: Any) -> Any:
        try:
            return parse()
        except BadParameter as exc:
            errors.append(exc)
            return default

    query = CaseQuery(
        status=checked(lambda: choice_param(params, "status", STATUS_VALUES, listed=STATUS_ACCEPTED), ""),
        challenge=checked(lambda: _challenge_param(params, run, challenges), ""),
        lane=checked(lambda: _lane_param(params, lanes), None),
        q=params.get("q", "").strip()[:200],
        sort=checked(lambda: choice_param(params, "sort", SORT_VALUES), "") or "id",
        after=params.get("after") or None,
    )
    return query, errors


def _lane_param(params: Any, lanes: list[RunLane]) -> int | None:
    """``deployment``: one of the run's lanes by id (the form's value) or by deployment name
    (the spelling of the API and the CLI)."""
    value = params.get("deployment", "").strip()
    if not value:
        return None
    for lane in lanes:
        if str(lane.id) == value or lane.deployment_name == value:
            return lane.id
    names = ", ".join(lane.deployment_name for lane in lanes) or "none: the run has no lanes"
    raise BadParameter("deployment", f"deployment must be a deployment of this run ({names}).")


def _challenge_param(params: Any, run: Run, challenges: list[str]) -> str:
    value = params.get("challenge", "").strip()
    if value and value not in challenges and not _is_challenge_of(run, value):
        listed = ", ".join(challenges) or "a challenge key of the run's pack version"
        raise BadParameter("challenge", f"challenge must be a challenge of this run ({listed}).")
    return value


def _is_challenge_of(run: Run, key: str) -> bool:
    """Whether the run's pack version has this challenge (the listed keys come from the
    lanes' counters, which only know challenges with a finished item)."""
    from packs.models import Challenge

    return Challenge.objects.filter(version_id=run.pack_version_id, key=key).exists()


@login_required
def case_list(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = run_for_user(request, run_id)
    lanes = lanes_of(run)
    challenges = challenge_keys(run)
    query, errors = _case_query(request, run, lanes, challenges)
    context: dict[str, Any] = {
        "run": run,
        "lanes": lanes,
        "lane_names": {lane.id: lane.deployment_name for lane in lanes},
        "query": query,
        "status_filters": STATUS_FILTERS,
        "sorts": SORTS,
        "challenges": challenges,
        "params": _params_without_after(request),
    }
    if errors:
        context.update(
            page=None,
            items=[],
            param_errors=[e.message for e in errors],
            error_fields=[e.name for e in errors],
        )
        return render(request, TEMPLATES + "case_list.html", context, status=400)
    try:
        page = case_page(run, query)
    except InvalidCursor as exc:
        context.update(page=None, items=[], error=str(exc))
        return render(request, TEMPLATES + "case_list.html", context, status=400)
    context.update(page=page, items=page.items)
    if query.status and not page.items and not query.after:
        context["statuses_present"] = _statuses_present(lanes)
    if request.htmx and request.GET.get("partial") == "rows":  # type: ignore[attr-defined]
        return render(request, TEMPLATES + "case_list.html#rows", {**context, "more": True})
    return render(request, TEMPLATES + "case_list.html", context)


def _statuses_present(lanes: list[RunLane]) -> list[tuple[str, str, int]]:
    """``(filter value, label, count)`` of each status the run's cases have: a status filter
    that lists nothing links to them. The overview's "Failed cases" listed nothing on a run
    whose cases all ended in infra errors, with no way on but guessing the filter."""
    segments, _ = progress_of(lanes)
    labels = dict(STATUS_FILTERS)
    return [(key.lower(), labels[key.lower()], count) for key, count in segments.items() if count]


def _params_without_after(request: HttpRequest) -> str:
    params = request.GET.copy()
    for key in ("after", "partial"):
        params.pop(key, None)
    return params.urlencode()


def _ref(ref: str, files: dict[str, str]) -> dict[str, Any]:
    """An evidence id with its transcript anchor; ``file:<check>`` goes to the captured file."""
    if ref.startswith("file:") and ref[5:] in files:
        return {"id": ref, "anchor": anchor_for("path:" + files[ref[5:]]), "at": False}  # files: always shown
    anchor = anchor_for(ref)
    # A message or tool call may be among the items the transcript's first page leaves out:
    # its link asks for the window holding it (?at=), so it still lands on the item.
    return {"id": ref, "anchor": anchor, "at": bool(anchor) and anchor.startswith(CONVERSATION_ANCHORS)}


def _expectations(
    item: RunItem, files: dict[str, str] | None = None, transcript_url: str | None = None
) -> list[dict[str, Any]]:
    """The grade's expectations with the transcript anchor of each evidence ref; a judge
    expectation also gets ``samples`` (its ``details.samples`` with a transcript link per
    citation, for ``grading/_judge_samples.html``)."""
    out = []
    for e in (item.grade or {}).get("expectations") or []:
        refs = [_ref(ref, files or {}) for ref in e.get("evidence_refs") or [] if isinstance(ref, str)]
        judge = e.get("kind") == "judge"
        entry = {**e, "refs": refs, "details_items": _details(e.get("details"), judge=judge)}
        if judge:
            entry["samples"] = _judge_samples(e.get("details"), files or {}, transcript_url)
        out.append(entry)
    return out


# A detail value longer than this is cut on the page; grading.json (linked) has all of it.
DETAIL_CHARS = 2_000
# The agent's notes shown per bucket, each cut at NOTE_CHARS (grading.json has them all).
NOTES_SHOWN = 50
NOTE_CHARS = 2_000
NOTE_BUCKETS = (
    ("uncertainties", "Uncertainties"),
    ("workarounds", "Workarounds"),
    ("needs_review", "Needs review"),
)


def _notes(summary: Any) -> list[tuple[str, list[str], int]]:
    """``(title, shown, more)`` per non-empty bucket of ``user_notes_summary``: the first
    ``NOTES_SHOWN`` notes, each cut at ``NOTE_CHARS``; ``more`` is how many are left out."""
    if not isinstance(summary, dict):
        return []
    out = []
    for key, title in NOTE_BUCKETS:
        items = [n for n in summary.get(key) or [] if isinstance(n, str)]
        if items:
            shown = [n if len(n) <= NOTE_CHARS else n[:NOTE_CHARS] + "…" for n in items[:NOTES_SHOWN]]
            out.append((title, shown, len(items) - len(shown)))
    return out


def _details(details: Any, *, judge: bool = False) -> list[tuple[str, str, int]]:
    """``(key, shown, cut)``: each detail as the JSON grading.json holds (``true``, ``null``,
    double quotes, not a Python repr), strings as they are; ``cut`` characters past
    ``DETAIL_CHARS`` are left out, so a huge value cannot swell the page."""
    if not isinstance(details, dict):
        return []
    hidden = ("citations", "samples") if judge else ("citations",)  # samples: their own table
    out = []
    for key, value in details.items():
        if key in hidden:
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        cut = max(0, len(text) - DETAIL_CHARS)
        out.append((str(key), text[:DETAIL_CHARS] if cut else text, cut))
    return out


def _other_lane(evidence_id: str, own_label: Any) -> bool:
    """An n_wise id of another lane's answer (``B/final_output``): not in this transcript."""
    label, sep, _ = evidence_id.partition("/")
    return bool(sep) and len(label) == 1 and label.isupper() and label != own_label


def _judge_samples(details: Any, files: dict[str, str], transcript_url: str | None) -> list[dict[str, Any]]:
    """Each judge sample with its citations as {id, quote, href}; ``href`` is the transcript
    anchor of the cited evidence, None when the transcript does not show it."""
    if not isinstance(details, dict):
        return []
    own = details.get("label") if details.get("mode") == "n_wise" else None
    out = []
    for sample in details.get("samples") or []:
        if not isinstance(sample, dict):
            continue
        cites = []
        for c in sample.get("citations") or []:
            cid = c.get("id") if isinstance(c, dict) else c
            if not isinstance(cid, str):
                continue
            href = None
            if transcript_url and not _other_lane(cid, own):
                ref = _ref(cid, files)
                anchor = ref["anchor"]
                at = f"?at={anchor}" if ref["at"] else ""
                href = f"{transcript_url}{at}#{anchor}" if anchor else None
            quote = c.get("quote") if isinstance(c, dict) else None
            cites.append({"id": cid, "quote": quote, "href": href})
        out.append({**sample, "citations": cites})
    return out


@login_required
def case_expectations(request: HttpRequest, run_id: Any, item_id: int) -> HttpResponse:
    """The in-place expansion of a case-list row (htmx), or the case page without htmx."""
    run = run_for_user(request, run_id)
    item = item_for_run(run, item_id)
    if not request.htmx:  # type: ignore[attr-defined]
        return case_detail(request, run_id, item_id)
    return render(
        request,
        TEMPLATES + "case_list.html#expansion",
        {"run": run, "item": item, "expectations": _expectations(item)},
    )


def _claims(item: RunItem, files: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for c in (item.grade or {}).get("claims") or []:
        refs = [_ref(ref, files) for ref in c.get("evidence_refs") or [] if isinstance(ref, str)]
        verdict = {True: "verified", False: "contradicted"}.get(c.get("verified"), "unverifiable")
        out.append({**c, "refs": refs, "verdict": verdict})
    return out


@login_required
def case_detail(request: HttpRequest, run_id: Any, item_id: int) -> HttpResponse:
    run = run_for_user(request, run_id)
    item = item_for_run(run, item_id)
    grade = item.grade or {}
    if request.GET.get("format") == "json":
        name = f"grading-{item.id}"
        if "revision" in request.GET:  # an earlier grade (a re-score archived it)
            revision = request.GET["revision"]
            grade = grade_revision_document(item, revision) if revision.isdigit() else None
            if not grade:
                raise Http404("This case has no such earlier grade.")
            name += f"-revision-{int(revision)}"
        if not grade:
            raise Http404("This case has no grade.")
        response = JsonResponse(grade, json_dumps_params={"ensure_ascii": False, "indent": 2})
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response
    files = file_check_paths(run)
    transcript_url = reverse("run-transcript", args=[run.id, item.id]) if item.evidence else None
    context = {
        "run": run,
        "item": item,
        "lane": item.lane,
        "grade": grade,
        "expectations": _expectations(item, files, transcript_url),
        "claims": _claims(item, files),
        "feedback": grade.get("eval_feedback") or {},
        "run_feedback": (run.stats or {}).get("eval_feedback") or {},
        "scorecard": grade.get("scorecard") or {},
        "gates": grade.get("gates") or {},
        "metrics": grade.get("execution_metrics") or {},
        "timing": grade.get("timing") or {},
        "notes": _notes(grade.get("user_notes_summary")),
        "attempts": attempts_of(item),
        "revisions": grade_revisions_of(item),
        "siblings": siblings_of(item),
        "has_transcript": bool(item.evidence),
        "agent_metrics": ((item.evidence or {}).get("response") or {}).get("metrics") or {},
    }
    return render(request, TEMPLATES + "case.html", context)


def evidence_of(item: RunItem, run: Run) -> Evidence | None:
    """The item's evidence rebuilt from the stored response, as grading saw it (the same
    door, ``evidence_from_response``, so message and call indexes match the grade's ids)."""
    stored = item.evidence or {}
    response = stored.get("response")
    if not isinstance(response, dict):
        return None
    instructions = ""
    if not response.get("messages"):
        # Without messages the transcript is "rendered prompt + final output" (grading.md
        # §1.1): the rendered prompt comes from the pack version (cached per process).
        instructions = _rendered_instructions(run, item)
    try:
        return evidence_from_response(
            response,
            deployment_kind=item.lane.deployment_kind,
            evidence_level=CallSettings.of_lane(item.lane).evidence_level,  # as the run graded it
            rendered_instructions=instructions,
            timing=Timing(**{k: v for k, v in (stored.get("timing") or {}).items() if k in Timing.__slots__}),
        )
    except (ProtocolError, TypeError, ValueError):
        return None


def _rendered_instructions(run: Run, item: RunItem) -> str:
    from runs.packdata import PackDataError, version_data

    try:
        data = version_data(run.pack_version, run.input_set.key if run.input_set else None)
        _case, context = data.case(item.challenge_key, item.case_key)
    except (PackDataError, KeyError, LookupError):
        return ""
    return context.rendered_instructions


@login_required
def transcript(request: HttpRequest, run_id: Any, item_id: int) -> HttpResponse:
    run = run_for_user(request, run_id)
    item = item_for_run(run, item_id)
    evidence = evidence_of(item, run)
    if request.GET.get("format") == "md":
        # the download is the whole transcript: the page cuts long texts and points here
        whole = transcript_items(evidence, limit=None) if evidence is not None else []
        response = HttpResponse(transcript_markdown(whole), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'inline; filename="transcript-{item.id}.md"'
        return response
    # ?from=N: the conversation from its N-th item (the "more" link; htmx loads only those
    # items, ?partial=items, in place of the link). The page never builds the whole list.
    start = request.GET.get("from", "")
    start = int(start) if start.isascii() and start.isdigit() and len(start) < 10 else 0
    partial = request.GET.get("partial") == "items" and request.headers.get("HX-Request") == "true"
    window = None
    if evidence is not None:
        if start:
            window = transcript_window(evidence, start=start, count=TRANSCRIPT_CHUNK)
        else:  # ?at=: an evidence link's anchor, the page shows the window holding it
            window = transcript_window(evidence, at=request.GET.get("at") or None)
    context = {
        "run": run,
        "item": item,
        "window": window,
        "chunk": TRANSCRIPT_CHUNK,
        "fragment": partial,
        "shown_chars": MAX_SHOWN_CHARS,
        "metrics": (evidence.metrics if evidence is not None else None),
        "channels": (evidence.channels if evidence is not None else None),
        "has_evidence": evidence is not None,
    }
    if partial:
        return render(request, TEMPLATES + "transcript.html#items", context)
    return render(request, TEMPLATES + "transcript.html", context)
