"""Sweeps: expansion, placeholders, validation once, one transaction and one audit event."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEvent
from jobs.models import Job, JobEvent, State, Sweep
from jobs.sweeps import cancel_sweep, parse_sweep, submit_sweep
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db


GRID = {"params": {"lr": [0.001, 0.0003], "batch": [32, 64]}}


def sweep_spec(sweep: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    return {**spec(**overrides), "sweep": sweep if sweep is not None else GRID}


def _post(world: World, body: dict[str, Any], user: Any = None) -> Any:
    return api_as(user or world.bob).post("/api/v1/sweeps/", body, format="json")


def _nothing_written() -> bool:
    return (
        not Sweep.unscoped.exists() and not Job.unscoped.exists() and not AuditEvent.chain.exists()
    )


def _submit(world: World, body: dict[str, Any]) -> Sweep:
    spec_, plan = parse_sweep(body)
    return submit_sweep(world.vision, spec_, plan, acting_user=world.bob)


def test_a_grid_becomes_one_sweep_with_a_member_per_combination(world: World) -> None:
    body = sweep_spec(command=["python", "train.py", "--lr={lr}", "--batch={batch}"])
    body["args"] = ["--tag=run-{index:03d}", "{{literal}}"]
    response = _post(world, body)
    assert response.status_code == 201, response.json()
    assert response.json()["size"] == 4 and response.json()["states"] == {"QUEUED": 4}
    sweep = Sweep.unscoped.get(pk=response.json()["id"])
    jobs = list(Job.unscoped.filter(sweep=sweep).order_by("sweep_index"))
    assert [j.name for j in jobs] == [f"train-resnet-{i}" for i in range(4)]
    # The last parameter varies fastest.
    assert [json.loads(j.env["SWEEP_PARAMS"]) for j in jobs] == [
        {"lr": 0.001, "batch": 32},
        {"lr": 0.001, "batch": 64},
        {"lr": 0.0003, "batch": 32},
        {"lr": 0.0003, "batch": 64},
    ]
    assert [j.env["SWEEP_INDEX"] for j in jobs] == ["0", "1", "2", "3"]
    assert jobs[3].command == ["python", "train.py", "--lr=0.0003", "--batch=64"]
    assert jobs[2].args == ["--tag=run-002", "{literal}"]
    assert all(j.state == State.QUEUED and j.owner == world.bob for j in jobs)


def test_an_array_numbers_its_members_and_fills_index(world: World) -> None:
    sweep = _submit(world, sweep_spec({"array": 3}, command=["python", "shard.py", "{index}"]))
    jobs = Job.unscoped.filter(sweep=sweep).order_by("sweep_index")
    assert [(j.sweep_index, j.command[-1], j.env["SWEEP_PARAMS"]) for j in jobs] == [
        (0, "0", "{}"),
        (1, "1", "{}"),
        (2, "2", "{}"),
    ]


def test_a_sweep_is_written_in_bulk_and_audited_once_with_its_count(
    world: World, django_assert_max_num_queries: Any
) -> None:
    spec_, plan = parse_sweep(sweep_spec({"array": 1000}))
    # Nothing per member: batches of rows (SQLite binds at most 999 values a statement, so its
    # batches are of ~27 jobs; PostgreSQL's of 500).
    with django_assert_max_num_queries(100):
        sweep = submit_sweep(world.vision, spec_, plan, acting_user=world.bob)
    assert Job.unscoped.filter(sweep=sweep).count() == 1000
    assert JobEvent.unscoped.filter(job__sweep=sweep, to_state=State.QUEUED).count() == 1000
    [event] = AuditEvent.chain.all()
    assert (event.action, event.target_id, (event.after or {})["count"]) == (
        "sweep.submit",
        str(sweep.pk),
        1000,
    )


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"command": ["python", "{lr}", "{epochs}"]}, "command", "{epochs}"),
        ({"args": ["{index!r}"]}, "args", "conversion"),
        ({"command": ["python", "{lr"]}, "command", "braces"),
        ({"command": ["python", "{batch:.2q}"]}, "command", "{batch:.2q}"),
        ({"env": {"SWEEP_INDEX": "7"}}, "env", "SWEEP_INDEX"),
        ({"name": "a" * 39}, "name", "38"),
        ({"gpus_per_node": 16}, "gpus_per_node", "have 8"),
        ({"queue": "nope"}, "queue", "no queue"),
    ],
)
def test_a_bad_sweep_is_refused_naming_the_field_and_nothing_is_written(
    world: World, overrides: dict[str, Any], field: str, words: str
) -> None:
    response = _post(world, sweep_spec(**overrides))
    assert response.status_code == 400
    assert words in response.json()[field][0], response.json()
    assert _nothing_written()


@pytest.mark.parametrize(
    ("sweep", "field", "words"),
    [
        ({"array": 2, "params": {"lr": [1]}}, "sweep", "not both"),
        ({}, "sweep", "either"),
        ({"array": 0}, "sweep.array", "between 1 and 1000"),
        ({"array": 2, "max_parallel": 0}, "sweep.max_parallel", "between 1"),
        ({"array": 2, "every": 3}, "sweep.every", "unknown field"),
        ({"params": {"lr": []}}, "sweep.params.lr", "non-empty"),
        ({"params": {"index": [1, 2]}}, "sweep.params.index", "not 'index'"),
        ({"params": {"lr": [{"a": 1}]}}, "sweep.params.lr", "strings, numbers"),
        ({"params": {"a": list(range(40)), "b": list(range(30))}}, "sweep.params", "1200"),
    ],
)
def test_a_bad_sweep_field_is_named_with_its_limit(
    world: World, sweep: dict[str, Any], field: str, words: str
) -> None:
    response = _post(world, sweep_spec(sweep))
    assert response.status_code == 400
    assert words in response.json()[field][0], response.json()
    assert _nothing_written()


def test_the_member_limit_is_a_setting(world: World, settings: Any) -> None:
    settings.SWEEP_MAX_MEMBERS = 3
    response = _post(world, sweep_spec())
    assert response.status_code == 400
    assert "at most 3 members" in response.json()["sweep.params"][0]
    assert _post(world, sweep_spec({"array": 3})).status_code == 201


def test_a_sweep_for_a_team_one_is_not_in_is_not_found(world: World) -> None:
    assert _post(world, sweep_spec(team="vision"), user=world.carol).status_code == 404
    assert _nothing_written()


def test_cancel_the_rest_cancels_what_has_not_ended_in_one_audit_event(world: World) -> None:
    sweep = _submit(world, sweep_spec({"array": 4}))
    first, second, *_ = Job.unscoped.filter(sweep=sweep).order_by("sweep_index")
    Job.unscoped.filter(pk=first.pk).update(state=State.SUCCEEDED)
    Job.unscoped.filter(pk=second.pk).update(state=State.RUNNING, placement={"n1": 1})
    response = api_as(world.bob).post(f"/api/v1/sweeps/{sweep.pk}/cancel/")
    assert response.status_code == 200 and response.json()["cancelled"] == 3
    states = dict(Job.unscoped.filter(sweep=sweep).values_list("sweep_index", "state"))
    assert states == {0: "SUCCEEDED", 1: "CANCELLED", 2: "CANCELLED", 3: "CANCELLED"}
    cancels = list(AuditEvent.chain.filter(action__contains="cancel"))
    assert [(e.action, (e.after or {})["cancelled"]) for e in cancels] == [("sweep.cancel", 3)]
    assert cancel_sweep(sweep, acting_user=world.bob) == 0


def test_clone_submits_the_sweep_again(world: World) -> None:
    sweep = _submit(world, sweep_spec(GRID | {"max_parallel": 2}, env={"SEED": "1"}))
    response = api_as(world.bob).post(f"/api/v1/sweeps/{sweep.pk}/clone/", {"name": "again"})
    assert response.status_code == 201, response.json()
    copy = Sweep.unscoped.get(pk=response.json()["id"])
    assert (copy.size, copy.max_parallel, copy.cloned_from_id, copy.name) == (
        4,
        2,
        sweep.pk,
        "again",
    )
    jobs = Job.unscoped.filter(sweep=copy).order_by("sweep_index")
    assert [j.name for j in jobs] == [f"again-{i}" for i in range(4)]
    assert jobs[3].env == {
        "SEED": "1",
        "SWEEP_INDEX": "3",
        "SWEEP_PARAMS": '{"lr": 0.0003, "batch": 64}',
    }
    assert AuditEvent.chain.filter(action="sweep.clone").count() == 1


def test_the_api_shows_members_states_to_teammates_only(world: World) -> None:
    sweep = _submit(world, sweep_spec(env={"API_TOKEN": "hunter2-hunter2"}))
    Job.unscoped.filter(sweep=sweep, sweep_index=0).update(state=State.RUNNING)
    detail = api_as(world.alice).get(f"/api/v1/sweeps/{sweep.pk}/").json()
    assert detail["states"] == {"QUEUED": 3, "RUNNING": 1}
    assert [(m["index"], m["params"], m["state"]) for m in detail["members"]][:2] == [
        (0, {"lr": 0.001, "batch": 32}, "RUNNING"),
        (1, {"lr": 0.001, "batch": 64}, "QUEUED"),
    ]
    assert detail["spec"]["env"]["API_TOKEN"] == "********"
    listed = api_as(world.alice).get("/api/v1/sweeps/").json()
    assert [(s["id"], s["states"]) for s in listed["results"]] == [(sweep.pk, detail["states"])]

    assert api_as(world.carol).get("/api/v1/sweeps/").json()["results"] == []
    for tail in ("", "cancel/", "clone/"):
        url = f"/api/v1/sweeps/{sweep.pk}/{tail}"
        call = api_as(world.carol).get if not tail else api_as(world.carol).post
        assert call(url).status_code == 404, url


def test_a_teammate_may_read_but_not_cancel_someone_elses_sweep(world: World) -> None:
    spec_, plan = parse_sweep(sweep_spec({"array": 2}))
    sweep = submit_sweep(world.vision, spec_, plan, acting_user=world.alice)
    assert api_as(world.bob).get(f"/api/v1/sweeps/{sweep.pk}/").status_code == 200
    assert api_as(world.bob).post(f"/api/v1/sweeps/{sweep.pk}/cancel/").status_code == 403
    assert not Job.unscoped.filter(sweep=sweep, state=State.CANCELLED).exists()


def test_the_sweep_page_shows_states_and_cancels_the_rest(
    world: World, django_assert_max_num_queries: Any
) -> None:
    sweep = _submit(world, sweep_spec({"array": 30}))
    owner, outsider = Client(), Client()
    owner.force_login(world.bob)
    outsider.force_login(world.carol)
    with django_assert_max_num_queries(12):
        page = owner.get(f"/sweeps/{sweep.pk}/")
    assert page.status_code == 200
    assert b"train-resnet-29" in page.content and b"Queued</span> 30" in page.content
    assert outsider.get(f"/sweeps/{sweep.pk}/").status_code == 404
    assert outsider.post(f"/sweeps/{sweep.pk}/cancel/").status_code == 404
    assert owner.post(f"/sweeps/{sweep.pk}/cancel/").status_code == 302
    assert Job.unscoped.filter(sweep=sweep, state=State.CANCELLED).count() == 30
    cloned = owner.post(f"/sweeps/{sweep.pk}/clone/")
    assert cloned.status_code == 302 and Sweep.unscoped.count() == 2
