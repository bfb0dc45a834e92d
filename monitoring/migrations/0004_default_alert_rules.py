"""The default alert rules (issue 22), the same as deploy/prometheus/rules.yaml's."""

from django.db import migrations

DBE = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
DEFAULT_RULES = [
    # name, metric, warning, critical, duration (s), below, description
    ("GPU temperature", "DCGM_FI_DEV_GPU_TEMP", 83, 90, 60, False, "°C; throttling starts near 87"),
    ("GPU memory temperature", "DCGM_FI_DEV_MEMORY_TEMP", 85, 95, 60, False, "HBM °C"),
    ("GPU throttled", "portal_gpu_throttled", 1, None, 300, False, "power cap or thermal, 5 min"),
    ("ECC double-bit error", DBE, None, 1, 0, False, "any uncorrected ECC error"),
    ("Row remap pending", "DCGM_FI_DEV_ROW_REMAP_PENDING", 1, None, 0, False, "reset the GPU"),
    ("Row remap failed", "DCGM_FI_DEV_ROW_REMAP_FAILURE", None, 1, 0, False, "replace the GPU"),
    ("NVLink link down", "PORTAL_NVLINK_LINKS_DOWN", None, 1, 0, False, "a link is inactive"),
    ("Node NotReady", "portal_node_not_ready", None, 1, 120, False, "NotReady for 2 minutes"),
    ("GPUs below capacity", "portal_node_gpus_missing", 1, None, 60, False, "GPUs not usable"),
    ("Agent silent", "portal_agent_silent_seconds", 60, 300, 0, False, "no samples for a minute"),
    (
        "Job pending too long",
        "portal_job_pending_seconds",
        3600,
        86400,
        0,
        False,
        "a team-scoped rule of this metric sets a team's own threshold",
    ),
]


def add_rules(apps, schema_editor):
    AlertRule = apps.get_model("monitoring", "AlertRule")
    for name, metric, warning, critical, duration, below, description in DEFAULT_RULES:
        AlertRule.objects.get_or_create(
            name=name,
            defaults={
                "metric": metric,
                "warning": warning,
                "critical": critical,
                "duration_s": duration,
                "below": below,
                "description": description,
            },
        )


def remove_rules(apps, schema_editor):
    AlertRule = apps.get_model("monitoring", "AlertRule")
    AlertRule.objects.filter(name__in=[rule[0] for rule in DEFAULT_RULES]).delete()


class Migration(migrations.Migration):
    dependencies = [("monitoring", "0003_alerts_incidents")]

    operations = [migrations.RunPython(add_rules, remove_rules)]
