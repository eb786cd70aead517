"""RunLane.settings: the deployment's call settings as the run was created with them
(runs.lane_settings). Existing lanes get their deployment's settings as they are now, the
best there is, marked ``backfilled`` (a lane whose deployment changed kind since records
its kind only, marked ``unknown``).

What the backfill records is frozen here (``_recorded``, ``_kind_only``: the JSON of
``CallSettings.of_deployment(...).to_json()`` / ``CallSettings.kind_only(...).to_json()``
as of this migration), not imported from ``runs.lane_settings``: a migration replayed on a
new database must give the same rows whatever that module becomes later."""

from django.db import migrations, models

# Config keys that carry credentials: never recorded (read live from the deployment).
AUTH_CONFIG_KEYS = ("extra_headers", "secret_header")


def _recorded(deployment):
    """A Deployment row (historical model) as a lane's recorded, backfilled settings."""
    if deployment.kind == "trace_import":  # nothing is called: only what grades uploads
        return {"kind": deployment.kind, "evidence_level": deployment.evidence_level, "backfilled": True}
    config = dict(deployment.config or {})
    headers = config.get("extra_headers") or {}
    return {
        "kind": deployment.kind,
        "evidence_level": deployment.evidence_level,
        "url": deployment.url,
        "model": deployment.model,
        "timeout_seconds": float(deployment.timeout_seconds),
        "max_attempts": int(deployment.max_attempts),
        "config": {k: v for k, v in config.items() if k not in AUTH_CONFIG_KEYS},
        "auth": {
            "secret": bool(deployment.secret_encrypted),
            "signing_key": bool(deployment.signing_key_encrypted),
            "secret_header": config.get("secret_header") or None,
            "extra_headers": sorted(headers) if isinstance(headers, dict) else [],
        },
        "backfilled": True,
    }


def _kind_only(kind):
    return {"kind": kind, "backfilled": True, "unknown": True}


def backfill(apps, schema_editor):
    RunLane = apps.get_model("runs", "RunLane")
    Deployment = apps.get_model("runs", "Deployment")
    lanes = RunLane.objects.filter(settings={}).values_list("deployment_id", flat=True).distinct()
    for deployment in Deployment.objects.filter(pk__in=lanes).iterator(chunk_size=500):
        todo = RunLane.objects.filter(deployment_id=deployment.pk, settings={})
        todo.filter(deployment_kind=deployment.kind).update(settings=_recorded(deployment))
        # The deployment changed kind since those runs: its URL and model now are another
        # kind's, nothing of what they ran with is known but their kind.
        for kind in todo.values_list("deployment_kind", flat=True).distinct():
            todo.filter(deployment_kind=kind).update(settings=_kind_only(kind))


class Migration(migrations.Migration):
    dependencies = [("runs", "0009_run_scoring_lease")]

    operations = [
        migrations.AddField(
            model_name="runlane", name="settings", field=models.JSONField(blank=True, default=dict)
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
