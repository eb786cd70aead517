"""n_wise position debiasing (grading.md §6.1): "each sample orders them differently". With
``shuffle`` every sample drew an independent seeded permutation, so two samples of a
two-lane ranking showed the same order half the time: the lane shown first was shown first
in every sample and position bias was not debiased at all."""

from __future__ import annotations

import itertools

from grading.judges.nwise import label_orders


def test_two_lanes_two_samples_are_always_shown_in_both_orders():
    for run in range(40):
        orders = label_orders("AB", 2, "shuffle", (f"run-{run}", "ch", "c1", "best"))
        assert sorted(orders) == [["A", "B"], ["B", "A"]], (run, orders)


def test_samples_differ_while_unused_orders_remain_and_stay_seeded():
    for run in range(20):
        parts = (f"run-{run}", "ch", "c1", "best")
        orders = label_orders("ABC", 6, "shuffle", parts)
        assert sorted(map(tuple, orders)) == sorted(itertools.permutations("ABC"))
        assert orders == label_orders("ABC", 6, "shuffle", parts)  # reproducible
    # more samples than orders: every order used, then repeats are unavoidable
    assert {tuple(o) for o in label_orders("AB", 3, "shuffle", ("r", "ch", "c", "k"))} == {
        ("A", "B"),
        ("B", "A"),
    }
    five = label_orders("ABCDE", 10, "shuffle", ("r", "ch", "c", "k"))
    assert len({tuple(o) for o in five}) == 10
