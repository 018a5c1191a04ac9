-- Spine schema: keys, characters, pair profiles, durable turn records, pipeline_log.
-- {{EMBED_DIM}} is the embedder's dimension, read from the model at start.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE IF NOT EXISTS meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE IF NOT EXISTS api_keys (
    id          bigserial PRIMARY KEY,
    key_hash    text NOT NULL UNIQUE,
    user_id     text,
    is_operator boolean NOT NULL DEFAULT false,
    label       text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    CHECK (is_operator OR user_id IS NOT NULL)
);

CREATE TABLE IF NOT EXISTS characters (
    character_id        text PRIMARY KEY,
    name                text NOT NULL,
    charakter_anweisung text NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS pair_profiles (
    user_id          text NOT NULL,
    character_id     text NOT NULL,
    nova_kern        text NOT NULL DEFAULT '',
    nova_adaptiv     text NOT NULL DEFAULT '',
    nova_emotions    text NOT NULL DEFAULT '',
    nova_intentionen text NOT NULL DEFAULT '',
    nova_beziehung   text NOT NULL DEFAULT '',
    mensch_kern      text NOT NULL DEFAULT '',
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, character_id)
);

-- Durable record of finished turns, written by the outbox worker.
CREATE TABLE IF NOT EXISTS turns (
    user_id        text NOT NULL,
    character_id   text NOT NULL,
    turn_id        text NOT NULL,
    user_text      text NOT NULL,
    reply          text NOT NULL,
    user_embedding vector({{EMBED_DIM}}),
    result         jsonb NOT NULL,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (user_id, character_id, turn_id)
);

-- One row per node run (art = 'node') and per decision (art = 'switch').
CREATE TABLE IF NOT EXISTS pipeline_log (
    id           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    turn_id      text NOT NULL,
    seq          integer NOT NULL,
    node         text NOT NULL,
    art          text NOT NULL CHECK (art IN ('node', 'switch')),
    entscheidung text,
    outcome      text,
    inputs       jsonb NOT NULL DEFAULT '{}'::jsonb,
    threshold    double precision,
    duration_ms  double precision,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, character_id, turn_id, seq)
);
CREATE INDEX IF NOT EXISTS pipeline_log_pair_idx ON pipeline_log (user_id, character_id, created_at);
CREATE INDEX IF NOT EXISTS pipeline_log_decision_idx ON pipeline_log (entscheidung, created_at) WHERE art = 'switch';
