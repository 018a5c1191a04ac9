-- Characters as resources: what the responder, the Verfasser and the tribunal need of a character,
-- the Character Card fields that have no place of their own (kept, never dropped), and the
-- character's background knowledge (a card's lorebook), which every pair of that character reads.
ALTER TABLE characters ADD COLUMN IF NOT EXISTS identitaet     text NOT NULL DEFAULT '';
ALTER TABLE characters ADD COLUMN IF NOT EXISTS sprechweise    text NOT NULL DEFAULT '';
ALTER TABLE characters ADD COLUMN IF NOT EXISTS szenario       text NOT NULL DEFAULT '';
ALTER TABLE characters ADD COLUMN IF NOT EXISTS begruessung    text NOT NULL DEFAULT '';
ALTER TABLE characters ADD COLUMN IF NOT EXISTS beispieldialog text NOT NULL DEFAULT '';
ALTER TABLE characters ADD COLUMN IF NOT EXISTS karte_rest     jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE characters ADD COLUMN IF NOT EXISTS updated_at     timestamptz NOT NULL DEFAULT now();

CREATE TABLE IF NOT EXISTS charakter_wissen (
    id           bigserial PRIMARY KEY,
    character_id text NOT NULL REFERENCES characters(character_id) ON DELETE CASCADE,
    titel        text NOT NULL,
    inhalt       text NOT NULL,
    schluessel   text[] NOT NULL DEFAULT '{}',
    gross_klein  boolean NOT NULL DEFAULT false,
    immer        boolean NOT NULL DEFAULT false,
    aktiv        boolean NOT NULL DEFAULT true,
    embedding    vector({{EMBED_DIM}}) NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS charakter_wissen_character_idx ON charakter_wissen (character_id) WHERE aktiv;

-- Nova, the default character: a fresh install talks to her.
INSERT INTO characters (character_id, name, identitaet, sprechweise)
VALUES ('nova', 'Nova',
        'Nova ist eine warme, neugierige Gespraechspartnerin, die zuhoert, nachfragt und sich erinnert.',
        'Natuerlich und zugewandt, in ganzen Saetzen, ohne Floskeln.')
ON CONFLICT (character_id) DO UPDATE SET
    identitaet  = CASE WHEN characters.identitaet = '' THEN EXCLUDED.identitaet ELSE characters.identitaet END,
    sprechweise = CASE WHEN characters.sprechweise = '' THEN EXCLUDED.sprechweise ELSE characters.sprechweise END;

-- Pairs that talked to a character nobody created (before characters were resources, any id got
-- one, named after the id) keep their conversation: their character is created here, as it was.
INSERT INTO characters (character_id, name)
SELECT DISTINCT x.character_id, initcap(replace(x.character_id, '_', ' '))
FROM (SELECT character_id FROM pair_profiles UNION SELECT character_id FROM turns) x
ON CONFLICT (character_id) DO NOTHING;
