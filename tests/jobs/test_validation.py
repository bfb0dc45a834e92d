"""Every submission rule, each with its exact error; a refused submission changes nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from audit.models import AuditEvent
from jobs.actions import submit_job
from jobs.models import Job, State
from jobs.spec import SpecError, load_yaml, parse_spec
from quotas.models import MemberCap, Queue
from tenants.models import Team
from tests.conftest import World, api_as, spec

pytestmark = pytest.mark.django_db

IMAGE_MESSAGE = "is not a valid image reference (e.g. registry.example/team/train:1.0)"


def _refused(world: World, body: dict[str, Any]) -> dict[str, list[str]]:
    audit_before = AuditEvent.objects.for_user(world.admin).count()
    response = api_as(world.bob).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.json()
    assert Job.objects.for_user(world.admin).count() == 0
    assert AuditEvent.objects.for_user(world.admin).count() == audit_before
    return response.json()


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"name": None}, "name", "is required"),
        (
            {"name": "Train_Model"},
            "name",
            "must be a DNS label: lowercase letters, digits and '-', starting with a letter, "
            "at most 40 characters",
        ),
        (
            {"name": "a" * 41},
            "name",
            "must be a DNS label: lowercase letters, digits and '-', "
            "starting with a letter, at most 40 characters",
        ),
        ({"command": []}, "command", "must be a non-empty list of strings"),
        (
            {"command": "python train.py"},
            "command",
            'must be a list of strings, e.g. ["python", "train.py"]',
        ),
        (
            {"image": "not a/valid image"},
            "image",
            "is not a valid image reference (e.g. registry.example/team/train:1.0)",
        ),
        ({"env": {"1BAD": "x"}}, "env", "'1BAD' is not a valid variable name"),
        ({"gpus_per_node": 0}, "gpus_per_node", "must be between 1 and 64, got 0"),
        ({"gpus_per_node": "8"}, "gpus_per_node", "must be an integer"),
        ({"nodes": 65}, "nodes", "must be between 1 and 64, got 65"),
        ({"cpu": "lots"}, "cpu", "must be a number of cores between 0.1 and 512"),
        ({"memory": "12XB"}, "memory", "must be a Kubernetes quantity such as 64Gi"),
        ({"max_runtime": 10}, "max_runtime", "must be between 60 and 2592000, got 10"),
        (
            {"gpu_type": "tpu-v5"},
            "gpu_type",
            "unknown GPU type 'tpu-v5' (known: a100-80g, h100-80g)",
        ),
        ({"gpu_type": "a100-80g"}, "gpu_type", "team vision has no quota for a100-80g"),
        ({"gpus_per_node": 16}, "gpus_per_node", "16 requested, nodes of type h100-80g have 8"),
        (
            {"nodes": 5, "gpus_per_node": 8},
            "nodes",
            "nodes × gpus_per_node = 40 GPUs requested, team vision's limit of h100-80g is 32",
        ),
        ({"queue": "gold"}, "queue", "team vision has no queue 'gold'"),
        (
            {"max_runtime": 90000},
            "max_runtime",
            "90000 s requested, queue normal allows at most 86400 s",
        ),
        (
            {"colour": "blue"},
            "colour",
            "unknown field (known: name, team, queue, image, command, args, env, gpu_type, "
            "gpus_per_node, nodes, cpu, memory, max_runtime)",
        ),
    ],
)
def test_it_refuses_an_invalid_spec_with_the_exact_reason(
    world: World, overrides: dict[str, Any], field: str, message: str
) -> None:
    errors = _refused(world, spec(**overrides))
    assert errors[field] == [message]


def test_it_refuses_a_job_above_the_member_cap(world: World) -> None:
    MemberCap.objects.create(team=world.vision, user=world.bob, max_gpus=4)
    errors = _refused(world, spec(gpus_per_node=8))
    assert errors == {
        "nodes": ["nodes × gpus_per_node = 8 GPUs requested, your cap in team vision is 4"]
    }


def test_it_enforces_the_team_image_allow_list(world: World) -> None:
    world.vision.image_allowlist = "registry.example/vision/\nnvcr.io/nvidia/"
    world.vision.save()
    errors = _refused(world, spec(image="docker.io/library/ubuntu:22.04"))
    assert errors == {
        "image": [
            "docker.io/library/ubuntu:22.04 is not on team vision's allow-list "
            "(registry.example/vision/, nvcr.io/nvidia/)"
        ]
    }
    ok = api_as(world.bob).post(
        "/api/v1/jobs/", spec(image="nvcr.io/nvidia/pytorch:24.05-py3"), format="json"
    )
    assert ok.status_code == 201


def test_outsider_cannot_submit_to_another_team(world: World) -> None:
    response = api_as(world.carol).post("/api/v1/jobs/", spec(), format="json")
    assert response.status_code == 404
    assert Job.objects.for_user(world.admin).count() == 0


def test_error_never_echoes_a_secret_value(world: World) -> None:
    body = spec(env={"HF_TOKEN": "hf_supersecretvalue", "bad name": "x"})
    response = api_as(world.bob).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400
    assert "hf_supersecretvalue" not in response.content.decode()


def test_it_accepts_valid_image_references(world: World) -> None:
    client = api_as(world.bob)
    for image in (
        "python:3.11",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "localhost:5000/a/b@sha256:" + "a" * 64,
        "ubuntu",
    ):
        assert client.post("/api/v1/jobs/", spec(image=image), format="json").status_code == 201


def _submit(world: World, team: Team, user: User, **overrides: Any) -> Job:
    return submit_job(team, parse_spec(spec(team=team.slug, **overrides)), acting_user=user)


def test_the_action_refuses_a_non_member_and_lets_staff_through(world: World) -> None:
    # The API answers 404 before the action runs; the action refuses on its own all the same.
    with pytest.raises(SpecError) as refused:
        _submit(world, world.nlp, world.bob)
    assert refused.value.errors == {"team": "you are not a member of team nlp"}
    job = _submit(world, world.nlp, world.admin)
    assert (job.owner, job.queue, job.gpu_type) == (world.admin, world.nlp_normal, world.h100)


def test_a_team_deleted_meanwhile_is_refused_by_name(world: World) -> None:
    Team.objects.filter(pk=world.nlp.pk).delete()
    with pytest.raises(SpecError) as refused:
        _submit(world, world.nlp, world.admin)
    assert refused.value.errors == {"team": "team nlp does not exist"}


def test_a_spec_without_a_queue_goes_to_normal_or_the_only_queue(world: World) -> None:
    assert _submit(world, world.vision, world.bob).queue == world.vision_normal
    Queue.objects.for_team(world.nlp).exclude(name="low").delete()
    only = _submit(world, world.nlp, world.carol)
    assert (only.queue.name, only.queue.priority, only.max_runtime) == ("low", 50, 86400)


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        (["high", "low"], "is required (team vision has: high, low)"),
        ([], "is required (team vision has: none)"),
    ],
)
def test_a_spec_without_a_queue_needs_one_where_no_default_is_clear(
    world: World, keep: list[str], message: str
) -> None:
    Queue.objects.for_team(world.vision).exclude(name__in=keep).delete()
    with pytest.raises(SpecError) as refused:
        _submit(world, world.vision, world.bob)
    assert refused.value.errors == {"queue": message}
    assert Job.objects.for_team(world.vision).count() == 0


def test_a_submission_reads_its_limits_in_one_query_and_writes_in_two(
    world: World, django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(8) as queries:
        _submit(world, world.vision, world.bob)
    statements = [
        q["sql"].split()[0]
        for q in queries.captured_queries
        if q["sql"].split()[0] not in ("SAVEPOINT", "RELEASE")
    ]
    # One read (membership, cap, GPU type, quota and queues together: `jobs.limits`). Then, on
    # PostgreSQL, the job, its event and the chain's head locked in one statement, the audit
    # event and the head's new hash in another (`jobs.submission`); on SQLite the same writes
    # through the ORM. The savepoint around the writes is the test's own transaction's doing;
    # outside a test it is BEGIN and COMMIT.
    if connection.vendor == "postgresql":
        assert statements == ["SELECT", "WITH", "WITH"]
    else:
        assert statements == ["SELECT", "INSERT", "INSERT", "SELECT", "INSERT", "UPDATE"]


def test_a_submitted_job_is_stored_as_the_action_returned_it(world: World) -> None:
    job = _submit(world, world.vision, world.bob)
    stored = Job.unscoped.get(pk=job.pk)
    fields = [f.attname for f in Job._meta.concrete_fields]
    assert [getattr(job, f) for f in fields] == [getattr(stored, f) for f in fields]
    assert job.events.get().to_state == State.QUEUED  # its first event refers to it
    assert not job._state.adding  # saved, as far as the model knows: a later save updates
    job.name = "renamed"
    job.save(update_fields=["name"])
    assert Job.unscoped.get(pk=job.pk).name == "renamed"


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        (
            {"name": "train\n"},
            "name",
            "must be a DNS label: lowercase letters, digits and '-', starting with a letter, "
            "at most 40 characters",
        ),
        ({"memory": "64Gi\n"}, "memory", "must be a Kubernetes quantity such as 64Gi"),
        ({"env": {"EPOCHS\n": "3"}}, "env", "'EPOCHS\\n' is not a valid variable name"),
        ({"image": "ubuntu:22.04\n"}, "image", IMAGE_MESSAGE),
        ({"image": "MyOrg/train:1.0"}, "image", IMAGE_MESSAGE),
        ({"image": "registry.example/Vision/train:1.0"}, "image", IMAGE_MESSAGE),
        ({"image": "UBUNTU"}, "image", IMAGE_MESSAGE),
        ({"image": "ubuntu:vérsion"}, "image", IMAGE_MESSAGE),
        (
            {"env": {"BLOB": "x" * 2_400_000}},
            "env",
            "BLOB: value must be at most 32768 bytes, got 2400000",
        ),
    ],
)
def test_it_refuses_what_kubernetes_would_refuse(
    world: World, overrides: dict[str, Any], field: str, message: str
) -> None:
    errors = _refused(world, spec(**overrides))
    assert errors == {field: [message]}


def test_it_bounds_the_whole_spec_to_what_a_job_object_may_carry(world: World) -> None:
    env = {f"PART_{index}": "x" * 30_000 for index in range(40)}  # each within its own limit
    errors = _refused(world, spec(env=env))
    size = re.fullmatch(
        r"is (\d+) bytes, at most 1048576 \(a Kubernetes Job must fit in etcd's 1\.5 MiB\)",
        errors["spec"][0],
    )
    assert size is not None and int(size[1]) > 40 * 30_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\ngpus_per_node: " + "9" * 5000, "line 2: integers have at most 20 digits"),
        ("args: " + "[" * 10_000 + "]" * 10_000, "is nested deeper than 32 levels"),
    ],
)
def test_it_bounds_a_yaml_spec(text: str, message: str) -> None:
    with pytest.raises(SpecError) as refused:
        load_yaml(text)
    assert refused.value.errors == {"spec": message}


def test_yaml_aliases_are_checked_once_not_once_per_use() -> None:
    # Nine levels of ten aliases each: a billion strings if every use were walked.
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]" for n in range(1, 9)]
    with pytest.raises(SpecError) as refused:
        parse_spec(load_yaml("\n".join(lines)))
    assert set(refused.value.errors) >= {f"l{n}" for n in range(9)}


def test_the_form_refuses_a_yaml_spec_with_a_huge_integer(world: World) -> None:
    client = Client()
    client.force_login(world.bob)
    yaml_spec = "name: x\ngpus_per_node: " + "9" * 5000
    response = client.post("/jobs/new/", {"team": "vision", "spec_yaml": yaml_spec})
    assert response.status_code == 400
    assert "spec: line 2: integers have at most 20 digits" in response.content.decode()
    assert Job.objects.for_user(world.admin).count() == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('command: ["python", "a\\0b"]', "must not contain NUL characters"),
        ('command: ["python", "\\ud800"]', "must not contain unpaired surrogates"),
    ],
)
def test_a_yaml_spec_with_unstorable_escapes_is_refused_by_field(text: str, message: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_spec(load_yaml(text))
    assert refused.value.errors == {"command": message}
