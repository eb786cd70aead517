"""SVG charts (runs.charts) and transcript items (runs.transcript): escaped text, accessible
titles, order and anchors that match the evidence ids expectations cite."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from grading.engine.aggregate import LatencyHistogram
from grading.engine.evidence import evidence_from_response
from runs import charts
from runs.transcript import anchor_for, transcript_items, transcript_markdown

EVIL = '<script>alert("x")</script>&'


def parse(svg: str) -> ET.Element:
    return ET.fromstring(str(svg))  # well-formed XML, or this raises


def test_a_histogram_escapes_labels_and_describes_its_figures():
    svg = charts.histogram_svg([3, 0, 5], ["a", EVIL, "c"], title=f"Scores of {EVIL}")
    root = parse(svg)
    assert "<script>" not in svg
    assert root.get("role") == "img"
    texts = "".join(root.itertext())
    assert f"Scores of {EVIL}" in texts  # escaped in the markup, intact as text
    desc = root.find("{http://www.w3.org/2000/svg}desc") or root.find("desc")
    assert desc is not None and desc.text == "8 cases. a: 3, c: 5."
    heights = [float(r.get("height")) for r in root.iter() if r.tag.endswith("rect")]
    assert heights[0] < heights[2] and heights[1] == 0


def test_a_histogram_refuses_mismatched_labels():
    with pytest.raises(ValueError, match="same length"):
        charts.histogram_svg([1, 2], ["a"], title="t")


@pytest.mark.parametrize(("score", "expected"), [(0.0, 0), (0.05, 0), (0.1, 1), (0.99, 9), (1.0, 9)])
def test_scores_fall_into_ten_bins(score, expected):
    assert charts.score_bin(score) == expected


def test_the_score_histogram_has_ten_bars_for_a_lane():
    root = parse(charts.score_histogram_svg([1, 2], deployment=EVIL))
    assert sum(1 for r in root.iter() if r.tag.endswith("rect")) == 10


def test_the_latency_histogram_spans_the_used_buckets():
    hist = LatencyHistogram()
    for ms in (120, 130, 900, 2500):
        hist.add(ms)
    root = parse(charts.latency_histogram_svg(hist.to_dict(), deployment="agent"))
    bars = [r for r in root.iter() if r.tag.endswith("rect")]
    span = LatencyHistogram.bucket(2500) - LatencyHistogram.bucket(120) + 1
    assert len(bars) == span
    assert "4 executions" in "".join(root.itertext())


def test_an_empty_latency_histogram_says_so():
    assert "no data" in charts.latency_histogram_svg(None, deployment="agent")


def test_the_progress_bar_states_what_is_done():
    svg = charts.progress_svg({"PASSED": 3, "FAILED": 1, "running": 2, "pending": 4}, 10)
    root = parse(svg)
    title = next(t for t in root.iter() if t.tag.endswith("title"))
    assert title.text.startswith("4 of 10 items finished (40%)")


RESPONSE = {
    "final_output": "Saved `out.txt`. All 3 tests pass.",
    "messages": [
        {"role": "user", "content": "Do the thing"},
        {"role": "assistant", "content": "Calling tools"},
        {"role": "tool", "content": "written"},
        {"role": "assistant", "content": EVIL},
    ],
    "tool_calls": [
        {"name": "write_file", "args": {"path": "out.txt", "content": "hi"}, "result": "ok"},
        {"name": "run_tests", "args": {"path": "tests/"}, "result": {"passed": 3}, "status": "error"},
    ],
    "files": {"src/app.py": "print('<b>')", "dir/ünï code.txt": "x"},
    "user_notes": "first line\n- second",
}


@pytest.fixture
def evidence():
    return evidence_from_response(RESPONSE, rendered_instructions="Do the thing")


def test_items_follow_the_transcript_order(evidence):
    items = transcript_items(evidence)
    kinds = [(i.kind, i.evidence_id) for i in items]
    assert kinds[:6] == [
        ("message", "message:0"),
        ("message", "message:1"),
        ("tool_call", "tool_call:0"),  # before the first tool message
        ("message", "message:2"),
        ("tool_call", "tool_call:1"),  # no tool message left: before the last assistant message
        ("message", "message:3"),
    ]
    assert ("final_output", "final_output") in kinds
    assert ("note", "note:2") in kinds
    files = [i for i in items if i.kind == "file"]
    assert [f.title for f in files] == ["dir/ünï code.txt", "src/app.py"]
    call = items[4]
    assert call.status == "error" and '"passed": 3' in call.result and '"path": "tests/"' in call.args


@pytest.mark.parametrize(
    ("eid", "anchor"),
    [
        ("message:3", "ev-message-3"),
        ("message:3#4-9", "ev-message-3"),
        ("tool_call:1.args", "ev-tool_call-1"),
        ("tool_call:1.result#0-2", "ev-tool_call-1"),
        ("B/tool_call:0", "ev-tool_call-0"),
        ("final_output", "ev-final_output"),
        ("final_output#3-7", "ev-final_output"),
        ("run.final_output", "ev-final_output"),
        ("path:src/app.py", "ev-path-src_2f_app_2e_py"),
        ("path:./src/app.py#1-2", "ev-path-src_2f_app_2e_py"),
        ("note:2", "ev-note-2"),
        ("task:0.executed_commands", "ev-task-0"),
        ("metric:latency_ms", "ev-metrics"),
        ("case.payload.x", None),
        ("code:tests", None),
        ("message:x", None),
    ],
)
def test_anchor_for_maps_evidence_ids(eid, anchor):
    assert anchor_for(eid) == anchor


def test_every_item_anchor_is_what_its_evidence_id_maps_to(evidence):
    items = transcript_items(evidence)
    assert all(anchor_for(i.evidence_id) == i.anchor for i in items)
    assert len({i.anchor for i in items}) == len(items)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", i.anchor) for i in items)


def test_black_box_evidence_shows_no_tool_calls():
    ev = evidence_from_response(RESPONSE, evidence_level="black_box")
    assert not [i for i in transcript_items(ev) if i.kind in ("tool_call", "file", "note")]


def test_markdown_fences_survive_backticks_in_content(evidence):
    evidence.files["x.md"] = evidence.files["src/app.py"].__class__(
        path="x.md", content="```\ncode\n```", size=12, sha256="0"
    )
    md = transcript_markdown(transcript_items(evidence))
    assert "**tool call `write_file`** (ok, `tool_call:0`)" in md
    assert "````\n```\ncode\n```\n````" in md
    assert "**Final output**\n\nSaved `out.txt`." in md


@pytest.mark.parametrize(
    ("value", "score", "pct"),
    [
        (0.0, "0.0000", "0.0 pp"),
        (0.0123, "+0.0123", "+1.2 pp"),
        (-0.0123, "−0.0123", "−1.2 pp"),
        (0.00004, "+<0.0001", "+<0.1 pp"),
        (-0.0004, "−0.0004", "−<0.1 pp"),
        (None, "–", "–"),
    ],
)
def test_differences_are_signed_and_never_a_bare_zero_when_they_are_not(value, score, pct):
    # A comparison said "improved" next to a delta shown as 0.0000.
    from runs.templatetags.run_results import delta_pct, delta_score

    assert (delta_score(value), delta_pct(value)) == (score, pct)


def test_the_progress_bar_does_not_count_cancelled_items_as_finished():
    svg = charts.progress_svg({"PASSED": 2, "FAILED": 1, "cancelled": 5}, 8)
    title = next(t for t in parse(svg).iter() if t.tag.endswith("title"))
    assert title.text.startswith("3 of 8 items finished (37.5%)")
    assert "cancelled 5" in title.text


@pytest.mark.parametrize(
    ("ms", "expected"),
    [(0.42, "0.42 ms"), (2.0, "2.0 ms"), (2.38, "2.4 ms"), (9.94, "9.9 ms"), (12.7, "13 ms"), (999.4, "999 ms"),
     (1500, "1.5 s"), (90_000, "1.5 min")],
)  # fmt: skip
def test_latencies_keep_the_digits_that_tell_them_apart(ms, expected):
    assert charts.format_ms(ms) == expected


def test_latency_buckets_below_ten_ms_have_distinct_labels():
    # A run whose calls took 2-3 ms drew three bars all labelled "2 ms–2 ms" .. "3 ms–3 ms".
    hist = LatencyHistogram()
    for ms in (0.5, 2.1, 2.5, 2.9):
        hist.add(ms)
    root = parse(charts.latency_histogram_svg(hist.to_dict(), deployment="agent"))
    # each bar's tooltip is "<label>: <count> executions"; the chart's own title has no colon
    bars = [
        t.text.rsplit(":", 1)[0] for t in root.iter() if t.tag.endswith("title") and ": " in (t.text or "")
    ]
    assert bars[0] == "under 1.0 ms"
    assert len(set(bars)) == len(bars), bars
    assert "2.0 ms–2.4 ms" in bars
