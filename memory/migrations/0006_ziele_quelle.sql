-- Goals are formed in the background chain from what the human says they want or plan
-- (pipeline/nodes/zielbildung.py). A background job may be delivered again with the same turn:
-- the goal carries the turn it came from (`quelle_turn`, at most one goal per turn and pair), and
-- a goal the human repeats remembers the turns that repeated it (`wiederholt_in`), so neither the
-- creation nor the reinforcement happens twice for one turn.
ALTER TABLE ziele ADD COLUMN IF NOT EXISTS quelle_turn text;
ALTER TABLE ziele ADD COLUMN IF NOT EXISTS wiederholt_in text[] NOT NULL DEFAULT '{}';
CREATE UNIQUE INDEX IF NOT EXISTS ziele_quelle_turn_idx ON ziele (character_id, user_id, quelle_turn)
    WHERE quelle_turn IS NOT NULL;
