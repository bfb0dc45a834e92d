"""gpuctl and sweeps, the dry run and logout, over real HTTP to a live portal."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from cli.errors import INVALID, NOT_FOUND
from cluster.models import Node
from jobs.models import Job, State, Sweep
from tenants.models import ApiToken
from tests.cli.conftest import Live
from tests.conftest import PASSWORD, spec

pytestmark = pytest.mark.django_db(transaction=True)


def _file(live: Live, data: dict[str, Any]) -> str:
    path = live.home.parent / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _sweep_file(live: Live, **overrides: Any) -> str:
    grid = {"params": {"lr": [0.001, 0.01], "batch": [32, 64]}, "max_parallel": 2}
    body = spec(**{"command": ["python", "train.py", "--lr={lr}"], **overrides})
    return _file(live, {**body, "sweep": grid})


def test_submit_a_sweep_then_get_clone_and_cancel_it(live: Live) -> None:
    bob = live.world.bob
    submitted = live.run("submit", _sweep_file(live), "-o", "json", user=bob)
    assert submitted.exit_code == 0, submitted.output
    sweep_id = json.loads(submitted.output)["id"]
    assert Job.unscoped.filter(sweep_id=sweep_id, state=State.QUEUED).count() == 4
    assert "4 jobs queued" in live.run("submit", _sweep_file(live), user=bob).output

    got = live.run("sweep", "get", str(sweep_id), user=bob)
    assert got.exit_code == 0, got.output
    assert "QUEUED 4" in got.output and "batch=64 lr=0.01" in got.output  # YAML's keys, sorted

    cloned = live.run("sweep", "clone", str(sweep_id), "--name", "again", "-o", "json", user=bob)
    assert cloned.exit_code == 0, cloned.output
    assert Sweep.unscoped.get(pk=json.loads(cloned.output)["id"]).cloned_from_id == sweep_id

    cancelled = live.run("sweep", "cancel", str(sweep_id), user=bob)
    assert cancelled.exit_code == 0 and "4 jobs cancelled" in cancelled.output
    assert Job.unscoped.filter(sweep_id=sweep_id, state=State.CANCELLED).count() == 4


def test_a_bad_sweep_exits_4_naming_the_field(live: Live) -> None:
    result = live.run(
        "submit", _sweep_file(live, command=["python", "{epochs}"]), user=live.world.bob
    )
    assert result.exit_code == INVALID
    assert "command: unknown placeholder {epochs}" in result.output
    assert not Sweep.unscoped.exists()


def test_an_outsiders_sweep_is_not_found_exit_3(live: Live) -> None:
    submitted = live.run("submit", _sweep_file(live), "-o", "json", user=live.world.bob)
    sweep_id = json.loads(submitted.output)["id"]
    for command in ("get", "cancel", "clone"):
        result = live.run("sweep", command, str(sweep_id), user=live.world.carol)
        assert result.exit_code == NOT_FOUND, (command, result.output)


def test_submit_dry_run_tells_whether_it_fits_and_submits_nothing(live: Live) -> None:
    Node.objects.create(
        name="n1", gpu_type=live.world.h100, gpu_capacity=8, gpu_allocatable=8, ready=True
    )
    path = _file(live, spec(gpus_per_node=2))
    result = live.run("submit", path, "--dry-run", user=live.world.bob)
    assert result.exit_code == 0, result.output
    assert "nothing was submitted" in result.output and "n1: 2" in result.output
    answer = json.loads(
        live.run("submit", path, "--dry-run", "-o", "json", user=live.world.bob).output
    )
    assert answer["starts_now"] is True and answer["fits"]["quota"]["fits"] is True

    swept = live.run("submit", _sweep_file(live), "--dry-run", user=live.world.bob)
    assert swept.exit_code == 0 and "members starting now: 2" in swept.output
    bad = live.run("submit", _file(live, spec(gpus_per_node=16)), "--dry-run", user=live.world.bob)
    assert bad.exit_code == INVALID and "gpus_per_node: 16 requested" in bad.output
    assert not Job.unscoped.exists() and not Sweep.unscoped.exists()


def test_logout_revokes_the_token_on_the_portal(live: Live) -> None:
    login = live.run("login", live.url, "-u", "bob", "--password-stdin", input=PASSWORD + "\n")
    assert login.exit_code == 0, login.output
    token = yaml.safe_load(live.config_file.read_text())["token"]
    result = live.run("logout")
    assert result.exit_code == 0 and "did not revoke" not in result.output
    assert live.run("whoami", token=token).exit_code == NOT_FOUND
    assert not ApiToken.objects.filter(user=live.world.bob, revoked_at__isnull=True).exists()


def test_logout_forgets_the_token_where_the_portal_cannot_revoke_it(live: Live) -> None:
    login = live.run("login", live.url, "-u", "bob", "--password-stdin", input=PASSWORD + "\n")
    assert login.exit_code == 0, login.output
    stored = yaml.safe_load(live.config_file.read_text())
    live.config_file.write_text(yaml.safe_dump({**stored, "url": f"{live.url}/elsewhere"}))
    result = live.run("logout")
    assert result.exit_code == 0 and "did not revoke" in result.output
    assert "token" not in yaml.safe_load(live.config_file.read_text())
