"""RunLane.settings: the deployment's call settings as the run was created with them
(runs.lane_settings). Existing lanes get their deployment's settings as they are now, the
best there is, marked ``backfilled`` (a lane whose deployment changed kind since records
its kind only, marked ``unknown``)."""

from django.db import migrations, models


def backfill(apps, schema_editor):
    from runs.lane_settings import CallSettings

    RunLane = apps.get_model("runs", "RunLane")
    Deployment = apps.get_model("runs", "Deployment")
    lanes = RunLane.objects.filter(settings={}).values_list("deployment_id", flat=True).distinct()
    for deployment in Deployment.objects.filter(pk__in=lanes).iterator(chunk_size=500):
        recorded = CallSettings.of_deployment(deployment, backfilled=True).to_json()
        todo = RunLane.objects.filter(deployment_id=deployment.pk, settings={})
        todo.filter(deployment_kind=deployment.kind).update(settings=recorded)
        # The deployment changed kind since those runs: its URL and model now are another
        # kind's, nothing of what they ran with is known but their kind.
        for kind in todo.values_list("deployment_kind", flat=True).distinct():
            todo.filter(deployment_kind=kind).update(settings=CallSettings.kind_only(kind).to_json())


class Migration(migrations.Migration):
    dependencies = [("runs", "0009_run_scoring_lease")]

    operations = [
        migrations.AddField(
            model_name="runlane", name="settings", field=models.JSONField(blank=True, default=dict)
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
