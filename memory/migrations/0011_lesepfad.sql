-- The keyword channel of the memory read path (memory/lesepfad.py): every LZG node carries the
-- lexemes of its surroundings (its own text and the nodes within two `nachbar` synapses, the
-- turns around it) and their count, ranked by BM25 against the question's lexemes. The postings
-- (pair, lexeme → node, term frequency, length) are kept in `lzg_stichworte`, so a question reads
-- only the postings of its own lexemes.
-- Words are stemmed twice, English and German, and the stop words of both languages are dropped
-- first, so a conversation in either language (or both) is searched without naming its language.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictname = 'nb_stopp_en') THEN
        CREATE TEXT SEARCH DICTIONARY nb_stopp_en (TEMPLATE = pg_catalog.simple, STOPWORDS = english, ACCEPT = false);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_ts_dict WHERE dictname = 'nb_stopp_de') THEN
        CREATE TEXT SEARCH DICTIONARY nb_stopp_de (TEMPLATE = pg_catalog.simple, STOPWORDS = german, ACCEPT = false);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = 'nb_stichwort_en') THEN
        CREATE TEXT SEARCH CONFIGURATION nb_stichwort_en (COPY = pg_catalog.english);
        ALTER TEXT SEARCH CONFIGURATION nb_stichwort_en
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
            WITH nb_stopp_de, pg_catalog.english_stem;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = 'nb_stichwort_de') THEN
        CREATE TEXT SEARCH CONFIGURATION nb_stichwort_de (COPY = pg_catalog.german);
        ALTER TEXT SEARCH CONFIGURATION nb_stichwort_de
            ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
            WITH nb_stopp_en, pg_catalog.german_stem;
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION nb_stichworte(t text) RETURNS tsvector LANGUAGE sql STABLE AS
$$ SELECT to_tsvector('nb_stichwort_en', t) || to_tsvector('nb_stichwort_de', t) $$;

ALTER TABLE lzg_knoten ADD COLUMN IF NOT EXISTS umfeld_laenge integer NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS lzg_stichworte (
    user_id      text NOT NULL,
    character_id text NOT NULL,
    lexem        text NOT NULL,
    knoten_id    bigint NOT NULL REFERENCES lzg_knoten(id) ON DELETE CASCADE,
    tf           integer NOT NULL,
    dl           integer NOT NULL,
    PRIMARY KEY (user_id, character_id, lexem, knoten_id) INCLUDE (tf, dl)
);
CREATE INDEX IF NOT EXISTS lzg_stichworte_knoten_idx ON lzg_stichworte (knoten_id);

-- The surroundings of the given nodes, anew: the active nodes within two `nachbar` synapses in id
-- order and the node's own text once more (the turn itself weighs more than the turns around it).
-- Idempotent: run twice, or by two writers linking the same nodes at once, the postings are the same. Called for the new nodes and, when `nachbar` synapses are added, for
-- every node whose surroundings they change.
CREATE OR REPLACE FUNCTION nb_umfeld_aktualisieren(ids bigint[]) RETURNS integer LANGUAGE plpgsql AS
$$
BEGIN
    DELETE FROM lzg_stichworte WHERE knoten_id = ANY(ids);
    WITH umfeld AS (
        SELECT z.id, nb_stichworte(string_agg(n.inhalt, ' ' ORDER BY n.id) || ' ' || min(z.inhalt)) AS tsv
        FROM (SELECT k.id, k.inhalt FROM lzg_knoten k WHERE k.id = ANY(ids)) AS z
        JOIN LATERAL (
            SELECT z.id AS nid
            UNION
            SELECT s1.nach_id FROM lzg_synapsen s1 WHERE s1.von_id = z.id AND s1.art = 'nachbar'
            UNION
            SELECT s2.nach_id FROM lzg_synapsen s1
            JOIN lzg_synapsen s2 ON s2.von_id = s1.nach_id AND s2.art = 'nachbar'
            WHERE s1.von_id = z.id AND s1.art = 'nachbar'
        ) w ON true
        JOIN lzg_knoten n ON n.id = w.nid AND (n.aktiv OR n.id = z.id)
        GROUP BY z.id
    ), laenge AS (
        SELECT id, tsv, (SELECT coalesce(sum(cardinality(p.positions)), 0) FROM unnest(tsv) p) AS dl FROM umfeld
    ), gesetzt AS (
        UPDATE lzg_knoten k SET umfeld_laenge = l.dl FROM laenge l WHERE k.id = l.id
        RETURNING k.id, k.user_id, k.character_id
    )
    INSERT INTO lzg_stichworte (user_id, character_id, lexem, knoten_id, tf, dl)
    SELECT g.user_id, g.character_id, t.lexeme, g.id, cardinality(t.positions), l.dl
    FROM gesetzt g JOIN laenge l ON l.id = g.id CROSS JOIN LATERAL unnest(l.tsv) t
    ON CONFLICT (user_id, character_id, lexem, knoten_id) DO UPDATE SET tf = EXCLUDED.tf, dl = EXCLUDED.dl;
    RETURN cardinality(ids);
END
$$;

SELECT nb_umfeld_aktualisieren(coalesce(array_agg(id), '{}')) FROM lzg_knoten;
