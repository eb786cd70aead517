"""run_create: validation errors (each code) and what it creates."""

from __future__ import annotations

import pytest

from packs.models import Draft, InputSet
from runs.models import RunItem, RunLane, Transition
from runs.services.deployments import deployment_create
from runs.services.runs import RunError
from tests.runs.runfactory import create_run, hosted, pack_yaml, publish

pytestmark = pytest.mark.django_db


def _error(**kwargs) -> RunError:
    with pytest.raises(RunError) as info:
        create_run_kw(**kwargs)
    return info.value


def test_creates_lanes_and_items_in_bulk(personas):
    ws = personas.workspace
    version = publish(ws, cases=3, sets=1)
    a = hosted(ws, "http://127.0.0.1:9/a", name="a")
    b = hosted(ws, "http://127.0.0.1:9/b", name="b")
    run = create_run(ws, version, [a, b.name], repetitions=2, name=" nightly ", max_in_flight=4)
    assert (run.status, run.name, run.repetitions, run.max_in_flight) == ("queued", "nightly", 2, 4)
    assert run.input_set.key == "set0"  # the only set is chosen automatically
    assert list(RunLane.objects.filter(run=run).values_list("deployment_name", "pending")) == [
        ("a", 6),
        ("b", 6),
    ]
    assert RunItem.objects.filter(run=run).count() == 12
    assert run.items_total == run.items_open == 12
    first = RunItem.objects.filter(run=run).order_by("id").first()
    assert (first.case_key, first.repetition, first.state) == ("c0", 1, "pending")
    assert Transition.objects.filter(run=run, to_state="queued").exists()


def test_input_set_selection(personas):
    ws = personas.workspace
    version = publish(ws, cases=2, sets=2)
    dep = hosted(ws, "http://127.0.0.1:9/a")
    err = _error(workspace=ws, version=version, deployments=[dep])
    assert err.code == "missing_challenge_input_set_id" and err.choices == ["set0", "set1"]
    assert create_run(ws, version, [dep], input_set="SET 1").input_set.key == "set1"  # exact name, any case
    chosen = InputSet.objects.get(version=version, key="set0")
    assert create_run(ws, version, [dep], input_set=str(chosen.public_id)).input_set == chosen
    other = publish(ws, slug="other", cases=1)
    foreign = InputSet.objects.get(version=other)
    err = _error(workspace=ws, version=version, deployments=[dep], input_set=str(foreign.public_id))
    assert err.code == "invalid_challenge_input_set_id" and "must belong" in err.message
    assert _error(workspace=ws, version=version, deployments=[dep], input_set="nope").code == (
        "invalid_challenge_input_set_id"
    )


def test_an_input_set_id_is_read_as_a_uuid_whatever_its_case(personas):
    """An id is compared as a UUID (read ignoring case): an upper-case or brace-wrapped id, as
    some tools print them, matched nothing, and another version's said "matches no input set"."""
    ws = personas.workspace
    version = publish(ws, cases=1, sets=2)
    dep = hosted(ws, "http://127.0.0.1:9/a")
    chosen = InputSet.objects.get(version=version, key="set1")
    for written in (str(chosen.public_id).upper(), f"{{{chosen.public_id}}}", chosen.public_id.hex):
        assert create_run(ws, version, [dep], input_set=written).input_set == chosen
    other = publish(ws, slug="other", cases=1)
    foreign = InputSet.objects.get(version=other)
    err = _error(workspace=ws, version=version, deployments=[dep], input_set=str(foreign.public_id).upper())
    assert err.code == "invalid_challenge_input_set_id" and "must belong" in err.message


def test_zero_set_run_has_one_empty_case_per_challenge(personas):
    ws = personas.workspace
    version = publish(ws, cases=2, sets=0)
    run = create_run(ws, version, [hosted(ws, "http://127.0.0.1:9/a")])
    assert run.input_set is None
    assert list(RunItem.objects.filter(run=run).values_list("challenge_key", "case_key", "case_id")) == [
        ("echo", "echo", None)
    ]


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"repetitions": 0}, "invalid_repetitions"),
        ({"repetitions": 11}, "invalid_repetitions"),
        ({"repetitions": "x"}, "invalid_repetitions"),
        ({"max_in_flight": 0}, "invalid_max_in_flight"),
        ({"name": "n" * 201}, "invalid_name"),
    ],
)
def test_bad_numbers_and_names(personas, kwargs, code):
    ws = personas.workspace
    version = publish(ws, cases=1)
    err = _error(workspace=ws, version=version, deployments=[hosted(ws, "http://127.0.0.1:9/a")], **kwargs)
    assert err.code == code and err.field


def test_deployment_errors(personas):
    ws = personas.workspace
    version = publish(ws, cases=1)
    dep = hosted(ws, "http://127.0.0.1:9/a")
    assert _error(workspace=ws, version=version, deployments=[]).code == "missing_deployment"
    assert _error(workspace=ws, version=version, deployments=[dep, "agent"]).code == "duplicate_deployment"
    err = _error(workspace=ws, version=version, deployments=["ghost"])
    assert err.code == "invalid_deployment" and err.choices == ["agent"]
    foreign = deployment_create(
        workspace=personas.other_workspace, name="theirs", kind="trace_import"
    ).deployment
    assert _error(workspace=ws, version=version, deployments=[foreign]).code == "invalid_deployment"
    assert (
        _error(workspace=ws, version=version, deployments=[str(foreign.public_id)]).code
        == "invalid_deployment"
    )


def test_draft_and_unsupported_mode_are_refused(personas):
    ws = personas.workspace
    dep = hosted(ws, "http://127.0.0.1:9/a")
    draft = Draft.objects.create(workspace=ws, name="wip")
    assert _error(workspace=ws, version=draft, deployments=[dep]).code == "pack_version_not_published"
    multi = publish(ws, slug="multi", mode="responses", cases=1)
    err = _error(workspace=ws, version=multi, deployments=[dep])
    assert err.code == "unsupported_execution_mode" and "responses" in err.message


def create_run_kw(**kwargs):
    return create_run(kwargs.pop("workspace"), kwargs.pop("version"), kwargs.pop("deployments"), **kwargs)


def test_a_voice_pack_is_refused_with_unsupported_execution_mode(personas):
    # pack-format §13: voice packs validate and publish, their runs are refused (they queued).
    import yaml

    from packs import services

    ws = personas.workspace
    doc = yaml.safe_load(pack_yaml(slug="voice", cases=1))
    doc.update(
        modality="voice",
        interface_spec={"transports": ["webrtc"], "channel_profile": "x"},
        scenario={"language": "en"},
    )
    version = services.pack_version_publish(workspace=ws, data=yaml.safe_dump(doc).encode()).version
    for dep in (
        hosted(ws, "http://127.0.0.1:9/a"),
        deployment_create(workspace=ws, name="t", kind="trace_import").deployment,
    ):
        err = _error(workspace=ws, version=version, deployments=[dep])
        assert (err.code, err.field) == ("unsupported_execution_mode", "pack")
        assert "voice" in err.message
    assert not RunLane.objects.exists()


def test_an_input_set_id_of_another_workspace_is_answered_as_an_unknown_id(personas):
    """ "must belong to the selected pack version" said that the id exists somewhere: for an
    id of another workspace the answer is the one an unknown id gets."""
    ws = personas.workspace
    version = publish(ws, cases=1, sets=2)
    dep = hosted(ws, "http://127.0.0.1:9/a")
    theirs = InputSet.objects.get(version=publish(personas.other_workspace, slug="theirs", cases=1))
    foreign = _error(workspace=ws, version=version, deployments=[dep], input_set=str(theirs.public_id))
    unknown = _error(
        workspace=ws, version=version, deployments=[dep], input_set="00000000-0000-4000-8000-000000000000"
    )
    assert (foreign.code, foreign.message) == (unknown.code, unknown.message)
    assert "must belong" not in foreign.message
