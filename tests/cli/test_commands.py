"""gpuctl's commands over real HTTP to a live portal, and the exit codes scripts rely on."""

from __future__ import annotations

import json
import stat
from datetime import timedelta

import pytest
import yaml
from django.utils import timezone

from cli.errors import ERROR, INVALID, NOT_FOUND, USAGE
from cli.main import gpuctl
from cluster.models import Node
from jobs.models import Job, State
from tenants.tokens import issue_token
from tests.cli.conftest import Live
from tests.cli.server import free_port
from tests.conftest import PASSWORD, spec

pytestmark = pytest.mark.django_db(transaction=True)


def _job_file(live: Live, **overrides: object) -> str:
    path = live.home.parent / "job.yaml"
    path.write_text(yaml.safe_dump(spec(**overrides)))
    return str(path)


def test_login_keeps_the_token_in_a_private_file_and_whoami_uses_it(live: Live) -> None:
    result = live.run("login", live.url, "-u", "bob", "--password-stdin", input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    path = live.config_file
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = yaml.safe_load(path.read_text())
    assert stored["url"] == live.url and stored["token"].startswith("gpt_")

    whoami = live.run("whoami", "-o", "json")
    assert whoami.exit_code == 0, whoami.output
    me = json.loads(whoami.output)
    assert me["username"] == "bob" and [t["slug"] for t in me["teams"]] == ["vision"]

    assert live.run("logout").exit_code == 0
    assert "token" not in yaml.safe_load(path.read_text())
    after = live.run("whoami")
    assert after.exit_code == NOT_FOUND and "gpuctl login" in after.output


def test_a_wrong_password_is_refused_and_nothing_is_stored(live: Live) -> None:
    result = live.run("login", live.url, "-u", "bob", "--password-stdin", input="nope\n")
    assert result.exit_code == NOT_FOUND
    assert "Wrong username or password" in result.output
    assert not live.config_file.exists()


def test_submit_then_ls_get_why_clone_and_cancel(live: Live) -> None:
    bob = live.world.bob
    submitted = live.run("submit", _job_file(live), "-o", "json", user=bob)
    assert submitted.exit_code == 0, submitted.output
    job_id = json.loads(submitted.output)["id"]
    assert Job.unscoped.get(pk=job_id).state == State.QUEUED

    listed = live.run("ls", "--mine", "--state", "queued", user=bob)
    assert listed.exit_code == 0 and "train-resnet" in listed.output
    assert listed.output.splitlines()[0].split()[:5] == ["ID", "NAME", "TEAM", "OWNER", "STATE"]

    got = live.run("get", str(job_id), "-o", "yaml", user=bob)
    assert got.exit_code == 0 and yaml.safe_load(got.output)["gpu_type"] == "h100-80g"

    Job.unscoped.filter(pk=job_id).update(
        pending_code="PRIORITY",
        pending_message="3 jobs ahead",
        pending_figures={"jobs_ahead": 3},
        estimated_start=timezone.now() + timedelta(hours=1),
    )
    why = live.run("why", str(job_id), "-o", "json", user=bob)
    assert why.exit_code == 0, why.output
    explained = json.loads(why.output)
    assert explained["reason"] == "PRIORITY" and explained["jobs_ahead"] == 3
    assert explained["estimated_start"] is not None
    assert "3 jobs ahead" in live.run("why", str(job_id), user=bob).output

    cloned = live.run("clone", str(job_id), "--name", "again", "-o", "json", user=bob)
    assert cloned.exit_code == 0
    copy = Job.unscoped.get(pk=json.loads(cloned.output)["id"])
    assert copy.name == "again" and copy.cloned_from_id == job_id

    cancelled = live.run("cancel", str(job_id), str(copy.pk), user=bob)
    assert cancelled.exit_code == 0, cancelled.output
    assert set(Job.unscoped.filter(pk__in=[job_id, copy.pk]).values_list("state", flat=True)) == {
        State.CANCELLED
    }
    again = live.run("cancel", str(job_id), user=bob)
    assert again.exit_code == INVALID and "already ended" in again.output


def test_an_invalid_spec_exits_4_with_the_apis_message_per_field(live: Live) -> None:
    result = live.run("submit", _job_file(live, gpus_per_node=16), user=live.world.bob)
    assert result.exit_code == INVALID
    assert "gpus_per_node: " in result.output and "16" in result.output
    assert not Job.unscoped.exists()


def test_a_spec_that_is_not_a_mapping_exits_4_before_sending(live: Live) -> None:
    path = live.home.parent / "job.yaml"
    path.write_text("- just\n- a list\n")
    result = live.run("submit", str(path), user=live.world.bob)
    assert result.exit_code == INVALID and "mapping" in result.output


def test_an_outsiders_job_is_not_found_exit_3(live: Live) -> None:
    bob_job = json.loads(
        live.run("submit", _job_file(live), "-o", "json", user=live.world.bob).output
    )["id"]
    for command in (["get", str(bob_job)], ["cancel", str(bob_job)], ["logs", str(bob_job)]):
        result = live.run(*command, user=live.world.carol)
        assert result.exit_code == NOT_FOUND, (command, result.output)
        assert "train-resnet" not in result.output
    assert Job.unscoped.get(pk=bob_job).state == State.QUEUED


def test_an_unknown_or_expired_token_exits_3_and_says_to_log_in_again(live: Live) -> None:
    unknown = live.run("ls", url=live.url)
    assert unknown.exit_code == NOT_FOUND and "gpuctl login" in unknown.output
    _token, raw = issue_token(
        live.world.bob, "old", expires_at=timezone.now() - timedelta(minutes=1)
    )
    expired = live.run("ls", token=raw)
    assert expired.exit_code == NOT_FOUND
    assert "expired" in expired.output and "gpuctl login" in expired.output


def test_usage_errors_exit_2(live: Live) -> None:
    assert live.run("ls", "--limit", "0", user=live.world.bob).exit_code == USAGE
    assert live.run("cordon", "h100-a-1", user=live.world.admin).exit_code == USAGE  # --reason
    assert live.run("frobnicate").exit_code == USAGE


def test_an_unreachable_portal_exits_1_naming_it(live: Live) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = live.run("ls", user=live.world.bob, url=url)
    assert result.exit_code == ERROR
    assert f"Cannot reach {url}" in result.output


def test_quota_shows_the_teams_gpus_against_its_quota(live: Live) -> None:
    result = live.run("quota", "-o", "json", user=live.world.bob)
    assert result.exit_code == 0, result.output
    [vision] = json.loads(result.output)
    assert vision["team"] == "vision"
    assert {"gpu_type": "h100-80g", "used": 0, "guaranteed": 16, "limit": 32} in vision["usage"]
    assert live.run("quota", "nlp", user=live.world.bob).exit_code == NOT_FOUND


def test_admins_list_cordon_and_uncordon_nodes_members_cannot(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    Node.objects.create(name="h100-a-1", gpu_type=live.world.h100, gpu_capacity=8, ready=True)
    told: list[tuple[str, bool]] = []

    class Cluster:
        def set_unschedulable(self, name: str, unschedulable: bool) -> None:
            told.append((name, unschedulable))

    monkeypatch.setattr("cluster.connect.backend", Cluster)
    admin = live.world.admin
    listed = live.run("nodes", user=admin)
    assert listed.exit_code == 0 and "h100-a-1" in listed.output
    cordoned = live.run("cordon", "h100-a-1", "--reason", "Xid 79", user=admin)
    assert cordoned.exit_code == 0, cordoned.output
    assert "cordoned: Xid 79" in cordoned.output
    assert live.run("uncordon", "h100-a-1", user=admin).exit_code == 0
    assert told == [("h100-a-1", True), ("h100-a-1", False)]
    assert not Node.objects.get(name="h100-a-1").cordoned

    assert live.run("nodes", user=live.world.bob).exit_code == NOT_FOUND
    assert live.run("cordon", "h100-a-1", "--reason", "x", user=live.world.bob).exit_code == 3
    assert told == [("h100-a-1", True), ("h100-a-1", False)]


def test_every_command_has_help_with_an_example(live: Live) -> None:
    for name in gpuctl.commands:
        result = live.run(name, "--help")
        assert result.exit_code == 0 and "Example" in result.output, name
