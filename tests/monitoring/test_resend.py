"""A batch counts once: an agent resends a post whose answer it did not get, under the same
identity (node, agent start, sequence number), and the portal stores it no further."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.outbox import Outbox
from agent.transport import TransportError
from monitoring.endpoint import read_post
from monitoring.intake import answer
from monitoring.models import GpuMinute, JobMetrics, XidEvent
from tests.monitoring.conftest import NODE, Rig, batch, gpu_sample, post
from tests.monitoring.test_ingest import MINUTE

ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"


def _samples(minute: int, energy: int) -> list[dict[str, Any]]:
    return [gpu_sample(i, minute, **{ENERGY: energy}) for i in range(8)]


def _counted(rig: Rig) -> tuple[int, float, float, int]:
    """(GPU 0's samples this minute, the job's GPU-seconds, its joules, its samples)."""
    minute = GpuMinute.objects.get(gpu__node=rig.node, gpu__index=0, minute=MINUTE)
    totals = JobMetrics.objects.for_team(rig.job.team).get(job=rig.job)
    return minute.samples, totals.gpu_seconds, totals.energy_joules, totals.samples


class LosesFirstAnswer:
    """A transport to the portal that delivers every post, but loses the answer to the first:
    the agent sees an error after the portal has stored the batch."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.bodies: list[dict[str, Any]] = []

    def post(self, body: dict[str, Any]) -> None:
        self.bodies.append(json.loads(json.dumps(body)))
        assert post(body, self.token).status_code == 202
        if len(self.bodies) == 1:
            raise TransportError("timed out waiting for the answer", retry=True)


def test_an_agents_resend_after_a_lost_answer_is_counted_once(rig: Rig) -> None:
    outbox = Outbox(NODE, 5, max_batches=100)
    transport = LosesFirstAnswer(rig.token)
    outbox.add_samples(_samples(MINUTE + 5, 1_000_000))
    outbox.add_samples(_samples(MINUTE + 10, 2_000_000))
    with pytest.raises(TransportError):
        outbox.send(transport)
    outbox.add_samples(_samples(MINUTE + 15, 3_000_000))  # sampled while it waited
    assert outbox.send(transport) == 16 + 8
    first, resent, newer = transport.bodies
    assert resent == first and (first["boot"], first["seq"]) == (outbox.boot, 1)
    assert (newer["boot"], newer["seq"]) == (outbox.boot, 2)
    assert outbox.pending() == 0
    # Three posts of samples at +5, +10, +15 s on the job's 4 GPUs: each counted once.
    assert _counted(rig) == (3, 3 * 4 * 5, pytest.approx(2 * 4 * 1000), 12)


def test_the_same_batch_posted_twice_is_stored_once_with_its_xids(rig: Rig) -> None:
    xid = {"index": 2, "xid": 79, "at": MINUTE + 5}
    body = batch(_samples(MINUTE + 5, 1_000_000), xids=[xid], boot="start-1", seq=7)
    assert post(body, rig.token).status_code == 202
    assert post(body, rig.token).status_code == 202  # answered, so the agent forgets it
    assert _counted(rig) == (1, 4 * 5, 0, 4)
    assert XidEvent.objects.filter(node=rig.node).count() == 1


def test_a_resend_in_the_same_group_as_its_original_counts_once(rig: Rig) -> None:
    body = json.dumps(batch(_samples(MINUTE + 5, 1_000_000), boot="start-1", seq=1)).encode()
    replies = answer([read_post(rig.token, "POST", body), read_post(rig.token, "POST", body)])
    assert [reply.status for reply, _ in replies] == [202, 202]
    assert [bool(outgoing) for _, outgoing in replies] == [True, False]  # fanned out once
    assert _counted(rig)[:2] == (1, 4 * 5)


def test_newer_batches_and_a_restarted_agents_batches_count(rig: Rig) -> None:
    for boot, seq, at in (("start-1", 1, 5), ("start-1", 2, 10), ("start-2", 1, 15)):
        body = batch(_samples(MINUTE + at, 1_000_000), boot=boot, seq=seq)
        assert post(body, rig.token).status_code == 202
    assert _counted(rig)[:2] == (3, 3 * 4 * 5)
    older = batch(_samples(MINUTE + 20, 1_000_000), boot="start-1", seq=1)
    assert post(older, rig.token).status_code == 202
    assert _counted(rig)[:2] == (3, 3 * 4 * 5)


def test_batches_without_an_identity_are_stored_as_before(rig: Rig) -> None:
    body = batch(_samples(MINUTE + 5, 1_000_000))
    post(body, rig.token)
    post(body, rig.token)
    assert _counted(rig)[:2] == (2, 2 * 4 * 5)


@pytest.mark.parametrize(
    ("identity", "field", "message"),
    [
        ({"boot": "start-1"}, "seq", "must be an integer between 1 and"),
        ({"seq": 3}, "boot", "must be a string of 1 to 64 characters"),
        ({"boot": "x" * 65, "seq": 3}, "boot", "must be a string of 1 to 64 characters"),
        ({"boot": "start-1", "seq": 0}, "seq", "must be an integer between 1 and"),
    ],
)
def test_a_bad_identity_is_refused_naming_the_field(
    rig: Rig, identity: dict[str, Any], field: str, message: str
) -> None:
    response = post(batch(_samples(MINUTE + 5, 1_000_000), **identity), rig.token)
    assert response.status_code == 400
    assert response.json()[field][0].startswith(message)
    assert not GpuMinute.objects.filter(gpu__node=rig.node).exists()
