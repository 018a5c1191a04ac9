-- Taking turns back (regenerate, edit, rewind). A write of a turn that changes a row which was
-- there before keeps the row as it was (`turn_vorher`: the table, the row's key, its columns
-- before; NULL when the turn made the row), so that taking the turn back puts it back, newest
-- first. A retracted turn_id stays known (`zurueckgenommene_turns`), so that its background work
-- still on its way writes nothing. A regenerated reply is kept as a swipe of the turn that
-- replaced it (`antwort_varianten`).
CREATE TABLE IF NOT EXISTS turn_vorher (
    nr           bigserial PRIMARY KEY,
    user_id      text NOT NULL,
    character_id text NOT NULL,
    turn_id      text NOT NULL,
    tabelle      text NOT NULL,
    schluessel   jsonb NOT NULL,
    vorher       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS turn_vorher_turn_idx ON turn_vorher (user_id, character_id, turn_id);

CREATE TABLE IF NOT EXISTS zurueckgenommene_turns (
    user_id      text NOT NULL,
    character_id text NOT NULL,
    turn_id      text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, character_id, turn_id)
);

CREATE TABLE IF NOT EXISTS antwort_varianten (
    nr               bigserial PRIMARY KEY,
    user_id          text NOT NULL,
    character_id     text NOT NULL,
    turn_id          text NOT NULL,
    verworfen_turn_id text NOT NULL,
    reply            text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, character_id, turn_id, verworfen_turn_id)
);
