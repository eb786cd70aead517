"""Run.scoring_owner / scoring_until: the scoring lease of runs.scoring.scoring_lock where no
advisory lock exists (SQLite): two workers could score the same run at once."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0008_lane_judge_charged")]

    operations = [
        migrations.AddField(
            model_name="run",
            name="scoring_owner",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="run", name="scoring_until", field=models.DateTimeField(blank=True, null=True)
        ),
    ]
