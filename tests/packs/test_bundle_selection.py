"""Input-set selection (pack-format §13), a pure function over a manifest."""

from __future__ import annotations

import pytest

from packs.bundle import SelectionError, select_input_set


def manifest(*sets: tuple[str, str], challenges: tuple[str, ...] = ("c1", "c2")) -> dict:
    return {
        "challenges": [{"key": key} for key in challenges],
        "input_sets": [
            {
                "key": key,
                "name": name,
                "cases": [{"challenge_key": "c1", "case_key": f"{key}-1", "payload": {}}],
            }
            for key, name in sets
        ],
    }


def test_no_sets_and_no_selector_is_the_zero_set_run():
    selection = select_input_set(manifest(), None)
    assert selection.zero_set and selection.key is None
    assert selection.cases == [
        {"challenge_key": "c1", "case_key": "c1", "payload": {}},
        {"challenge_key": "c2", "case_key": "c2", "payload": {}},
    ]


def test_one_set_is_selected_without_a_selector():
    selection = select_input_set(manifest(("smoke", "Smoke")), None, input_set_ids={"smoke": "id-1"})
    assert selection.key == "smoke"
    assert selection.input_set_id == "id-1"
    assert [c["case_key"] for c in selection.cases] == ["smoke-1"]


@pytest.mark.parametrize("selector", [None, "", "   "])
def test_several_sets_need_a_selector(selector):
    with pytest.raises(SelectionError) as caught:
        select_input_set(manifest(("a", "A"), ("b", "B")), selector)
    assert caught.value.code == "missing_challenge_input_set_id"
    assert caught.value.message == "the pack version has several input sets; choose one"
    assert caught.value.choices == ["a", "b"]
    assert caught.value.to_dict()["error"]["choices"] == ["a", "b"]


@pytest.mark.parametrize("selector", ["smoke", " SMOKE ", "Smoke Tests", "smoke tests"])
def test_keys_and_names_compare_trimmed_and_ignoring_case(selector):
    assert select_input_set(manifest(("smoke", "Smoke Tests"), ("full", "Full")), selector).key == "smoke"


def test_an_id_match_wins_over_a_key_match():
    sets = manifest(("alpha", "Alpha"), ("beta", "Beta"))
    selection = select_input_set(sets, "beta", input_set_ids={"alpha": "beta", "beta": "id-b"})
    assert selection.key == "alpha"


def test_several_key_or_name_matches_are_ambiguous():
    with pytest.raises(SelectionError) as caught:
        select_input_set(manifest(("smoke", "Full"), ("full", "Smoke")), "smoke")
    assert caught.value.code == "ambiguous_challenge_input_set"
    assert caught.value.message == "matches several input sets; use the input set id"
    assert caught.value.choices == ["smoke", "full"]


def test_no_match_is_invalid():
    with pytest.raises(SelectionError) as caught:
        select_input_set(manifest(("a", "A")), "zzz")
    assert (caught.value.code, caught.value.message) == (
        "invalid_challenge_input_set_id",
        "matches no input set of the selected pack version",
    )
    assert caught.value.choices is None


def test_an_id_of_another_version_is_named_as_such():
    with pytest.raises(SelectionError) as caught:
        select_input_set(manifest(("a", "A")), "id-old", other_version_ids={"id-old"})
    assert (caught.value.code, caught.value.message) == (
        "invalid_challenge_input_set_id",
        "must belong to the selected pack version",
    )


def test_a_selector_on_a_pack_without_sets_matches_nothing():
    with pytest.raises(SelectionError) as caught:
        select_input_set(manifest(), "smoke")
    assert caught.value.code == "invalid_challenge_input_set_id"
