"""What bidi isolation changes on screen: a deployment name holding a RIGHT-TO-LEFT OVERRIDE
(U+202E) reverses the text after it unless it is isolated (``|bdi``); the comparison's text
around a name reads left to right in order."""

from __future__ import annotations

from typing import Any

import pytest

from runs.compare_tasks import comparison_request, compute_comparison
from runs.models import RunLane
from runs.seeding import seed_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OVERRIDE = "\u202eevil"

# The left edge of the first occurrence of each word in the element's text, in pixels.
LEFT_EDGES = """([selector, words]) => {
  const element = document.querySelector(selector);
  return words.map((word) => {
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walker.nextNode())) {
      const at = node.data.indexOf(word);
      if (at < 0) continue;
      const range = document.createRange();
      range.setStart(node, at);
      range.setEnd(node, at + word.length);
      return range.getBoundingClientRect().left;
    }
    return null;
  });
}"""


def in_reading_order(page: Any, selector: str, words: list[str]) -> bool:
    edges = page.evaluate(LEFT_EDGES, [selector, words])
    assert None not in edges, (words, edges)
    return edges == sorted(edges)


def test_an_override_in_a_deployment_name_does_not_reorder_the_comparison(personas, login, page):
    baseline = seed_run(workspace=personas.workspace, items=4, lanes=2, name="base", seed=1)
    candidate = seed_run(workspace=personas.workspace, items=4, lanes=2, name="cand", seed=2)
    RunLane.objects.filter(run__in=[baseline, candidate], position=0).update(deployment_name=OVERRIDE)
    RunLane.objects.filter(run=baseline, position=1).update(deployment_name=OVERRIDE + "-gone")
    compute_comparison(comparison_request(baseline=baseline, candidate=candidate).id)
    login(personas.owner)
    page.goto(f"/runs/compare/?baseline={baseline.id}&candidate={candidate.id}")
    line = "#compare-result > p.muted"
    assert page.locator(line).text_content().startswith("Only in the baseline:")
    assert in_reading_order(page, line, ["Only", "baseline", "only", "candidate", "sloppy"])
    assert page.locator("#compare-result tbody th[scope=row] bdi").first.text_content() == OVERRIDE
