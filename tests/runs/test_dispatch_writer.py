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


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("threaded", [True, False])
def test_a_refused_batch_is_written_in_halves_until_the_item_at_fault_is_alone(monkeypatch, threaded):
    calls: list[list[int]] = []

    def fake_record(lane_id, results, *, owner, revision, repetitions):
        ids = [r.item_id for r in results]
        calls.append(ids)
        if any(r.item_id == 6 and r.grade is None for r in results):
            raise ValueError("refused")  # any error of the data
        return ids

    replaced: list[tuple[int, str]] = []

    def unstorable(result, exc):
        replaced.append((result.item_id, str(exc)))
        return ItemResult(item_id=result.item_id, grade={"status": "ERROR"})

    monkeypatch.setattr(dispatch_threads, "record_results", fake_record)
    writer = Writer(
        lane_id=1, owner="me", revision=1, repetitions=1, threaded=threaded, unstorable=unstorable
    )
    try:
        writer.submit([ItemResult(item_id=n) for n in range(8)])
        done = writer.wait()
    finally:
        writer.close()
    # 8 -> 4 + [4..7] -> [4, 5] + [6, 7] -> [6] + [7] -> [6] replaced
    assert calls == [list(range(8)), [0, 1, 2, 3], [4, 5, 6, 7], [4, 5], [6, 7], [6], [6], [7]]
    assert replaced == [(6, "refused")]
    assert done == [(done[0][0], list(range(8)))]
    assert writer.unstorable_items == [6] and writer.unwritten() == []


@pytest.mark.django_db(transaction=True)
def test_a_lost_connection_is_not_split_up(monkeypatch):
    """A write that failed on the connection is not the data's fault: it is tried again on
    new connections and then ends the slice (which gives its claims back) instead of
    writing anything unstorable."""
    import psycopg
    from django.db import OperationalError

    monkeypatch.setattr(dispatch_threads, "RECONNECT_DELAYS", (0.01, 0.01))
    for error in (OperationalError("gone"), psycopg.OperationalError("gone")):
        calls: list[int] = []

        def fake_record(lane_id, results, *, owner, revision, repetitions, error=error, calls=calls):
            calls.append(len(results))
            raise error

        monkeypatch.setattr(dispatch_threads, "record_results", fake_record)
        writer = Writer(
            lane_id=1, owner="me", revision=1, repetitions=1, threaded=True, unstorable=lambda r, e: r
        )
        try:
            writer.submit([ItemResult(item_id=n) for n in range(4)])
            with pytest.raises(type(error)):
                writer.wait()
        finally:
            writer.close()
        assert calls == [4, 4, 4] and writer.unstorable_items == []
