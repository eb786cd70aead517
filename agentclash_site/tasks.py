"""Site-level tasks."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="agentclash_site.health_ping")
def health_ping(marker: str) -> None:
    """Record that a worker ran this task: the test and `make run` poll for the row."""
    from agentclash_site.workspaces.models import WorkerHeartbeat

    WorkerHeartbeat.objects.update_or_create(marker=marker)
