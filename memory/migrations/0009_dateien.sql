-- Uploaded files (issue #10, seed 001 §3.1a): a file a person hands a pair is read once, its
-- topic, summary and keywords are written at indexing (the model, or a named fallback), and its
-- text is stored in chunks in `aufzeichnungen`, each with its embedding. The enricher reads the
-- chunks in every turn; the file itself is never opened again. The same content (its SHA-256) is
-- indexed once per pair. Removing a file removes its chunks.
CREATE TABLE IF NOT EXISTS dateien (
    id              bigserial PRIMARY KEY,
    user_id         text NOT NULL,
    character_id    text NOT NULL,
    name            text NOT NULL,
    art             text NOT NULL CHECK (art IN ('text', 'markdown', 'pdf')),
    inhalt_hash     text NOT NULL,
    bytes           integer NOT NULL,
    zeichen         integer NOT NULL,
    thema           text NOT NULL,
    zusammenfassung text NOT NULL,
    stichworte      text[] NOT NULL DEFAULT '{}',
    erschliessung   jsonb NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, character_id, inhalt_hash)
);

ALTER TABLE aufzeichnungen ADD COLUMN IF NOT EXISTS datei_id bigint REFERENCES dateien(id) ON DELETE CASCADE;
ALTER TABLE aufzeichnungen ADD COLUMN IF NOT EXISTS abschnitt integer;
CREATE INDEX IF NOT EXISTS aufzeichnungen_paar_idx ON aufzeichnungen (user_id, character_id);
CREATE INDEX IF NOT EXISTS aufzeichnungen_datei_idx ON aufzeichnungen (datei_id);
