"""Seed the admin price table from grading.pricing.DEFAULT_PRICES (existing rows are kept)."""

from decimal import Decimal

from django.db import migrations

SEED = {
    "gpt-4o": ("2.50", "10.00"),
    "gpt-4o-mini": ("0.15", "0.60"),
    "gpt-4.1": ("2.00", "8.00"),
    "gpt-4.1-mini": ("0.40", "1.60"),
    "gpt-4.1-nano": ("0.10", "0.40"),
    "o3-mini": ("1.10", "4.40"),
    "o4-mini": ("1.10", "4.40"),
    "claude-haiku-4-5": ("1.00", "5.00"),
    "claude-sonnet-4-5": ("3.00", "15.00"),
    "claude-opus-4-1": ("15.00", "75.00"),
    "claude-3-5-haiku-latest": ("0.80", "4.00"),
}


def seed(apps, schema_editor):
    ModelPrice = apps.get_model("grading", "ModelPrice")
    for model, (inp, out) in SEED.items():
        ModelPrice.objects.get_or_create(
            model=model,
            defaults={"input_usd_per_million": Decimal(inp), "output_usd_per_million": Decimal(out)},
        )


class Migration(migrations.Migration):
    dependencies = [("grading", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
