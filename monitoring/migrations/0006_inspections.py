"""Health inspections (issue 22): runs and their per node and check results, and the default
rule that alerts on a node failing one (its Prometheus twin is in deploy/prometheus/rules.yaml)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

RULE = "Inspection failed"


def add_rule(apps, schema_editor):
    AlertRule = apps.get_model("monitoring", "AlertRule")
    AlertRule.objects.get_or_create(
        name=RULE,
        defaults={
            "metric": "portal_node_inspection_failed",
            "critical": 1,
            "duration_s": 0,
            "description": "a check failed in the latest health inspection",
        },
    )


def remove_rule(apps, schema_editor):
    apps.get_model("monitoring", "AlertRule").objects.filter(name=RULE).delete()


class Migration(migrations.Migration):

    dependencies = [
        ('cluster', '0001_initial'),
        ('monitoring', '0005_idle_policy'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='InspectionRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('trigger', models.CharField(choices=[('schedule', 'schedule'), ('admin', 'admin')], max_length=10)),
                ('nodes_passed', models.PositiveIntegerField(default=0)),
                ('nodes_failed', models.PositiveIntegerField(default=0)),
                ('uncordoned', models.JSONField(blank=True, default=list, help_text='Nodes the fault loop cordoned that this run passed.')),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-started_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='InspectionResult',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('check_name', models.CharField(max_length=32)),
                ('status', models.CharField(choices=[('ok', 'ok'), ('warn', 'warning'), ('fail', 'failed')], max_length=4)),
                ('figure', models.FloatField(blank=True, null=True)),
                ('detail', models.CharField(blank=True, max_length=500)),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='cluster.node')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='monitoring.inspectionrun')),
            ],
            options={
                'ordering': ['run_id', 'node__name', 'check_name'],
                'indexes': [models.Index(fields=['run', 'status'], name='monitoring__run_id_8d1e77_idx')],
                'constraints': [models.UniqueConstraint(fields=('run', 'node', 'check_name'), name='one_result_per_check')],
            },
        ),
        migrations.RunPython(add_rule, remove_rule),
    ]
