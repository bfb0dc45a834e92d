"""State changes for GPU types, quotas, member caps and queues; each writes one audit event."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from audit.fields import fields_of
from audit.record import record
from quotas.models import GpuType, MemberCap, Queue, Quota
from quotas.rules import check_queue_priority, check_quota
from tenants.models import Membership, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import User

QUOTA_FIELDS = ("gpu_type_id", "guaranteed", "limit")
QUEUE_FIELDS = ("name", "priority", "preemptible", "max_runtime")
GPU_TYPE_FIELDS = ("name", "product_label", "memory_gb", "gpus_per_node", "price_per_gpu_hour")


def save_gpu_type(
    *,
    acting_user: User,
    name: str,
    product_label: str,
    memory_gb: int,
    gpus_per_node: int,
    price_per_gpu_hour: Decimal,
    instance: GpuType | None = None,
) -> GpuType:
    """Create or change a GPU type (platform admins)."""
    with transaction.atomic():
        before = fields_of(instance, *GPU_TYPE_FIELDS)
        gpu_type = instance or GpuType()
        gpu_type.name, gpu_type.product_label = name, product_label
        gpu_type.memory_gb, gpu_type.gpus_per_node = memory_gb, gpus_per_node
        gpu_type.price_per_gpu_hour = price_per_gpu_hour
        gpu_type.full_clean()
        gpu_type.save()
        action = "gpu_type.update" if instance else "gpu_type.create"
        record(
            action,
            actor=acting_user,
            team=None,
            target=gpu_type,
            before=before,
            after=fields_of(gpu_type, *GPU_TYPE_FIELDS),
        )
    return gpu_type


def set_quota(
    team: Team, gpu_type: GpuType, *, guaranteed: int, limit: int, acting_user: User
) -> Quota:
    """Create or change a team's quota of one GPU type."""
    with transaction.atomic():
        check_quota(team, gpu_type, guaranteed, limit)
        quota = Quota.objects.for_team(team).filter(gpu_type=gpu_type).first()
        before = fields_of(quota, *QUOTA_FIELDS)
        if quota is None:
            quota = Quota(team=team, gpu_type=gpu_type)
        quota.guaranteed, quota.limit = guaranteed, limit
        quota.save()
        record(
            "quota.set",
            actor=acting_user,
            team=team,
            target=quota,
            before=before,
            after=fields_of(quota, *QUOTA_FIELDS),
        )
    return quota


def delete_quota(quota: Quota, *, acting_user: User) -> None:
    with transaction.atomic():
        if Quota.unscoped.filter(team__parent=quota.team, gpu_type=quota.gpu_type).exists():
            message = _("sub-teams of %(team)s still hold %(gpu_type)s quota")
            figures = {"team": quota.team.slug, "gpu_type": quota.gpu_type}
            raise ValidationError({"gpu_type": message % figures})
        record(
            "quota.delete",
            actor=acting_user,
            team=quota.team,
            target=quota,
            before=fields_of(quota, *QUOTA_FIELDS),
        )
        quota.delete()


def save_queue(
    team: Team,
    *,
    acting_user: User,
    name: str,
    priority: int,
    preemptible: bool,
    max_runtime: int,
    instance: Queue | None = None,
) -> Queue:
    """Create or change one of a team's priority queues."""
    with transaction.atomic():
        check_queue_priority(priority)
        before = fields_of(instance, *QUEUE_FIELDS)
        queue = instance or Queue(team=team)
        queue.name, queue.priority = name, priority
        queue.preemptible, queue.max_runtime = preemptible, max_runtime
        queue.full_clean()
        queue.save()
        record(
            "queue.update" if instance else "queue.create",
            actor=acting_user,
            team=team,
            target=queue,
            before=before,
            after=fields_of(queue, *QUEUE_FIELDS),
        )
    return queue


def delete_queue(queue: Queue, *, acting_user: User) -> None:
    """Delete a queue no job refers to. Jobs keep their queue for their history (the foreign
    key protects it), so a queue that has had jobs is refused with their count."""
    try:
        with transaction.atomic():
            record(
                "queue.delete",
                actor=acting_user,
                team=queue.team,
                target=queue,
                before=fields_of(queue, *QUEUE_FIELDS),
            )
            queue.delete()
    except ProtectedError as protected:
        count = len(protected.protected_objects)
        message = ngettext(
            "%(queue)s has %(count)d job (waiting, running or in its history)",
            "%(queue)s has %(count)d jobs (waiting, running or in their history)",
            count,
        )
        raise ValidationError({"queue": message % {"queue": queue.name, "count": count}}) from None


def set_member_cap(
    membership: Membership, max_gpus: int | None, *, acting_user: User
) -> MemberCap | None:
    """Set (or with None, remove) the most GPUs a member may hold at once in the team."""
    team, user = membership.team, membership.user
    with transaction.atomic():
        cap = MemberCap.objects.for_team(team).filter(user=user).first()
        before = {"max_gpus": cap.max_gpus} if cap else None
        if max_gpus is None:
            if cap:
                cap.delete()
            cap = None
        else:
            cap = cap or MemberCap(team=team, user=user, max_gpus=max_gpus)
            cap.max_gpus = max_gpus
            cap.save()
        record(
            "member.cap",
            actor=acting_user,
            team=team,
            target=membership,
            before=before,
            after={"user": user.get_username(), "max_gpus": max_gpus},
        )
    return cap
