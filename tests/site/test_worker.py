"""A real Celery worker process picks up a task from Redis and records it in the database."""

from __future__ import annotations

import uuid

import pytest

from agentclash_site.tasks import health_ping
from agentclash_site.workspaces.models import WorkerHeartbeat
from tests.processes import Worker, redis_server, wait_until


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_the_health_task(tmp_path):
    marker = f"health-{uuid.uuid4()}"
    queue = f"q-{uuid.uuid4().hex[:8]}"
    with redis_server() as port:
        broker = f"redis://127.0.0.1:{port}/0"
        worker = Worker(broker_url=broker, queues=queue, log_path=tmp_path / "worker.log")
        try:
            with health_ping.app.connection_for_write(broker) as conn:
                health_ping.apply_async(args=[marker], queue=queue, connection=conn)
            wait_until(
                lambda: WorkerHeartbeat.objects.filter(marker=marker).exists(),
                timeout=60,
                message="the worker to record the heartbeat",
            )
        finally:
            worker.stop()
    assert worker.proc.returncode is not None
