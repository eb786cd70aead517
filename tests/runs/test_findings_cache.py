"""The findings a dispatcher computes itself are kept in a bounded LRU per process."""

from __future__ import annotations

from types import SimpleNamespace

from runs import recording


def test_findings_cache_is_a_bounded_lru(monkeypatch):
    computed: list[str] = []

    def fake_probe(ctx, case, base):
        computed.append(case.case_key)
        return [f"finding of {case.case_key}"]

    monkeypatch.setattr(recording, "probe_findings", fake_probe)
    monkeypatch.setattr(recording, "FINDINGS_CACHE_SIZE", 2)
    monkeypatch.setattr(recording, "_findings_cache", type(recording._findings_cache)())
    ctx = SimpleNamespace(stored_findings=None, pack_version_id=1, pack_hash="h", input_set_key=None)

    def case(key: str) -> SimpleNamespace:
        return SimpleNamespace(challenge_key="ch", case_key=key)

    assert recording.case_findings(ctx, case("a"), None) == ["finding of a"]
    recording.case_findings(ctx, case("b"), None)
    recording.case_findings(ctx, case("a"), None)  # a hit: a becomes the most recent
    recording.case_findings(ctx, case("c"), None)  # evicts b, the least recent
    assert len(recording._findings_cache) == 2
    recording.case_findings(ctx, case("a"), None)
    recording.case_findings(ctx, case("b"), None)
    assert computed == ["a", "b", "c", "b"]


def test_stored_findings_replace_the_computed_ones(monkeypatch):
    monkeypatch.setattr(recording, "_findings_cache", type(recording._findings_cache)())
    recording._findings_cache[(1, "h", None, "ch", "a")] = ["x"]
    recording.forget_computed_findings()
    assert len(recording._findings_cache) == 0
