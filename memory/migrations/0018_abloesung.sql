-- Knowledge that changes: a long-term memory can be superseded (memory/lzg.py `abloesen`). The old
-- node stays, ended at `gueltig_bis` (the time the later memory took its place); a synapse of kind
-- `abgeloest_durch` leads from it to its successor, whose id the node keeps as well (no foreign key:
-- the memory view says when the successor was forgotten). A node without `gueltig_bis` is current.
-- The mark stays when its successor is forgotten: the old fact is not revived by forgetting the new one.
ALTER TABLE lzg_knoten ADD COLUMN IF NOT EXISTS gueltig_bis timestamptz;
ALTER TABLE lzg_knoten ADD COLUMN IF NOT EXISTS abgeloest_durch bigint;
