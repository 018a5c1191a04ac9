-- The pair's profiles grow a sentence at a time in the background chain (praegung: the human's
-- core; selbstbild: Nova's own profiles and the relationship in both directions). A background job
-- may be delivered again with the same turn: the profile row remembers the last steps that grew it
-- (`{node}:{turn_id}`, the newest few, bounded in memory/beziehung.py), and a step found there
-- appends nothing again.
ALTER TABLE pair_profiles ADD COLUMN IF NOT EXISTS profil_schritte text[] NOT NULL DEFAULT '{}';
