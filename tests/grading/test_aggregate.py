"""Lane aggregation, incremental counters and the latency histogram (grading.md §10.3)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grading.engine.aggregate import (
    CaseRecord,
    LaneCounters,
    LatencyHistogram,
    aggregate_lane,
    group_by_lane,
    record_from_grade,
)
from grading.engine.stats import bootstrap_interval, seed_for


def rec(case, status="PASSED", score=None, *, challenge="ch", dep="default", rep=1, **kw) -> CaseRecord:
    if score is None and status in ("PASSED", "FAILED"):
        score = 1.0 if status == "PASSED" else 0.0
    outcome = {"PASSED": "pass", "FAILED": "fail", "UNAVAILABLE": "unavailable"}.get(status, "pack_error")
    kw.setdefault("outcome_class", outcome)
    kw.setdefault("validity", "valid")
    return CaseRecord(
        deployment=dep,
        challenge_key=challenge,
        case_key=case,
        status=status,
        repetition=rep,
        score=score,
        **kw,
    )


GRADE = {
    "schema_version": 1,
    "case": {
        "run_id": "r1",
        "lane_id": "lane-a",
        "deployment": "squarer",
        "challenge_key": "sq",
        "case_key": "c4",
        "repetition": 2,
        "attempt": 1,
        "pack_version": 3,
    },
    "status": "FAILED",
    "outcome_class": "fail",
    "validity": "degraded",
    "scorecard": {
        "strategy": "weighted",
        "overall_score": 0.25,
        "passed": False,
        "dimensions": [
            {"key": "correctness", "source": "validators", "score": 0.25, "status": "FAILED"},
            {"key": "rel", "source": "reliability", "score": 1.0, "status": "PASSED"},
            {"key": "lat", "source": "latency", "score": None, "status": "UNAVAILABLE"},
        ],
    },
    "gates": {
        "compliance": "passed",
        "resolution": "not_graded",
        "guards": "not_graded",
        "compliance_score": 0.75,
    },
    "expectations": [
        {
            "key": "exact",
            "kind": "validator",
            "status": "FAILED",
            "outcome_class": "fail",
            "reason_code": None,
        },
        {
            "key": "tone",
            "kind": "judge",
            "status": "ERROR",
            "outcome_class": "evaluator_error",
            "reason_code": "low_agreement",
            "details": {"agreement": 0.5},
        },
    ],
    "judge_usage": {"calls": 3, "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01},
}


def test_a_record_is_read_from_a_grading_document():
    r = record_from_grade(
        GRADE, metrics={"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.002, "latency_ms": 900}
    )
    assert (r.deployment, r.lane_id, r.challenge_key, r.case_key, r.repetition) == (
        "squarer",
        "lane-a",
        "sq",
        "c4",
        2,
    )
    assert (r.status, r.outcome_class, r.validity, r.score) == ("FAILED", "fail", "degraded", 0.25)
    assert r.dimensions == {"correctness": 0.25, "rel": 1.0, "lat": None}
    assert r.reliability == 1.0 and r.compliance_score == 0.75
    assert r.expectations["tone"] == ("ERROR", "evaluator_error", "low_agreement")
    assert r.judge_agreement == {"tone": 0.5}
    assert (r.judge_calls, r.judge_cost_usd, r.cost_usd, r.latency_ms) == (3, 0.01, 0.002, 900.0)
    assert r.pack_version == 3 and r.run_id == "r1"


def test_records_round_trip_through_plain_dicts():
    r = record_from_grade(GRADE)
    assert CaseRecord.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_a_lane_counts_statuses_and_outcome_classes_and_wilson_matches_the_example():
    records = [
        rec("c1"),
        rec("c2"),
        rec("c3"),
        rec("c4", "FAILED"),
        rec("c5", "UNAVAILABLE", validity="degraded"),
    ]
    lane = aggregate_lane(records, run_id="r", deployment="squarer").to_dict()
    assert lane["counts"] == {"PASSED": 3, "FAILED": 1, "NOT_EVALUATED": 0, "UNAVAILABLE": 1, "ERROR": 0}
    assert lane["outcome_counts"]["unavailable"] == 1 and lane["outcome_counts"]["fail"] == 1
    assert lane["pass_rate"] == 0.75
    assert lane["pass_rate_interval"] == [0.3006, 0.9544]
    assert lane["coverage"] == 0.8
    assert lane["mean_score"] == 0.75
    assert lane["graded_cases"] == 4 and lane["ungraded_cases"] == 1
    assert lane["validity"] == "degraded"
    assert lane["validity_counts"] == {"valid": 4, "degraded": 1, "invalid": 0}


def test_the_mean_score_interval_is_the_seeded_bootstrap_over_cases():
    records = [rec("a", score=0.2), rec("b", score=0.9), rec("c", score=0.5, status="FAILED")]
    lane = aggregate_lane(records, run_id="run-9", deployment="d1")
    expected = bootstrap_interval([0.2, 0.9, 0.5], seed_for("run-9", "d1", "mean_score"))
    assert lane.micro.mean_score_interval == expected


def test_challenge_bootstraps_are_optional_and_seeded_by_challenge():
    records = [rec("a", score=0.2, challenge="x"), rec("b", score=0.9, challenge="x")]
    assert aggregate_lane(records).challenges["x"].mean_score_interval is None
    lane = aggregate_lane(records, run_id="r", deployment="d", challenge_intervals=True)
    expected = bootstrap_interval([0.2, 0.9], seed_for("r", "d", "x:mean_score"))
    assert lane.challenges["x"].mean_score_interval == expected


def test_the_mean_score_interval_is_null_below_two_scored_cases():
    lane = aggregate_lane([rec("a"), rec("b", "UNAVAILABLE")]).to_dict()
    assert lane["mean_score"] == 1.0 and lane["mean_score_interval"] is None


def test_a_lane_without_a_verdict_has_null_rates():
    lane = aggregate_lane([rec("a", "UNAVAILABLE"), rec("b", "NOT_EVALUATED")]).to_dict()
    assert lane["pass_rate"] is None and lane["pass_rate_interval"] is None
    assert lane["coverage"] == 0.0


def test_with_repetitions_a_case_contributes_the_mean_of_its_repetitions():
    records = [
        rec("a", rep=1),
        rec("a", "FAILED", rep=2),
        rec("a", rep=3),
        rec("a", rep=4),
        rec("b", rep=1),
        rec("b", "UNAVAILABLE", rep=2),
        rec("c", "ERROR", rep=1),
    ]
    lane = aggregate_lane(records)
    # case a: 3/4, case b: 1/1, case c: no verdict (excluded)
    assert lane.pass_rate == pytest.approx((0.75 + 1.0) / 2)
    assert lane.graded_cases == 2
    assert lane.micro.counts["PASSED"] == 4
    assert lane.mean_score == pytest.approx((0.75 + 1.0) / 2)


def test_micro_and_macro_figures_and_the_challenge_breakdown():
    records = [
        rec("a", challenge="x"),
        rec("b", challenge="x"),
        rec("c", challenge="x"),
        rec("d", "FAILED", challenge="y"),
    ]
    lane = aggregate_lane(records).to_dict()
    assert lane["pass_rate"] == 0.75  # micro: every case weighs 1
    assert lane["macro"]["pass_rate"] == 0.5  # macro: mean of x (1.0) and y (0.0)
    assert list(lane["challenges"]) == ["x", "y"]
    assert lane["challenges"]["x"]["pass_rate"] == 1.0
    assert lane["challenges"]["y"]["counts"]["FAILED"] == 1


def test_dimension_compliance_and_reliability_means_are_per_case():
    records = [
        rec("a", dimensions={"correct": 1.0}, compliance_score=1.0, reliability=1.0),
        rec("b", dimensions={"correct": 0.0}, compliance_score=0.5, reliability=0.0),
        rec("c", dimensions={"correct": None}),
    ]
    lane = aggregate_lane(records)
    assert lane.micro.dimension_means == {"correct": 0.5}
    assert lane.micro.compliance_mean == 0.75
    assert lane.mean_reliability == 0.5


def test_worst_validity_wins():
    lane = aggregate_lane([rec("a"), rec("b", validity="invalid"), rec("c", validity="degraded")])
    assert lane.micro.validity == "invalid"


def test_spend_totals_and_latency_percentiles():
    records = [rec(str(i), cost_usd=0.01, input_tokens=10, latency_ms=100.0 * (i + 1)) for i in range(10)]
    records.append(rec("x", judge_calls=2, judge_cost_usd=None))
    lane = aggregate_lane(records).to_dict()
    assert lane["agent"]["cost_usd"] == pytest.approx(0.1)
    assert lane["agent"]["input_tokens"] == 100
    assert 400 <= lane["agent"]["latency_p50_ms"] <= 600
    assert 850 <= lane["agent"]["latency_p95_ms"] <= 1200
    assert lane["judge_usage"]["calls"] == 2
    assert lane["agent"]["output_tokens"] is None


def test_group_by_lane_keeps_first_appearance_order():
    groups = group_by_lane([rec("a", dep="z"), rec("a", dep="b"), rec("b", dep="z")])
    assert list(groups) == ["z", "b"] and len(groups["z"]) == 2


# -- histogram -----------------------------------------------------------------


def test_latency_buckets_are_fixed_and_logarithmic():
    assert LatencyHistogram.bucket(0.2) == -1
    assert LatencyHistogram.bucket(1.0) == 0
    assert LatencyHistogram.bucket(2.0) == 4
    assert LatencyHistogram.bucket(1e12) == LatencyHistogram.BUCKETS - 1
    lo, hi = LatencyHistogram.bounds(4)
    assert (lo, hi) == (2.0, pytest.approx(2**1.25))


def test_latency_quantiles_are_within_one_bucket_of_the_truth():
    hist = LatencyHistogram()
    values = [float(v) for v in range(1, 1001)]
    for v in values:
        hist.add(v)
    for q, truth in ((0.5, 500.0), (0.95, 950.0)):
        estimate = hist.quantile(q)
        assert truth / 1.19 <= estimate <= truth * 1.19
    assert LatencyHistogram().quantile(0.5) is None


def test_histograms_merge_and_round_trip():
    a, b = LatencyHistogram(), LatencyHistogram()
    a.add(10)
    b.add(10)
    b.add(5000)
    a.merge(b)
    assert a.total == 3
    again = LatencyHistogram.from_dict(json.loads(json.dumps(a.to_dict())))
    assert again.counts == a.counts and again.total == 3


# -- incremental counters ------------------------------------------------------


def test_counters_agree_with_the_one_shot_aggregate_without_repetitions():
    records = [
        rec("a", dimensions={"d": 1.0}),
        rec("b", "FAILED", dimensions={"d": 0.0}),
        rec("c", "UNAVAILABLE", validity="degraded"),
        rec("d", score=0.5, challenge="other"),
    ]
    counters = LaneCounters()
    for r in records:
        counters.add(r)
    summary = counters.summary()
    lane = aggregate_lane(records).to_dict()
    for key in (
        "counts",
        "pass_rate",
        "pass_rate_interval",
        "coverage",
        "mean_score",
        "validity",
        "validity_counts",
    ):
        assert summary[key] == lane[key], key
    assert summary["challenges"]["other"]["pass_rate"] == 1.0
    assert summary["dimension_means"] == {"d": 0.5}


def test_counters_with_repetitions_use_the_per_case_mean():
    records = [rec("a", rep=1), rec("a", "FAILED", rep=2), rec("b", rep=1)]
    counters = LaneCounters(repetitions=2)
    for r in records:
        counters.add(r)
    assert counters.pass_rate() == pytest.approx(aggregate_lane(records).pass_rate) == 0.75


def test_counters_with_repetitions_average_dimensions_compliance_and_reliability_per_case():
    # §10.3: every case weighs 1. Case a's second repetition has no dimension, compliance or
    # reliability value (ERROR); the counters averaged over executions (1 + 0 + 0) / 3 while
    # aggregate_lane averaged the cases (1 + 0) / 2.
    figures = {"dimensions": {"d": 1.0}, "compliance_score": 1.0, "reliability": 1.0}
    zeros = {"dimensions": {"d": 0.0}, "compliance_score": 0.0, "reliability": 0.0}
    records = [
        rec("a", rep=1, **figures),
        rec("a", "ERROR", rep=2, dimensions={"d": None}),
        rec("b", "FAILED", rep=1, **zeros),
        rec("b", "FAILED", rep=2, **zeros),
    ]
    counters = LaneCounters(repetitions=2)
    for r in records:
        counters.add(r)
    lane = aggregate_lane(records).to_dict()
    keys = ("pass_rate", "mean_score", "coverage", "dimension_means", "compliance_mean", "mean_reliability")
    want = {k: lane[k] for k in keys}
    assert want["dimension_means"] == {"d": 0.5} and want["compliance_mean"] == 0.5
    assert {k: counters.summary()[k] for k in keys} == want
    # ... after a JSON round trip, a merge of two halves and a re-grade (remove then add)
    again = LaneCounters.from_dict(json.loads(json.dumps(counters.to_dict())))
    assert {k: again.summary()[k] for k in keys} == want
    first, second = LaneCounters(repetitions=2), LaneCounters(repetitions=2)
    for i, r in enumerate(records):
        (first if i % 2 else second).add(r)
    first.merge(second)
    assert {k: first.summary()[k] for k in keys} == want
    counters.remove(records[1])
    counters.add(rec("a", rep=2, **zeros))
    fixed = [records[0], rec("a", rep=2, **zeros), *records[2:]]
    assert counters.summary()["dimension_means"] == aggregate_lane(fixed).to_dict()["dimension_means"]


def test_counters_support_regrade_by_remove_then_add():
    old, new = rec("a", "FAILED"), rec("a", "PASSED")
    counters = LaneCounters()
    counters.add(old)
    counters.remove(old)
    counters.add(new)
    assert counters.counts["FAILED"] == 0 and counters.pass_rate() == 1.0


def test_counters_merge_and_survive_json():
    a, b = LaneCounters(), LaneCounters()
    a.add(rec("a", latency_ms=50.0, cost_usd=0.5))
    b.add(rec("b", "FAILED", latency_ms=70.0))
    a.merge(b)
    again = LaneCounters.from_dict(json.loads(json.dumps(a.to_dict())))
    assert again.summary() == a.summary()
    assert again.pass_rate() == 0.5
    assert again.summary()["agent"]["cost_usd"] == 0.5


statuses = st.sampled_from(["PASSED", "FAILED", "NOT_EVALUATED", "UNAVAILABLE", "ERROR"])
records_strategy = st.lists(
    st.builds(
        CaseRecord,
        deployment=st.just("d"),
        challenge_key=st.sampled_from(["x", "y"]),
        case_key=st.sampled_from(["a", "b", "c", "d"]),
        status=statuses,
        repetition=st.integers(1, 3),
        score=st.one_of(st.none(), st.floats(0, 1)),
        validity=st.sampled_from([None, "valid", "degraded", "invalid"]),
        latency_ms=st.one_of(st.none(), st.floats(0, 1e7)),
        dimensions=st.dictionaries(
            st.sampled_from(["d", "e"]), st.one_of(st.none(), st.floats(0, 1)), max_size=2
        ),
        compliance_score=st.one_of(st.none(), st.floats(0, 1)),
        reliability=st.one_of(st.none(), st.sampled_from([0.0, 1.0])),
    ),
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(records_strategy)
def test_aggregation_never_raises_and_rates_stay_within_zero_and_one(records):
    lane = aggregate_lane(records, run_id="h")
    figures = [lane.micro] + list(lane.challenges.values())
    for f in figures:
        for value in (f.pass_rate, f.coverage, f.mean_score):
            assert value is None or -1e-12 <= value <= 1 + 1e-12
        for interval in (f.pass_rate_interval, f.mean_score_interval):
            assert interval is None or 0.0 <= interval[0] <= interval[1] <= 1.0 + 1e-12
    counters = LaneCounters(repetitions=3)
    for r in records:
        counters.add(r)
    summary = counters.summary()
    doc = lane.to_dict()
    assert summary["pass_rate"] == doc["pass_rate"]
    # every per-case figure of the incremental counters is the one-shot aggregate's (each
    # case weighs 1), up to the last shown decimal
    close = pytest.approx
    for key in ("mean_score", "coverage", "compliance_mean", "mean_reliability"):
        assert (summary[key] is None) == (doc[key] is None), key
        assert summary[key] is None or summary[key] == close(doc[key], abs=1.5e-4), key
    for key, value in doc["dimension_means"].items():  # a key never graded: None or absent
        got = summary["dimension_means"].get(key)
        assert (got is None) == (value is None) and (got is None or got == close(value, abs=1.5e-4)), key
    json.dumps(doc)
