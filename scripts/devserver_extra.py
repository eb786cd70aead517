"""Extra processes of ``make run`` (read by ``scripts/devserver.py``): the example agents.

- the hosted example agent on 127.0.0.1:8766 (the demo deployments ``careful`` and ``sloppy``
  of ``runs.demo`` call ``/agents/<persona>`` on it);
- the example heuristic judge on 127.0.0.1:8765 (``grading.demo``: token overlap, not a model).
"""

import sys

EXTRA = [
    ("agent", [sys.executable, "examples/agents/hosted_agent.py", "--port", "8766", "--quiet"]),
    ("judge", [sys.executable, "examples/judges/heuristic_judge.py", "--port", "8765", "--quiet"]),
]
