"""RunLane.judge_charged_tokens / judge_charged_usd: what a lane's judge calls counted against
its judge_limits share. Existing lanes start from their reported usage (what was counted for
them when they were graded)."""

from django.db import migrations, models
from django.db.models import F


def backfill(apps, schema_editor):
    RunLane = apps.get_model("runs", "RunLane")
    RunLane.objects.update(
        judge_charged_tokens=F("judge_input_tokens") + F("judge_output_tokens"),
        judge_charged_usd=F("judge_cost_usd"),
    )


class Migration(migrations.Migration):
    dependencies = [("runs", "0007_drop_unused_judge_samples")]

    operations = [
        migrations.AddField(
            model_name="runlane", name="judge_charged_tokens", field=models.BigIntegerField(default=0)
        ),
        migrations.AddField(
            model_name="runlane", name="judge_charged_usd", field=models.FloatField(default=0.0)
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
