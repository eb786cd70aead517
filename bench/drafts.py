#!/usr/bin/env python
"""The browser pack editor on big drafts: opening the editor and autosaving a one-character edit.

Two drafts of the P3 pack's shape (``publish._pack_bytes``: one challenge, one input set, a
payload and three expectations per case), 1,000 and 10,000 cases (~3.5 MB of YAML), in a
database of their own (``agentclash_bench_drafts``, dropped, created and migrated here), with
``DEBUG=false`` and throwaway keys. Requests go through Django's test client in process,
logged in as the workspace's owner, as the editor sends them:

- **open**: ``GET`` of the editor page, right after a save (what a reload or a second tab
  costs);
- **save**: the autosave, an htmx ``POST`` of the text with one character changed (the pack
  name's last character, a different one every round, so no text repeats) and the revision
  the editor holds: the time until the save is answered;
- **report**: the time until the validation report of that text is on the page: the save
  alone when its answer holds the report, else the save plus the request the answer
  names for it (``data-report-url``, which editor.js loads), followed as the browser would;
- **cold open**: ``GET`` of the editor page for a text whose report is not stored (only where
  stored reports exist: they are deleted first, as a validator change would make them
  useless).

Each round does every measurement at both sizes, 1k and 10k interleaved so that drift in
the machine's load hits both alike; one warm-up round, then medians of ``--rounds``. Wall
time. Not part of ``make bench``'s table (no P goal); run it on its own:

    .venv/bin/python bench/drafts.py                       # 1,000 and 10,000 cases, 5 rounds
    .venv/bin/python bench/drafts.py --sizes 1000 --rounds 2
    .venv/bin/python bench/drafts.py --sizes 10000 --rounds 1 --profile save   # pyinstrument
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.database import setup_django  # noqa: E402

DATABASE = "agentclash_bench_drafts"
HTMX = {"HTTP_HX_REQUEST": "true"}
NAME_LINE = "  name: P1 squares benchmark"
_REPORT_URL = re.compile(r'data-report-url="([^"]+)"')


class Editor:
    """One browser tab on one draft: the text and revision it holds, and its requests."""

    def __init__(self, client, draft, text: str) -> None:
        from django.urls import reverse

        self.client, self.draft, self.text = client, draft, text
        self.revision = draft.revision
        self.open_url = reverse("draft-editor", kwargs={"draft_id": draft.public_id})
        self.save_url = reverse("draft-save", kwargs={"draft_id": draft.public_id})
        self.edits = 0

    def _get(self, url: str, **extra):
        response = self.client.get(url, secure=True, **extra)
        if response.status_code != 200:
            raise RuntimeError(f"GET {url} answered {response.status_code}")
        return response

    def open(self) -> float:
        start = time.perf_counter()
        response = self._get(self.open_url)
        elapsed = time.perf_counter() - start
        self._follow(response, check_only=True)
        return elapsed

    def edited_text(self) -> str:
        """The text with the pack name's last character replaced by one never used before."""
        self.edits += 1
        lines = self.text.split("\n")
        index = next(i for i, line in enumerate(lines) if line.startswith(NAME_LINE[:-1]))
        lines[index] = NAME_LINE[:-1] + chr(0x4E00 + self.edits)
        return "\n".join(lines)

    def save(self) -> tuple[float, float]:
        """(seconds until the save is answered, seconds until its report is on the page)."""
        text = self.edited_text()
        data = {"name": self.draft.name, "bundle_text": text, "revision": str(self.revision)}
        start = time.perf_counter()
        response = self.client.post(self.save_url, data, secure=True, **HTMX)
        saved = time.perf_counter() - start
        if response.status_code != 200:
            raise RuntimeError(f"save answered {response.status_code}: {response.content[:300]!r}")
        self._follow(response)
        shown = time.perf_counter() - start
        self.text = text
        found = re.search(rb'name="revision" id="draft-revision" value="(\d+)"', response.content)
        if not found:
            found = re.search(rb'id="draft-revision"[^>]*value="(\d+)"', response.content)
        self.revision = int(found.group(1))
        return saved, shown

    def _follow(self, response, *, check_only: bool = False) -> None:
        """Load what the answer loads on arrival (the report of a save answered at once)."""
        body = response.content.decode()
        for _ in range(3):
            if 'id="report"' in body and "data-report-pending" not in body:
                return
            found = _REPORT_URL.search(body)
            if not found:
                raise RuntimeError("the answer holds no report and loads none")
            url = found.group(1).replace("&amp;", "&")
            body = self._get(url, **HTMX).content.decode()
        raise RuntimeError("no report after following three loads")


def _drop_stored_reports() -> bool:
    from packs import models

    stored = getattr(models, "DraftReport", None)
    if stored is None:
        return False
    stored.objects.all().delete()
    return True


def measure(*, sizes: list[int], rounds: int, database: str, profile: str | None, log=print) -> dict:
    setup_django(database, production=True, label="bench-drafts")
    from django.contrib.auth import get_user_model
    from django.test import Client

    from agentclash_site.workspaces.models import Role, Workspace
    from agentclash_site.workspaces.services import membership_set_role
    from bench.publish import _pack_bytes
    from packs import services

    user, _ = get_user_model().objects.get_or_create(username="bench-drafts")
    workspace, _ = Workspace.objects.get_or_create(slug="bench-drafts", defaults={"name": "Drafts bench"})
    membership_set_role(workspace=workspace, user=user, role=Role.OWNER)
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(user)
    editors = {}
    for size in sizes:
        text = _pack_bytes(size, f"drafts-bench-{size}").decode()
        draft = services.draft_create(workspace=workspace, user=user, name=f"bench {size}", bundle_text=text)
        editors[size] = Editor(client, draft, text)
        log(f"[drafts] {size:,} cases: {len(text.encode()) / 1e6:.2f} MB of YAML")
    figures: dict[int, dict[str, list[float]]] = {
        size: {"open": [], "save": [], "report": [], "cold open": []} for size in sizes
    }
    profiler = None
    for round_no in range(rounds + 1):  # round 0 warms imports, caches and the session
        for size in sizes:
            editor = editors[size]
            last = round_no == rounds and size == sizes[-1]
            if profile and last:
                from pyinstrument import Profiler

                profiler = Profiler(interval=0.001)
                if profile == "open":
                    editor.save()
                profiler.start()
            saved, shown = editor.save()
            if profiler is not None and profile == "save":
                profiler.stop()
            opened = editor.open()
            if profiler is not None and profile == "open":
                profiler.stop()
            cold = editor.open() if _drop_stored_reports() else None
            label = "warm-up" if round_no == 0 else f"round {round_no}"
            log(
                f"[drafts] {label} {size:>6,}: save {saved:.3f} s, report {shown:.3f} s, open {opened:.3f} s"
                + (f", cold open {cold:.3f} s" if cold is not None else "")
            )
            if round_no:
                row = figures[size]
                row["save"].append(saved)
                row["report"].append(shown)
                row["open"].append(opened)
                if cold is not None:
                    row["cold open"].append(cold)
    medians = {
        size: {what: (statistics.median(times) if times else None) for what, times in row.items()}
        for size, row in figures.items()
    }
    report = {"sizes": sizes, "rounds": rounds, "medians": medians, "raw": figures}
    if profiler is not None:
        report["profile"] = profiler.output_text(unicode=False, color=False, show_all=False)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description="The pack editor on big drafts (open, autosave)")
    parser.add_argument("--sizes", default="1000,10000", help="case counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database", default=DATABASE)
    parser.add_argument("--profile", choices=("save", "open"), help="pyinstrument tree of the last one")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if any(size % 4 for size in sizes):
        parser.error("sizes must be multiples of 4")
    report = measure(
        sizes=sizes,
        rounds=args.rounds,
        database=args.database,
        profile=args.profile,
        log=lambda m: print(m, file=sys.stderr, flush=True),
    )
    if "profile" in report:
        print(report["profile"])
    whats = ("open", "save", "report", "cold open")
    print(f"{'cases':>8} " + " ".join(f"{w + ' s':>12}" for w in whats))
    for size in sizes:
        row = report["medians"][size]
        cells = " ".join(f"{row[w]:>12.3f}" if row[w] is not None else f"{'-':>12}" for w in whats)
        print(f"{size:>8,} {cells}")
    print(f"drafts: medians of {args.rounds} interleaved rounds after a warm-up (wall time)")


if __name__ == "__main__":
    main()
