"""The audit trail: one event per action, chained and keyed, tampering found and named."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.test import override_settings

from audit.chain import event_hash
from audit.models import GENESIS_HASH, AppendOnlyError, AuditEvent
from audit.record import AuditOutsideTransaction, append, audit_event, record, snapshot
from jobs.actions import cancel_job, clone_job, submit_job
from jobs.spec import parse_spec
from quotas.actions import save_queue, set_quota
from tenants.actions import add_member, create_token, remove_member, save_team, set_role
from tenants.models import Membership
from tests.conftest import World, spec

pytestmark = pytest.mark.django_db


def _count() -> int:
    return AuditEvent.chain.count()


def _verify() -> str:
    out = StringIO()
    call_command("audit_verify", stdout=out)
    return out.getvalue()


def _verify_broken() -> tuple[str, str]:
    """What audit_verify printed, and the summary it failed with."""
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("audit_verify", stdout=out)
    return out.getvalue(), str(caught.value)


def test_every_action_writes_exactly_one_event(world: World) -> None:
    actions = [
        ("team.create", lambda: save_team(acting_user=world.admin, slug="audio", name="Audio")),
        (
            "quota.set",
            lambda: set_quota(
                world.vision, world.h100, guaranteed=8, limit=16, acting_user=world.admin
            ),
        ),
        (
            "queue.create",
            lambda: save_queue(
                world.vision,
                acting_user=world.alice,
                name="night",
                priority=10,
                preemptible=True,
                max_runtime=3600,
            ),
        ),
        (
            "member.add",
            lambda: add_member(world.nlp, world.bob, role="member", acting_user=world.admin),
        ),
        (
            "member.role",
            lambda: set_role(
                Membership.objects.for_team(world.nlp).get(user=world.bob),
                "lead",
                acting_user=world.admin,
            ),
        ),
        (
            "member.remove",  # carol: bob is nlp's only lead now, and a team keeps one
            lambda: remove_member(
                Membership.objects.for_team(world.nlp).get(user=world.carol),
                acting_user=world.admin,
            ),
        ),
        ("token.create", lambda: create_token(world.bob, "laptop")),
        ("job.submit", lambda: submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)),
    ]
    for action, run in actions:
        before = _count()
        run()
        assert _count() == before + 1, action
        assert AuditEvent.chain.order_by("-seq").first().action == action  # type: ignore[union-attr]
    job = submit_job(world.vision, parse_spec(spec()), acting_user=world.bob)
    for action, run in (
        ("job.clone", lambda: clone_job(job, acting_user=world.bob)),
        ("job.cancel", lambda: cancel_job(job, acting_user=world.bob)),
    ):
        before = _count()
        run()
        assert _count() == before + 1 and AuditEvent.chain.order_by("-seq")[0].action == action
    assert "audit chain OK" in _verify()


def test_event_records_actor_team_target_and_change(world: World) -> None:
    quota = set_quota(world.vision, world.h100, guaranteed=8, limit=16, acting_user=world.admin)
    event = AuditEvent.objects.for_user(world.admin).first()
    assert event is not None
    assert (event.actor_name, event.team_slug, event.action) == ("admin", "vision", "quota.set")
    assert (event.target_type, event.target_id) == ("quotas.quota", str(quota.pk))
    assert event.before == {"gpu_type_id": world.h100.pk, "guaranteed": 16, "limit": 32}
    assert event.after == {"gpu_type_id": world.h100.pk, "guaranteed": 8, "limit": 16}


def test_a_failed_action_leaves_no_event(world: World) -> None:
    before = _count()
    with pytest.raises(Exception, match="above the limit"):
        set_quota(world.vision, world.h100, guaranteed=20, limit=10, acting_user=world.admin)
    assert _count() == before


def _three_events(world: World) -> list[AuditEvent]:
    for name in ("one", "two", "three"):
        submit_job(world.vision, parse_spec(spec(name=name)), acting_user=world.bob)
    return list(AuditEvent.chain.order_by("seq"))


def test_verify_names_an_edited_row(world: World) -> None:
    events = _three_events(world)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET actor_name = 'mallory' WHERE id = %s", [events[1].pk]
        )
    out, summary = _verify_broken()
    assert f"event seq={events[1].seq} (id={events[1].pk}, action=job.submit)" in out
    assert "contents were changed" in out
    assert summary.startswith(
        "audit chain BROKEN: 1 broken link in 3 events; the first: event seq="
    )


def test_verify_names_a_deleted_row(world: World) -> None:
    events = _three_events(world)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE id = %s", [events[1].pk])
    out, _ = _verify_broken()
    assert f"expected seq={events[1].seq}, a row is missing" in out


def test_verify_names_every_tampered_row_not_only_the_first(world: World) -> None:
    events = _three_events(world)
    with connection.cursor() as cursor:
        for event in (events[0], events[2]):
            cursor.execute(
                "UPDATE audit_auditevent SET actor_name = 'mallory' WHERE id = %s", [event.pk]
            )
    out, summary = _verify_broken()
    for event in (events[0], events[2]):
        assert f"event seq={event.seq} (id={event.pk}, action=job.submit)" in out
    assert f"seq={events[1].seq} " not in out
    assert "2 broken links" in summary


# Numbers as a lead or an admin may set them (fair_share_weight), and ones no float holds.
AWKWARD_NUMBERS = {"huge": 1e16, "largest": 1e308, "tenth": 0.1, "bigint": 2**63 - 1, "neg": -0.0}


def test_awkward_numbers_verify_after_the_database_round_trip(world: World) -> None:
    with transaction.atomic():
        record("team.update", actor=world.admin, team=world.vision, before=AWKWARD_NUMBERS)
    with transaction.atomic():  # and as a unit of work appends them (`jobs.states.Moves`)
        append(
            [
                audit_event(
                    "team.update", actor=world.admin, team=world.vision, after=AWKWARD_NUMBERS
                )
            ]
        )
    first, second = AuditEvent.chain.order_by("seq")
    assert first.before is not None and first.before == second.after
    # The same numbers as a float reads them, whatever form the database gives them back in.
    assert {k: float(v) for k, v in first.before.items()} == {
        k: float(v) for k, v in AWKWARD_NUMBERS.items()
    }
    assert first.before["bigint"] == 2**63 - 1
    assert "audit chain OK: 2 events" in _verify()


def _hash_with(after: object) -> str:
    event = AuditEvent(seq=1, at=datetime(2026, 12, 1, tzinfo=UTC), action="x", after=after)
    return event_hash(event, GENESIS_HASH)


@pytest.mark.parametrize(
    ("written", "read_back"),
    [(1e16, 10**16), (1.5e16, 15 * 10**15), (1e308, 10**308), (-1e17, -(10**17)), (-0.0, 0.0)],
)
def test_a_number_hashes_alike_in_the_form_jsonb_gives_back(written: float, read_back: int) -> None:
    # jsonb keeps a number as a decimal and prints it without an exponent or a sign on zero.
    assert _hash_with({"w": [written]}) == _hash_with({"w": [read_back]})


def test_different_numbers_still_hash_apart() -> None:
    numbers = [0.1, 0.2, 1e16, 1e16 + 2, 2**63 - 1, 2**63 - 2, 100.0, 1e-7, 1e308, 1.0]
    assert len({_hash_with({"w": n}) for n in numbers}) == len(numbers)


def test_snapshot_keeps_numbers_json_cannot_carry_as_text() -> None:
    assert snapshot([math.inf, -math.inf, math.nan]) == ["Infinity", "-Infinity", "NaN"]


def test_verify_finds_a_truncated_tail(world: World) -> None:
    events = _three_events(world)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE id = %s", [events[-1].pk])
    out, _ = _verify_broken()
    assert f"chain ends at seq={events[1].seq} but the head says seq={events[2].seq}" in out


def test_a_chain_rewritten_without_the_key_does_not_verify(world: World) -> None:
    _three_events(world)
    with override_settings(AUDIT_KEY="someone-elses-key"), pytest.raises(CommandError):
        _verify()


def test_the_application_cannot_update_or_delete_events(world: World) -> None:
    event = _three_events(world)[0]
    event.actor_name = "mallory"
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.chain.filter(pk=event.pk).update(actor_name="x")
    with pytest.raises(AppendOnlyError):
        AuditEvent.chain.all().delete()


@pytest.mark.django_db(transaction=True)
def test_it_refuses_to_record_outside_a_transaction() -> None:
    assert not connection.in_atomic_block
    with pytest.raises(AuditOutsideTransaction):
        record("team.create", actor=None, team=None)
    assert AuditEvent.chain.count() == 0
