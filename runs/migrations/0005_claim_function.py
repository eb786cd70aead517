"""PostgreSQL: the claim of runs.dispatch as one server-side function (one round trip).

``runs_claim_items`` locks the deployment row, then (a new statement, so a new snapshot in
READ COMMITTED: it sees every claim committed before the lock was granted) counts the
deployment's claimed items and claims up to the free slots, exactly as the two statements
runs.dispatch sent before inside a transaction (BEGIN, the lock, the claim, COMMIT: three
round trips per claim, now one). Other databases claim in Python (runs.dispatch).
"""

from django.db import migrations

CLAIM_FUNCTION = """
CREATE OR REPLACE FUNCTION runs_claim_items(
    p_lane bigint, p_owner text, p_finished bigint[], p_deployment bigint,
    p_run_limit integer, p_wanted integer, p_now timestamptz, p_deadline timestamptz
) RETURNS TABLE (
    item_id bigint, item_challenge_key text, item_case_key text, item_repetition integer,
    item_attempt_count integer
) LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM runs_deployment AS d WHERE d.id = p_deployment FOR UPDATE;
    RETURN QUERY
    WITH counts AS (
        SELECT count(*) AS claimed,
               count(*) FILTER (WHERE c.lane_id = p_lane) AS lane_claimed,
               count(*) FILTER (WHERE c.claim_owner = p_owner AND c.id = ANY(p_finished)) AS done
        FROM runs_runitem AS c WHERE c.deployment_id = p_deployment AND c.state = 'claimed'
    ), free AS (
        SELECT GREATEST(0, LEAST(
            (SELECT d.max_in_flight FROM runs_deployment AS d WHERE d.id = p_deployment)
                - counts.claimed + counts.done,
            COALESCE(p_run_limit - counts.lane_claimed + counts.done, 2147483647),
            COALESCE(p_wanted, 2147483647)
        )) AS n FROM counts
    ), candidates AS (
        SELECT p.id FROM runs_runitem AS p WHERE p.lane_id = p_lane AND p.state = 'pending'
        ORDER BY p.id LIMIT (SELECT free.n FROM free) FOR UPDATE SKIP LOCKED
    )
    UPDATE runs_runitem AS item SET state = 'claimed', claim_owner = p_owner, claimed_at = p_now,
        claim_deadline = p_deadline, claims = item.claims + 1
    FROM candidates WHERE item.id = candidates.id AND item.state = 'pending'
    RETURNING item.id::bigint, item.challenge_key::text, item.case_key::text,
        item.repetition::integer, item.attempt_count::integer;
END
$$;
"""

DROP_FUNCTION = (
    "DROP FUNCTION IF EXISTS runs_claim_items(bigint, text, bigint[], bigint, integer, integer,"
    " timestamptz, timestamptz)"
)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CLAIM_FUNCTION)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_FUNCTION)


class Migration(migrations.Migration):
    dependencies = [("runs", "0004_item_indexes")]

    operations = [migrations.RunPython(create, drop, elidable=False)]
