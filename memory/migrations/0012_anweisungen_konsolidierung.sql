-- Character instructions are consolidated (seed 004: at most three active, then the human is
-- asked): the character agent lifts, replaces and merges them in one step. An instruction lifted
-- by a step remembers that step (`aufgehoben_turn_id`, `aufgehoben_schritt`), so a turn that runs
-- again finds what its step lifted and lifts nothing else. A fourth instruction that met the limit
-- is kept aside, inactive (`vorgemerkt`), while the human is asked which one it should replace;
-- `vorgemerkt_offen` says it still waits for that answer (one per pair at a time).
ALTER TABLE charakter_anweisungen ADD COLUMN IF NOT EXISTS aufgehoben_turn_id text;
ALTER TABLE charakter_anweisungen ADD COLUMN IF NOT EXISTS aufgehoben_schritt text;
ALTER TABLE charakter_anweisungen ADD COLUMN IF NOT EXISTS vorgemerkt boolean NOT NULL DEFAULT false;
ALTER TABLE charakter_anweisungen ADD COLUMN IF NOT EXISTS vorgemerkt_offen boolean NOT NULL DEFAULT false;
