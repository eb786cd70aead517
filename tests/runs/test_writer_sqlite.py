"""The lane writer on SQLite (the embedded default of ``make run``), where a write
transaction holds the database's one write lock: a batch of finished items is written a
bounded slice per transaction, so a write of the web server never waits behind a whole
lane's window of results, with a pause between two transactions so that a waiting writer
finds the lock free. A child process on a fresh SQLite file."""

from __future__ import annotations

from runs.dispatch_threads import RECONNECT_DELAYS, SQLITE_WRITE_BATCH, SQLITE_WRITE_GAP_SECONDS
from tests.processes import run_on_sqlite

SCRIPT = """
import json, time, types
from agentclash_site.workspaces.models import Workspace
from runs import dispatch_threads
from runs.dispatch import claim_items
from runs.models import RunItem, RunLane
from runs.recording import ItemResult
from tests.runs.runfactory import create_run, hosted, publish

ws = Workspace.objects.create(slug="lite", name="Lite")
version = publish(ws, cases=150)
deployment = hosted(ws, "http://127.0.0.1:9/", max_in_flight=512)
run = create_run(ws, version, [deployment])
lane = RunLane.objects.get(run=run)
rows = claim_items(lane=lane, run=run, deployment=deployment, owner="me")
events = []
record_results = dispatch_threads.record_results

def counted(lane_id, results, **kwargs):
    events.append(["write", len(results)])
    return record_results(lane_id, results, **kwargs)

dispatch_threads.record_results = counted
dispatch_threads.time = types.SimpleNamespace(
    sleep=lambda seconds: events.append(["pause", seconds]), perf_counter=time.perf_counter
)
writer = dispatch_threads.Writer(
    lane_id=lane.pk, owner="me", revision=run.scoring_revision, repetitions=1, threaded=False
)
writer.submit([ItemResult(item_id=row["id"]) for row in rows])
print(json.dumps({
    "claimed": len(rows),
    "events": events,
    "written": sum(len(written) for _, written in writer.collect()),
    "done": RunItem.objects.filter(lane=lane, state="done").count(),
    "pending": RunLane.objects.get(pk=lane.pk).pending,
}))
"""


def test_the_writer_on_sqlite_writes_a_bounded_slice_per_transaction_with_pauses_between(tmp_path):
    # Back to back, the transactions left no gap a waiting writer's busy handler could find.
    result = run_on_sqlite(tmp_path, SCRIPT)
    assert result["claimed"] == 150
    pause = ["pause", SQLITE_WRITE_GAP_SECONDS]
    assert result["events"] == [
        ["write", SQLITE_WRITE_BATCH], pause, ["write", SQLITE_WRITE_BATCH], pause,
        ["write", 150 - 2 * SQLITE_WRITE_BATCH],
    ]  # fmt: skip
    assert result["written"] == result["done"] == 150
    assert result["pending"] == 0


LOCKED = """
import json, sqlite3, time, types
from django.db import connection
from agentclash_site.workspaces.models import Workspace
from runs import dispatch_threads
from runs.dispatch import claim_items
from runs.models import RunItem, RunLane
from runs.recording import ItemResult
from tests.runs.runfactory import create_run, hosted, publish

ws = Workspace.objects.create(slug="lite", name="Lite")
version = publish(ws, cases=10)
deployment = hosted(ws, "http://127.0.0.1:9/", max_in_flight=10)
run = create_run(ws, version, [deployment])
lane = RunLane.objects.get(run=run)
rows = claim_items(lane=lane, run=run, deployment=deployment, owner="me")
with connection.cursor() as cursor:
    cursor.execute("PRAGMA busy_timeout = 50")  # make run's is 30 s
other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
other.execute("BEGIN IMMEDIATE")  # another process's long transaction
slept = []

def sleep(seconds):
    # the writer waits before it writes again; meanwhile the other transaction ends
    slept.append(seconds)
    other.execute("ROLLBACK")

dispatch_threads.time = types.SimpleNamespace(sleep=sleep, perf_counter=time.perf_counter)
writer = dispatch_threads.Writer(
    lane_id=lane.pk, owner="me", revision=run.scoring_revision, repetitions=1, threaded=False
)
writer.submit([ItemResult(item_id=row["id"]) for row in rows])
print(json.dumps({
    "slept": slept,
    "written": sum(len(written) for _, written in writer.collect()),
    "done": RunItem.objects.filter(lane=lane, state="done").count(),
}))
"""


def test_a_write_that_found_the_database_locked_is_written_again(tmp_path):
    # The busy timeout ran out behind another process's transaction: the write ran nothing
    # and used to end the slice (its finished calls were made again).
    result = run_on_sqlite(tmp_path, LOCKED)
    assert result["slept"] == [RECONNECT_DELAYS[0]]
    assert result["written"] == result["done"] == 10
