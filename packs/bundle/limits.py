"""How long the texts of a pack may be: the lengths of the columns that store them.

The database models (``packs.models``) take their ``max_length`` from here, and the
validator refuses a longer value as a field error ("must be at most N characters") at the
value's line and column, so ``pack validate``, the editor's lint and publish agree, and
publish never reaches the database with a value PostgreSQL would refuse (SQLite would store
it whole). The pack slug's limit is part of its rule (``models.SLUG_MESSAGE``). A light
module: ``packs.models`` imports it, and the CLI must not import pydantic at start-up.
"""

from __future__ import annotations

PACK_SLUG = 200
PACK_NAME = 300
PACK_FAMILY = 200
CHALLENGE_KEY = 200
CHALLENGE_TITLE = 500
CHALLENGE_CATEGORY = 200
INPUT_SET_KEY = 200
INPUT_SET_NAME = 300
CASE_KEY = 200  # a case's case_key and item_key, and the challenge_key it names
ASSET_KEY = 200
ASSET_PATH = 1000
ASSET_KIND = 100
ASSET_MEDIA_TYPE = 200


def too_long(limit: int) -> str:
    return f"must be at most {limit} characters"
