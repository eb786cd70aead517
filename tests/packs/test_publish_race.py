"""Two publishes racing for one (pack, number) on PostgreSQL: one wins, the other gets 409."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from packs import services
from packs.models import Case, Pack, PackVersion
from packs.services import publish as publish_module
from tests.packs.publish_fixtures import mental_math

pytestmark = pytest.mark.django_db(transaction=True)


def race(personas, monkeypatch, texts: list[str]) -> list[object]:
    """Run one publish per text in its own thread and connection; both enter their
    transactions before either locks or creates the pack."""
    if connection.vendor != "postgresql":
        pytest.skip("needs concurrent connections")
    barrier = threading.Barrier(len(texts), timeout=10)
    original = publish_module._check_artifact_ids

    def check_then_wait(**kwargs):
        found = original(**kwargs)
        barrier.wait()  # both transactions are open here
        return found

    monkeypatch.setattr(publish_module, "_check_artifact_ids", check_then_wait)
    outcomes: list[object] = [None] * len(texts)

    def run(index: int, text: str) -> None:
        try:
            outcomes[index] = services.pack_version_publish(
                workspace=personas.workspace, data=text.encode(), user=personas.owner
            )
        except Exception as exc:  # the outcome is what the test inspects
            outcomes[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(texts)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_different_bytes_under_one_number_one_wins_and_the_other_gets_409(personas, monkeypatch):
    outcomes = race(personas, monkeypatch, [mental_math(), mental_math(extra_case=True)])
    winners = [o for o in outcomes if isinstance(o, services.PublishResult)]
    losers = [o for o in outcomes if isinstance(o, services.PublishConflict)]
    assert len(winners) == 1 and len(losers) == 1, outcomes
    assert losers[0].code == "challenge_pack_version_exists"
    assert Pack.objects.count() == 1
    version = PackVersion.objects.get()
    assert version.pk == winners[0].version.pk
    assert Case.objects.filter(input_set__version=version).count() == len(
        winners[0].version.manifest["input_sets"][0]["cases"]
    )


def test_the_same_bytes_racing_both_succeed_with_one_version(personas, monkeypatch):
    outcomes = race(personas, monkeypatch, [mental_math(), mental_math()])
    assert all(isinstance(o, services.PublishResult) for o in outcomes), outcomes
    assert sorted(o.already_published for o in outcomes) == [False, True]
    assert PackVersion.objects.count() == 1
