-- A lorebook entry's activation as the Character Card specs and SillyTavern describe it: secondary
-- keys with their logic (`selektiv`, `logik`), whole-word matching, the order in which entries are
-- taken and placed (`reihenfolge`, a card's insertion_order) and the entry's own scan depth.
ALTER TABLE charakter_wissen ADD COLUMN IF NOT EXISTS sekundaer     text[]  NOT NULL DEFAULT '{}';
ALTER TABLE charakter_wissen ADD COLUMN IF NOT EXISTS selektiv      boolean NOT NULL DEFAULT false;
ALTER TABLE charakter_wissen ADD COLUMN IF NOT EXISTS logik         text    NOT NULL DEFAULT 'and_any'
    CHECK (logik IN ('and_any', 'not_all', 'not_any', 'and_all'));
ALTER TABLE charakter_wissen ADD COLUMN IF NOT EXISTS ganze_woerter boolean NOT NULL DEFAULT false;
ALTER TABLE charakter_wissen ADD COLUMN IF NOT EXISTS reihenfolge   integer NOT NULL DEFAULT 100;
ALTER TABLE charakter_wissen ADD COLUMN IF NOT EXISTS scan_tiefe    integer CHECK (scan_tiefe BETWEEN 0 AND 1000);
