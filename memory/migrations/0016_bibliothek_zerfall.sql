-- The library's weights decay (seed 001 §3.2a, `gewicht_decay`): the pixie's round multiplies each
-- active entry's `gewicht` by the LZG nodes' forgetting curve over the days since `zerfall_stand`,
-- the moment its weight was last decayed to (memory/lzg.py::bibliothek_zerfall). An entry written
-- before this column decays from its creation.
ALTER TABLE autonomous_wissen ADD COLUMN IF NOT EXISTS zerfall_stand timestamptz NOT NULL DEFAULT now();
UPDATE autonomous_wissen SET zerfall_stand = created_at;
