"""The lane writer thread: batches that queue up behind a slow write go out as one write, and
each batch is still reported with its own written ids."""

from __future__ import annotations

import threading

import pytest

from runs import dispatch_threads
from runs.dispatch_threads import Writer
from runs.recording import ItemResult


@pytest.mark.django_db(transaction=True)
def test_batches_queued_behind_a_write_are_merged(monkeypatch):
    calls: list[list[int]] = []
    first_started = threading.Event()
    release = threading.Event()

    def fake_record(lane_id, results, *, owner, revision, repetitions):
        ids = [r.item_id for r in results]
        calls.append(ids)
        if len(calls) == 1:
            first_started.set()
            assert release.wait(timeout=30)
        return [i for i in ids if i != 5]  # item 5 is no longer ours: not written

    monkeypatch.setattr(dispatch_threads, "record_results", fake_record)
    writer = Writer(lane_id=1, owner="me", revision=1, repetitions=1, threaded=True)
    try:
        writer.submit([ItemResult(item_id=1)])
        assert first_started.wait(timeout=30)
        writer.submit([ItemResult(item_id=2), ItemResult(item_id=3)])
        writer.submit([ItemResult(item_id=4), ItemResult(item_id=5)])
        release.set()
        done = writer.wait()
    finally:
        writer.close()
    assert calls == [[1], [2, 3, 4, 5]]
    assert [([r.item_id for r in batch], written) for batch, written in done] == [
        ([1], [1]),
        ([2, 3], [2, 3]),
        ([4, 5], [4]),
    ]
    assert writer.unwritten() == []


@pytest.mark.django_db(transaction=True)
def test_a_merged_write_stops_at_the_limit(monkeypatch):
    calls: list[int] = []
    first_started = threading.Event()
    release = threading.Event()

    def fake_record(lane_id, results, *, owner, revision, repetitions):
        calls.append(len(results))
        if len(calls) == 1:
            first_started.set()
            assert release.wait(timeout=30)
        return [r.item_id for r in results]

    monkeypatch.setattr(dispatch_threads, "record_results", fake_record)
    monkeypatch.setattr(dispatch_threads, "MERGE_LIMIT", 4)
    writer = Writer(lane_id=1, owner="me", revision=1, repetitions=1, threaded=True)
    try:
        writer.submit([ItemResult(item_id=0)])
        assert first_started.wait(timeout=30)
        for n in range(1, 7):
            writer.submit([ItemResult(item_id=2 * n), ItemResult(item_id=2 * n + 1)])
        release.set()
        writer.wait()
    finally:
        writer.close()
    assert calls == [1, 4, 4, 4]
