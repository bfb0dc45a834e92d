"""The team page shows where the team stands under fair share, as the scheduler counts it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from jobs.actions import submit_job
from jobs.models import Job
from jobs.spec import parse_spec
from tests.conftest import World, spec


@pytest.mark.django_db
def test_the_team_page_shows_weight_share_decayed_usage_and_place(world: World) -> None:
    cache.clear()
    used = submit_job(world.nlp, parse_spec(spec(team="nlp")), acting_user=world.carol)
    now = timezone.now()
    Job.unscoped.filter(pk=used.pk).update(
        state="SUCCEEDED", started_at=now - timedelta(hours=2), finished_at=now
    )
    lead = Client()
    lead.force_login(world.alice)
    page = lead.get("/teams/vision/").content.decode()
    section = page.split("Fair share</h2>", 1)[1].split("</section>", 1)[0]
    assert "<th>Weight</th><td>16.00</td>" in section  # its guaranteed GPUs, all types
    assert "<th>Fair share</th><td>25 %</td>" in section  # 16 of research 32 + 16 + 16
    assert "<th>Place among teams</th><td>1</td>" in section  # nlp used GPUs lately
    other = Client()
    other.force_login(world.carol)
    nlp_page = other.get("/teams/nlp/").content.decode()
    assert "<th>Place among teams</th><td>3</td>" in nlp_page
    assert "0.0 GPU-hours" in section and "2.0 GPU-hours" in nlp_page  # 2 h on 1 GPU, just now
