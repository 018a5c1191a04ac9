-- Every write a turn makes while it runs carries its idempotency key: the turn and the step
-- (`{node or agent}:{n}`). A turn that runs again (its actor died, the ingress retried it) finds
-- its own earlier write and does not make a second one.
ALTER TABLE timeline ADD COLUMN IF NOT EXISTS schritt text;
CREATE UNIQUE INDEX IF NOT EXISTS timeline_schritt_idx ON timeline (user_id, character_id, turn_id, schritt)
    WHERE schritt IS NOT NULL;

ALTER TABLE notizen ADD COLUMN IF NOT EXISTS turn_id text;
ALTER TABLE notizen ADD COLUMN IF NOT EXISTS schritt text;
CREATE UNIQUE INDEX IF NOT EXISTS notizen_schritt_idx ON notizen (user_id, turn_id, schritt) WHERE schritt IS NOT NULL;

ALTER TABLE direktiven ADD COLUMN IF NOT EXISTS turn_id text;
ALTER TABLE direktiven ADD COLUMN IF NOT EXISTS schritt text;
CREATE UNIQUE INDEX IF NOT EXISTS direktiven_schritt_idx ON direktiven (user_id, character_id, turn_id, schritt)
    WHERE schritt IS NOT NULL;

ALTER TABLE charakter_anweisungen ADD COLUMN IF NOT EXISTS turn_id text;
ALTER TABLE charakter_anweisungen ADD COLUMN IF NOT EXISTS schritt text;
CREATE UNIQUE INDEX IF NOT EXISTS charakter_anweisungen_schritt_idx
    ON charakter_anweisungen (user_id, character_id, turn_id, schritt) WHERE schritt IS NOT NULL;
