"""Settings shared by the hypothesis fuzz tests written for hostile agent and judge replies.

Derandomised by default, as the schemathesis test is: the suite gives the same answer on every
run (a fuzz test that fails only sometimes is a flaky build, not a finding). To explore new
examples: ``FUZZ_RANDOM=1 FUZZ_EXAMPLES=1000 make pytest ARGS=tests/runs/test_reply_fuzz.py``;
every bug found that way gets its own test.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=int(os.environ.get("FUZZ_EXAMPLES", examples)),
        derandomize=os.environ.get("FUZZ_RANDOM") != "1",
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
