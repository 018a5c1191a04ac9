-- An erased user's mark: written (and committed) before anything of the user is deleted, and read
-- by every write transaction for a user (`memory.erasure.pruefen`) under a shared advisory lock that
-- the mark's own transaction takes exclusively, so a write either commits before the mark (and the
-- erasure's deletes take it) or sees the mark and writes nothing. It ends at `bis`, or when a new
-- key is made for the user (`memory.pg.create_api_key`).
CREATE TABLE IF NOT EXISTS geloeschte_user (
    user_id text PRIMARY KEY,
    seit    timestamptz NOT NULL DEFAULT now(),
    bis     timestamptz NOT NULL
);
