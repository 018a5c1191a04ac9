-- The pixie writes the library from delegated tasks. A task may be done again (its round died
-- after the write, a background job delivered the delegation twice): each entry carries the
-- idempotency key of the delegation it came from (`schluessel`, one per type), so a second run
-- finds its earlier entry and writes nothing twice.
ALTER TABLE autonomous_wissen ADD COLUMN IF NOT EXISTS schluessel text;
CREATE UNIQUE INDEX IF NOT EXISTS autonomous_wissen_schluessel_idx
    ON autonomous_wissen (user_id, character_id, schluessel) WHERE schluessel IS NOT NULL;
