"""The transcript page of a huge agent run: it rendered every message and tool call (an
agent with 20,000 tool calls and 5,000 messages made a page of 18 MB) and embedded the
whole Markdown copy in a data attribute for the Copy button. Now it shows the first and
last items of the conversation with "N more" that loads the rest by position (htmx
fragment, or the next page without script), and Copy fetches the Markdown download."""

from __future__ import annotations

import re

import pytest

from runs.models import Run, RunItem
from runs.seeding import seed_run
from runs.transcript import (
    MAX_SHOWN_CHARS,
    TRANSCRIPT_CHUNK,
    TRANSCRIPT_HEAD,
    TRANSCRIPT_TAIL,
    TRANSCRIPT_WINDOW_CHARS,
)
from tests.clients import logged_in as login

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}
ITEM_ID = re.compile(r'<li id="(ev-(?:message|tool_call)-\d+)"')


@pytest.fixture
def owner(personas):
    return login(personas.owner)


def _case(personas, *, messages: int, calls: int, files: dict[str, str] | None = None) -> tuple[Run, RunItem]:
    run = seed_run(workspace=personas.workspace, items=2, lanes=1, name="big")
    item = RunItem.objects.filter(run=run).exclude(evidence=None).order_by("id").first()
    response = dict(item.evidence["response"])
    roles = ["user", "assistant", "tool", "assistant"]
    response["messages"] = [
        {"role": roles[i % 4], "content": f"message {i} " + "x" * 80} for i in range(messages)
    ]
    response["tool_calls"] = [
        {"name": "search", "args": {"q": f"query {i}"}, "result": f"result {i} " + "y" * 60}
        for i in range(calls)
    ]
    if files is not None:
        response["files"] = files
    RunItem.objects.filter(id=item.id).update(evidence={"response": response, "timing": {}})
    return run, item


def _ids(body: str) -> list[str]:
    return ITEM_ID.findall(body)


def test_a_huge_transcript_page_stays_small_and_copies_from_the_download(personas, owner):
    run, item = _case(personas, messages=5000, calls=20000)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    body = owner.get(url).content.decode()
    assert len(body.encode()) < 300_000
    ids = _ids(body)
    assert len(ids) == TRANSCRIPT_HEAD + TRANSCRIPT_TAIL
    assert ids[0] == "ev-message-0" and "ev-message-4999" in ids[-TRANSCRIPT_TAIL:]
    assert 'id="ev-final_output"' in body
    hidden = 25000 - TRANSCRIPT_HEAD - TRANSCRIPT_TAIL
    assert f"{hidden} more items: show up to {TRANSCRIPT_CHUNK}" in body
    assert f'href="{url}?from={TRANSCRIPT_HEAD}"' in body
    assert f'hx-get="{url}?from={TRANSCRIPT_HEAD}&amp;partial=items"' in body
    # Copy is a plain download link without script; app.js copies what it serves.
    assert "data-markdown" not in body
    assert (
        f'href="{url}?format=md" download="transcript-{item.id}.md" data-copy-url="{url}?format=md"' in body
    )
    fragment = owner.get(url, {"from": TRANSCRIPT_HEAD, "partial": "items"}, **HTMX).content.decode()
    assert not set(_ids(fragment)) & set(ids)
    assert len(_ids(fragment)) == TRANSCRIPT_CHUNK and len(fragment.encode()) < 300_000
    assert "<html" not in fragment and 'id="ev-final_output"' not in fragment


def test_the_more_fragments_serve_every_hidden_item_once_in_order(personas, owner):
    run, item = _case(personas, messages=300, calls=700)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    markdown = owner.get(url + "?format=md").content.decode()
    whole = [f"ev-{kind}-{n}" for kind, n in re.findall(r"`(message|tool_call):(\d+)`", markdown)]
    assert len(whole) == 1000
    page = owner.get(url).content.decode()
    assert len(_ids(page)) == TRANSCRIPT_HEAD + TRANSCRIPT_TAIL
    seen = _ids(page)[:TRANSCRIPT_HEAD]
    tail = _ids(page)[TRANSCRIPT_HEAD:]
    more = re.search(r'hx-get="[^"]*\?from=(\d+)&amp;partial=items"', page)
    requests = 0
    while more:
        requests += 1
        assert requests < 10
        fragment = owner.get(url, {"from": more.group(1), "partial": "items"}, **HTMX).content.decode()
        seen += _ids(fragment)
        more = re.search(r'hx-get="[^"]*\?from=(\d+)&amp;partial=items"', fragment)
    assert requests == 5 and seen + tail == whole  # 890 hidden, 200 at a time


def test_without_script_the_more_link_opens_the_next_items_with_the_tail(personas, owner):
    run, item = _case(personas, messages=300, calls=700)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    body = owner.get(url, {"from": TRANSCRIPT_HEAD}).content.decode()
    ids = _ids(body)
    assert len(ids) == TRANSCRIPT_CHUNK + TRANSCRIPT_TAIL
    assert f"from item {TRANSCRIPT_HEAD + 1} of 1000" in body and 'id="ev-final_output"' in body
    assert f'href="{url}?from={TRANSCRIPT_HEAD + TRANSCRIPT_CHUNK}"' in body
    # A position past the end shows the tail, not an error; junk shows the start.
    assert len(_ids(owner.get(url, {"from": 10**6}).content.decode())) == TRANSCRIPT_TAIL
    assert _ids(owner.get(url, {"from": "x1"}).content.decode())[0] == "ev-message-0"


def test_a_short_transcript_shows_everything_with_no_more_link(personas, owner):
    run, item = _case(personas, messages=40, calls=60)
    body = owner.get(f"/runs/{run.id}/cases/{item.id}/transcript/").content.decode()
    assert len(_ids(body)) == 100 and 'data-testid="transcript-more"' not in body


def test_the_fragment_costs_the_queries_of_the_page(personas, owner, django_assert_num_queries):
    run, item = _case(personas, messages=300, calls=700)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    owner.get(url)
    with django_assert_num_queries(6):
        owner.get(url)
    with django_assert_num_queries(6):
        owner.get(url, {"from": 700})
    for start in (100, 700):  # the same for a deep position as for the first
        with django_assert_num_queries(4):
            owner.get(url, {"from": start, "partial": "items"}, **HTMX)


def test_the_markdown_download_holds_a_long_file_whole(personas, owner):
    # The page said "The Markdown download holds all of it" under a file cut for display,
    # but the download cut files at the same length.
    long = "z" * (MAX_SHOWN_CHARS + 5)
    run, item = _case(personas, messages=2, calls=0, files={"big.txt": long})
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    assert 'data-testid="shown-in-part"' in owner.get(url).content.decode()
    assert long in owner.get(url + "?format=md").content.decode()


def test_an_evidence_link_to_a_hidden_tool_call_still_lands_on_it(personas, owner):
    # The case page linked transcript/#ev-tool_call-5000: an item the first page leaves out.
    run, item = _case(personas, messages=5000, calls=20000)
    grade = dict(item.grade)
    grade["expectations"] = [
        {**grade["expectations"][0], "evidence_refs": ["tool_call:5000", "final_output"]}
    ]
    RunItem.objects.filter(id=item.id).update(grade=grade)
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    case = owner.get(f"/runs/{run.id}/cases/{item.id}/").content.decode()
    assert f'href="{url}?at=ev-tool_call-5000#ev-tool_call-5000"' in case
    assert f'href="{url}#ev-final_output"' in case  # always on the first page
    body = owner.get(url, {"at": "ev-tool_call-5000"}).content.decode()
    assert 'id="ev-tool_call-5000"' in body and len(body.encode()) < 300_000
    assert "Back to the start" in body and 'id="ev-final_output"' in body
    # an anchor the first page shows, or none the transcript has: the first page
    for at in ("ev-message-0", "ev-tool_call-999999"):
        assert _ids(owner.get(url, {"at": at}).content.decode())[0] == "ev-message-0"


def test_long_texts_end_the_window_early(personas, owner):
    # 100 messages of 20,000 characters each were a 2 MB first page: the window now ends
    # once its texts reach TRANSCRIPT_WINDOW_CHARS, and "more" picks up from there.
    run, item = _case(personas, messages=0, calls=0)
    response = dict(item.evidence["response"])
    response["messages"] = [{"role": "user", "content": f"{i} " + "w" * 20_000} for i in range(120)]
    RunItem.objects.filter(id=item.id).update(evidence={"response": response, "timing": {}})
    url = f"/runs/{run.id}/cases/{item.id}/transcript/"
    per_page = TRANSCRIPT_WINDOW_CHARS // 20_000
    body = owner.get(url).content.decode()
    assert len(_ids(body)) == per_page + TRANSCRIPT_TAIL
    assert f'href="{url}?from={per_page}"' in body
    # an evidence link into the cut part of the first page still gets its item
    body = owner.get(url, {"at": f"ev-message-{per_page + 20}"}).content.decode()
    assert f'id="ev-message-{per_page + 20}"' in body
    assert _ids(body)[0] == "ev-message-0"
