"""Demo step of ``manage.py demo setup``: point the demo workspace's judge provider at the
example heuristic judge (``examples/judges/heuristic_judge.py``, token overlap, NOT a model).

The lead wires it: ``AGENTCLASH_DEMO_STEPS.append("grading.demo.setup")`` and a devserver
process ``[sys.executable, "examples/judges/heuristic_judge.py", "--port", "8765", "--quiet"]``.
The base URL comes from ``AGENTCLASH_DEMO_JUDGE_URL`` (default ``http://127.0.0.1:8765/v1``).
Idempotent; an existing provider that is not the example one (a real key was set) is kept.
"""

from __future__ import annotations

import os
from typing import Any

from grading.models import JudgeProviderConfig
from grading.services import judge_provider_save

DEFAULT_URL = "http://127.0.0.1:8765/v1"
EXAMPLE_MODEL = "example-heuristic-judge"


def setup(*, workspace: Any, user: Any, stdout: Any, base_url: str | None = None) -> None:
    url = base_url or os.environ.get("AGENTCLASH_DEMO_JUDGE_URL", DEFAULT_URL)
    current = JudgeProviderConfig.objects.filter(workspace=workspace).first()
    if current is not None and (current.has_api_key or current.model != EXAMPLE_MODEL):
        stdout.write(f"  judge provider: kept the configured {current.kind} provider\n")
        return
    if not workspace.allow_private_endpoints:
        workspace.allow_private_endpoints = True  # the example judge runs on loopback
        workspace.save(update_fields=["allow_private_endpoints"])
    judge_provider_save(workspace=workspace, user=user, kind="openai", base_url=url, model=EXAMPLE_MODEL)
    stdout.write(f"  judge provider: example heuristic judge (token overlap, not a model) at {url}\n")
