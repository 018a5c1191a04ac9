-- Memory stores of seed 001: long-term memory (nodes + synapses), goals, library, file index,
-- timeline, notes, directives, character instructions, the human's profile, Nova's emotion state.
-- Exact scans, no ivfflat: seed 001 §3.3 — an ivfflat index with one probe returned random
-- anchors for months. Up to ~10k rows per pair an exact scan over the pair's rows is fast.

CREATE TABLE IF NOT EXISTS lzg_knoten (
    id           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    inhalt       text NOT NULL,
    dimension    text NOT NULL DEFAULT 'erlebnis',
    beobachter   text NOT NULL DEFAULT 'nova',
    emotion      text,
    arousal      double precision,
    gewicht      double precision NOT NULL DEFAULT 1.0,
    zuletzt      timestamptz NOT NULL DEFAULT now(),
    embedding    vector({{EMBED_DIM}}) NOT NULL,
    aktiv        boolean NOT NULL DEFAULT true,
    quelle       text,
    zeitpunkt    timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS lzg_knoten_pair_idx ON lzg_knoten (user_id, character_id) WHERE aktiv;
CREATE INDEX IF NOT EXISTS lzg_knoten_quelle_idx ON lzg_knoten (user_id, character_id, quelle);
CREATE INDEX IF NOT EXISTS lzg_knoten_fts_idx ON lzg_knoten USING gin (to_tsvector('simple', inhalt));

CREATE TABLE IF NOT EXISTS lzg_synapsen (
    von_id   bigint NOT NULL REFERENCES lzg_knoten(id) ON DELETE CASCADE,
    nach_id  bigint NOT NULL REFERENCES lzg_knoten(id) ON DELETE CASCADE,
    gewicht  double precision NOT NULL CHECK (gewicht > 0 AND gewicht <= 1),
    art      text NOT NULL DEFAULT 'assoziation',
    PRIMARY KEY (von_id, nach_id)
);
CREATE INDEX IF NOT EXISTS lzg_synapsen_nach_idx ON lzg_synapsen (nach_id);

CREATE TABLE IF NOT EXISTS ziele (
    id              bigserial PRIMARY KEY,
    -- the pair in canonical order: (character, human); see memory/ziele.py::ziel_paar_bestimmen
    character_id    text NOT NULL,
    user_id         text NOT NULL,
    inhalt          text NOT NULL,
    horizont        text NOT NULL CHECK (horizont IN ('kurz', 'mittel', 'lang')),
    motivation      double precision NOT NULL CHECK (motivation >= 0 AND motivation <= 1),
    embedding       vector({{EMBED_DIM}}),
    anker           timestamptz NOT NULL DEFAULT now(),
    verstaerkt_am   timestamptz NOT NULL DEFAULT now(),
    aktiv           boolean NOT NULL DEFAULT true
);
CREATE INDEX IF NOT EXISTS ziele_pair_idx ON ziele (character_id, user_id) WHERE aktiv;

CREATE TABLE IF NOT EXISTS autonomous_wissen (
    id           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    typ          text NOT NULL CHECK (typ IN ('wissen', 'bericht')),
    titel        text NOT NULL,
    inhalt       text NOT NULL,
    gewicht      double precision NOT NULL DEFAULT 1.0,
    aktiv        boolean NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS autonomous_wissen_thema (
    wissen_id bigint PRIMARY KEY REFERENCES autonomous_wissen(id) ON DELETE CASCADE,
    embedding vector({{EMBED_DIM}}) NOT NULL
);

CREATE TABLE IF NOT EXISTS aufzeichnungen (
    id           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    pfad         text NOT NULL,
    titel        text NOT NULL,
    stichworte   text NOT NULL DEFAULT '',
    inhalt       text NOT NULL,
    embedding    vector({{EMBED_DIM}}),
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, character_id, pfad)
);
CREATE INDEX IF NOT EXISTS aufzeichnungen_fts_idx ON aufzeichnungen USING gin (to_tsvector('german', stichworte));

CREATE TABLE IF NOT EXISTS timeline (
    id           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    typ          text NOT NULL DEFAULT 'termin' CHECK (typ IN ('termin', 'erinnerungs_anker')),
    titel        text NOT NULL,
    personen     text[] NOT NULL DEFAULT '{}',
    beginn       timestamptz NOT NULL,
    ende         timestamptz,
    turn_id      text,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS timeline_pair_beginn_idx ON timeline (user_id, character_id, beginn);

CREATE TABLE IF NOT EXISTS notizen (
    id              bigserial PRIMARY KEY,
    user_id         text NOT NULL,
    name            text NOT NULL,
    inhalt          text NOT NULL DEFAULT '',
    zusammenfassung text NOT NULL DEFAULT '',
    themen          text[] NOT NULL DEFAULT '{}',
    aktiv           boolean NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS notizen_fts_idx ON notizen
    USING gin (to_tsvector('german', name || ' ' || inhalt || ' ' || zusammenfassung));

CREATE TABLE IF NOT EXISTS direktiven (
    id           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    text         text NOT NULL,
    aktiv        boolean NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS charakter_anweisungen (
    id           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    text         text NOT NULL,
    aktiv        boolean NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE pair_profiles ADD COLUMN IF NOT EXISTS mensch_beziehung text NOT NULL DEFAULT '';
ALTER TABLE pair_profiles ADD COLUMN IF NOT EXISTS mensch_themen text NOT NULL DEFAULT '';

CREATE TABLE IF NOT EXISTS nova_emotion (
    user_id      text NOT NULL,
    character_id text NOT NULL,
    emotion      text NOT NULL DEFAULT 'neutral',
    arousal      double precision NOT NULL DEFAULT 0.3 CHECK (arousal >= 0 AND arousal <= 1),
    vektor       text,
    verlauf      jsonb NOT NULL DEFAULT '[]'::jsonb,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, character_id)
);
