"""Lane ranking and run-versus-run comparison (grading.md §10.4)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from grading.engine.aggregate import CaseRecord
from grading.engine.compare import (
    LaneStanding,
    compare_records,
    comparison_verdict,
    rank_lanes,
    rank_standings,
)


def rec(case, status="PASSED", score=None, *, dep="d", rep=1, challenge="ch", **kw) -> CaseRecord:
    if score is None and status in ("PASSED", "FAILED"):
        score = 1.0 if status == "PASSED" else 0.0
    return CaseRecord(
        deployment=dep,
        challenge_key=challenge,
        case_key=case,
        status=status,
        repetition=rep,
        score=score,
        **kw,
    )


def standing(name, score, rate=1.0, rel=None, cost=None, graded=3) -> LaneStanding:
    return LaneStanding(name, score, rate, rel, cost, graded)


# -- ranking -------------------------------------------------------------------


def test_ranks_are_competition_ranks_shared_only_when_every_figure_is_equal():
    lanes = rank_standings(
        [
            standing("d", 0.5),
            standing("b", 0.8),
            standing("c", 0.8),
            standing("a", 0.9),
        ]
    )
    assert [(lane.deployment, lane.rank) for lane in lanes] == [("a", 1), ("b", 2), ("c", 2), ("d", 4)]


def test_later_sort_figures_break_ties_of_the_mean_score():
    lanes = rank_standings(
        [
            standing("cheap", 0.8, rate=0.5, rel=1.0, cost=1.0),
            standing("dear", 0.8, rate=0.5, rel=1.0, cost=2.0),
            standing("reliable", 0.8, rate=0.5, rel=1.0, cost=None),
            standing("flaky", 0.8, rate=0.5, rel=0.5, cost=0.1),
            standing("passes", 0.8, rate=0.9, rel=0.0, cost=9.0),
        ]
    )
    assert [lane.deployment for lane in lanes] == ["passes", "cheap", "dear", "reliable", "flaky"]
    assert [lane.rank for lane in lanes] == [1, 2, 3, 4, 5]


def test_lanes_with_no_graded_case_come_last_and_share_their_rank():
    lanes = rank_standings(
        [
            standing("empty-b", None, None, graded=0),
            standing("low", 0.1),
            standing("empty-a", None, None, graded=0),
        ]
    )
    assert [(lane.deployment, lane.rank) for lane in lanes] == [("low", 1), ("empty-a", 2), ("empty-b", 2)]


def test_a_lane_whose_difference_from_the_leader_contains_zero_is_within_noise():
    cases = [f"c{i}" for i in range(10)]
    leader = [rec(c, dep="leader") for c in cases]
    close = [rec(c, dep="close") for c in cases[:9]] + [rec(cases[9], "FAILED", dep="close")]
    far = [rec(c, "FAILED", dep="far") for c in cases]
    ranked = rank_lanes({"close": close, "far": far, "leader": leader}, run_id="r1")
    by = {lane.deployment: lane for lane in ranked}
    assert [lane.deployment for lane in ranked] == ["leader", "close", "far"]
    assert by["leader"].within_noise is False
    assert by["close"].within_noise is True
    assert by["far"].within_noise is False
    assert by["far"].score_difference_interval == (-1.0, -1.0)
    again = rank_lanes({"close": close, "far": far, "leader": leader}, run_id="r1")
    assert [lane.to_dict() for lane in again] == [lane.to_dict() for lane in ranked]


def test_within_noise_is_unknown_without_paired_cases():
    ranked = rank_lanes({"a": [rec("x", dep="a")], "b": [rec("y", dep="b", score=0.5)]})
    assert ranked[1].within_noise is None


# The same three repetition scores summed in two orders: (0.1 + 0.2) + 0.3 is
# 0.6000000000000001, (0.3 + 0.2) + 0.1 is 0.6, so a case's mean over its repetitions (a
# running sum over the count) differs by 1e-16 between two lanes that scored the same.
FORWARD, BACKWARD = (0.1, 0.2, 0.3), (0.3, 0.2, 0.1)


def _repeated(dep: str, order: tuple[float, ...], cases: int = 4) -> list[CaseRecord]:
    return [rec(f"c{i}", score=s, dep=dep, rep=r) for i in range(cases) for r, s in enumerate(order, 1)]


def test_lanes_of_the_same_scores_summed_in_another_order_tie_and_are_within_noise():
    """The overview split them: ranks 1 and 2 by 1e-16 of float noise, and the second not
    within noise of the leader (its paired interval was [1e-17, 1e-17], not containing 0).
    They now tie as the compare page's verdict treats such a delta (``DELTA_NOISE``)."""
    assert sum(FORWARD) != sum(BACKWARD)
    lanes = {
        "b-forward": _repeated("b-forward", FORWARD),
        "a-backward": _repeated("a-backward", BACKWARD),
        "c-lower": _repeated("c-lower", (0.1, 0.2, 0.2)),
    }
    ranked = rank_lanes(lanes, run_id="r1")
    by = {lane.deployment: lane for lane in ranked}
    assert by["a-backward"].mean_score != by["b-forward"].mean_score  # the noise is there
    # tied lanes share the rank; the name orders them (grading.md §10.4)
    assert [(lane.deployment, lane.rank) for lane in ranked] == [
        ("a-backward", 1),
        ("b-forward", 1),
        ("c-lower", 3),
    ]
    assert (by["b-forward"].within_noise, by["c-lower"].within_noise) == (True, False)
    assert by["b-forward"].to_dict()["score_difference"] == 0.0


def test_a_mean_score_tie_of_float_noise_is_broken_by_the_next_figure():
    lanes = rank_standings(
        [standing("noisy-high", sum(FORWARD) / 3, rate=0.5), standing("passes", sum(BACKWARD) / 3, rate=1.0)]
    )
    assert [(lane.deployment, lane.rank) for lane in lanes] == [("passes", 1), ("noisy-high", 2)]


# -- comparison ----------------------------------------------------------------


def test_every_per_case_class():
    base = [
        rec("reg"),
        rec("imp", "FAILED"),
        rec("same-pass", score=0.8),
        rec("same-fail", "FAILED"),
        rec("ungraded"),
        rec("gone"),
    ]
    cand = [
        rec("reg", "FAILED"),
        rec("imp"),
        rec("same-pass", score=0.9),
        rec("same-fail", "FAILED"),
        rec("ungraded", "UNAVAILABLE", score=None),
        rec("new"),
    ]
    result = compare_records(base, cand)
    classes = {c.case_key: c.change for c in result.cases}
    assert classes == {
        "reg": "regression",
        "imp": "improvement",
        "same-pass": "unchanged_pass",
        "same-fail": "unchanged_fail",
        "ungraded": "not_comparable",
        "gone": "removed",
        "new": "added",
    }
    same = next(c for c in result.cases if c.case_key == "same-pass")
    assert round(same.score_delta, 4) == 0.1
    assert result.counts["added"] == 1 and result.matched_graded == 4
    assert [c.case_key for c in result.cases][-1] == "new"
    d = result.to_dict()
    assert d["cases"][0]["class"] == "regression"


def test_a_flip_with_repetitions_between_zero_and_one_is_noisy():
    base = [rec("a", rep=1), rec("a", rep=2), rec("b", rep=1), rec("b", rep=2)]
    cand = [rec("a", "FAILED", rep=1), rec("a", "FAILED", rep=2), rec("b", "FAILED", rep=1), rec("b", rep=2)]
    result = compare_records(base, cand)
    by = {c.case_key: c for c in result.cases}
    assert by["a"].change == "regression" and by["a"].noisy is False
    # b: 2/2 -> 1/2; a tie is not a pass, so it flips, and 0.5 lies strictly between 0 and 1
    assert by["b"].change == "regression" and by["b"].noisy is True
    assert by["b"].candidate_pass_rate == 0.5


def test_a_changed_content_hash_is_flagged():
    result = compare_records([rec("a", content_hash="h1")], [rec("a", content_hash="h2")])
    assert result.cases[0].case_changed is True
    assert (
        compare_records([rec("a", content_hash="h1")], [rec("a", content_hash="h1")]).cases[0].case_changed
        is False
    )


def test_pack_versions_are_shown():
    result = compare_records([rec("a", pack_version=1)], [rec("a", pack_version=2)])
    assert result.pack_version_changed is True
    assert result.to_dict()["baseline_pack_versions"] == [1]


def test_verdict_regressed_when_an_interval_lies_wholly_below_zero():
    cases = [f"c{i}" for i in range(8)]
    result = compare_records([rec(c) for c in cases], [rec(c, "FAILED") for c in cases])
    assert result.verdict == "regressed"
    assert result.pass_rate_delta == -1.0
    assert result.pass_rate_delta_interval == (-1.0, -1.0)


def test_verdict_improved_when_an_interval_lies_wholly_above_zero():
    cases = [f"c{i}" for i in range(8)]
    base = [rec(c, score=0.5) for c in cases]
    cand = [rec(c, score=0.75) for c in cases]
    result = compare_records(base, cand)
    assert result.verdict == "improved"
    assert result.mean_score_delta == 0.25


def test_verdict_within_noise_when_both_intervals_contain_zero():
    base = [rec("a"), rec("b", "FAILED"), rec("c"), rec("d", "FAILED")]
    cand = [rec("a", "FAILED"), rec("b"), rec("c"), rec("d", "FAILED")]
    assert compare_records(base, cand).verdict == "within_noise"


def test_verdict_not_comparable_without_a_matched_graded_case():
    assert compare_records([rec("a")], [rec("b")]).verdict == "not_comparable"
    assert compare_records([rec("a", "ERROR", score=None)], [rec("a")]).verdict == "not_comparable"


def test_regressed_wins_over_improved():
    assert comparison_verdict(3, (-0.5, -0.1), (0.1, 0.2)) == "regressed"
    assert comparison_verdict(3, None, (0.1, 0.2)) == "improved"
    assert comparison_verdict(3, (-0.1, 0.1), None) == "within_noise"


def test_the_same_scores_over_more_repetitions_are_within_noise_not_a_regression():
    # make run's demo: a ledger run with 10 repetitions of the same agent compared with the
    # demo's one-repetition run said "regressed" (mean score delta interval below 0 by 1e-16).
    scores = {"acme": 0.865625, "bolt": 0.9375, "cinder": 0.85, "delta": 0.86125}
    base = [rec(case, score=score) for case, score in scores.items()]
    cand = [rec(case, score=score, rep=rep) for case, score in scores.items() for rep in range(1, 11)]
    comparison = compare_records(base, cand)
    assert comparison.verdict == "within_noise"
    assert comparison.to_dict()["mean_score_delta"] == 0.0
    assert comparison_verdict(3, (-1e-16, -1e-17), None) == "within_noise"
    assert comparison_verdict(3, None, (1e-17, 1e-16)) == "within_noise"
    assert comparison_verdict(3, (-0.01, -1e-6), None) == "regressed"


def test_comparison_is_deterministic_for_its_seed():
    base = [rec(f"c{i}", "PASSED" if i % 3 else "FAILED", score=i / 10) for i in range(10)]
    cand = [rec(f"c{i}", "PASSED" if i % 2 else "FAILED", score=(10 - i) / 10) for i in range(10)]
    first = compare_records(base, cand, run_id="r2", deployment="lane").to_dict()
    assert first == compare_records(base, cand, run_id="r2", deployment="lane").to_dict()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.sampled_from(["PASSED", "FAILED", "ERROR"])), max_size=12
    ),
    st.lists(
        st.tuples(st.sampled_from("abcdef"), st.sampled_from(["PASSED", "FAILED", "ERROR"])), max_size=12
    ),
)
def test_comparison_never_raises_and_deltas_stay_bounded(base, cand):
    result = compare_records([rec(c, s) for c, s in base], [rec(c, s) for c, s in cand])
    assert result.verdict in ("regressed", "improved", "within_noise", "not_comparable")
    for interval in (result.pass_rate_delta_interval, result.mean_score_delta_interval):
        assert interval is None or -1.0 <= interval[0] <= interval[1] <= 1.0
