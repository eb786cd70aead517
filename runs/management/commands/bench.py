"""``python manage.py bench seed-run --workspace W --items N``: a run with N synthetic graded
items (``runs.seeding``), for the page-scaling benchmark (bench/pages.py) and demos."""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.models import RunStatus


class Command(BaseCommand):
    help = "Benchmark helpers: seed-run creates a run with N synthetic graded items."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        seed = sub.add_parser("seed-run", help="create a run with N synthetic graded items")
        seed.add_argument("--workspace", required=True, help="workspace slug (created if missing)")
        seed.add_argument("--items", type=int, required=True, help="number of items (cases x lanes)")
        seed.add_argument("--lanes", type=int, default=2, help="deployments (default 2)")
        seed.add_argument(
            "--status", default=RunStatus.COMPLETED, choices=[RunStatus.COMPLETED, RunStatus.RUNNING]
        )
        seed.add_argument("--seed", type=int, default=7, help="random seed of the case outcomes")
        seed.add_argument("--name", default="", help="run name")
        seed.add_argument("--summary", action="store_true", help="also compute the stored result summary")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "seed-run":
            self._seed(options)

    def _seed(self, options: dict[str, Any]) -> None:
        from agentclash_site.workspaces.models import Workspace
        from runs.result_tasks import compute_result_summary
        from runs.seeding import seed_run

        if options["items"] < options["lanes"] or options["lanes"] < 1:
            raise CommandError("--items must be at least --lanes, and --lanes at least 1")
        workspace, _ = Workspace.objects.get_or_create(
            slug=options["workspace"], defaults={"name": options["workspace"]}
        )
        started = time.perf_counter()
        run = seed_run(
            workspace=workspace,
            items=options["items"],
            lanes=options["lanes"],
            status=options["status"],
            seed=options["seed"],
            name=options["name"],
            done_fraction=1.0 if options["status"] == RunStatus.COMPLETED else 0.5,
        )
        seeded = time.perf_counter() - started
        if options["summary"] and run.is_finished:
            compute_result_summary(str(run.id))
        base = getattr(settings, "PUBLIC_BASE_URL", "").rstrip("/")
        self.stdout.write(
            json.dumps(
                {
                    "run": str(run.id),
                    "url": f"{base}/runs/{run.id}/",
                    "items": run.items_total,
                    "seconds": round(seeded, 2),
                    "total_seconds": round(time.perf_counter() - started, 2),
                }
            )
        )
