"""Screenshots of the result pages for the README, taken from a running `make run`.

    make run                      # in one terminal; wait for the demo runs to complete
    .venv/bin/python scripts/screenshots.py [--base-url http://127.0.0.1:8000]

Logs in as the demo user, opens the demo run "Demo: Goodwill replies", and saves its
overview and the first failed case's page to docs/screenshots/ (overview.png, case.png).
Uses Debian's chromium through Playwright (never a downloaded browser).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
RUN_NAME = "Demo: Goodwill replies"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base-url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="demo")
    parser.add_argument("--password", default="demo-password")
    args = parser.parse_args()
    chromium = shutil.which("chromium")
    if chromium is None:
        print("chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    OUT.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{args.base_url}/login/")
        page.fill("input[name=username]", args.user)
        page.fill("input[name=password]", args.password)
        page.click("button[type=submit]")
        page.goto(f"{args.base_url}/runs/")
        page.get_by_role("link", name=RUN_NAME).first.click()
        page.get_by_test_id("live-status").filter(has_text="completed").wait_for(timeout=120_000)
        # the charts and assertion health are computed by a task once the run completes
        for _ in range(60):
            page.reload()
            if "omputing…" not in page.content():
                break
            page.wait_for_timeout(1000)
        page.screenshot(path=str(OUT / "overview.png"), full_page=True)
        page.get_by_role("link", name="Failed cases").click()
        page.locator("table a[href*='/cases/']").first.click()
        page.wait_for_load_state()
        page.screenshot(path=str(OUT / "case.png"), full_page=True)
        browser.close()
    print(f"saved {OUT / 'overview.png'} and {OUT / 'case.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
