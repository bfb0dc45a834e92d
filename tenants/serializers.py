"""API shapes of teams, members and the signed-in user."""

from typing import Any

from django.contrib.auth.models import User
from rest_framework import serializers

from tenants.models import Membership, Role, Team
from tenants.tokens import MAX_TOKEN_DAYS


class TeamSerializer(serializers.ModelSerializer[Team]):
    parent = serializers.SlugRelatedField(  # type: ignore[assignment]
        slug_field="slug", queryset=Team.objects.all(), required=False, allow_null=True
    )

    class Meta:
        model = Team
        fields = ["slug", "name", "parent", "fair_share_weight", "image_allowlist", "namespace"]
        read_only_fields = ["namespace"]


class MemberSerializer(serializers.ModelSerializer[Membership]):
    username = serializers.CharField(source="user.username", read_only=True)
    max_gpus = serializers.SerializerMethodField()

    class Meta:
        model = Membership
        fields = ["username", "role", "max_gpus", "created_at"]
        read_only_fields = fields

    def get_max_gpus(self, membership: Membership) -> int | None:
        caps: dict[int, int] = self.context.get("caps", {})
        return caps.get(membership.user_id)


class MemberWriteSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(max_length=150, required=False)
    role = serializers.ChoiceField(choices=Role.choices, required=False)
    max_gpus = serializers.IntegerField(
        min_value=0, max_value=10_000, required=False, allow_null=True
    )


class MeSerializer(serializers.ModelSerializer[User]):
    is_admin = serializers.BooleanField(source="is_staff")
    teams = serializers.SerializerMethodField()

    class Meta:
        model = User
        fields = ["username", "email", "is_admin", "teams"]

    def get_teams(self, user: User) -> list[dict[str, str]]:
        return [
            {"slug": m.team.slug, "name": m.team.name, "role": m.role}
            for m in Membership.unscoped.filter(user=user).select_related("team")
        ]


class TokenRequestSerializer(serializers.Serializer[Any]):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=128, style={"input_type": "password"})
    name = serializers.CharField(max_length=100, required=False, default="api")
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=MAX_TOKEN_DAYS, required=False, allow_null=True
    )
