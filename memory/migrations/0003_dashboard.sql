-- Window reads of the operators' dashboard: recent turns and recent node rows.
CREATE INDEX IF NOT EXISTS turns_created_idx ON turns (created_at);
CREATE INDEX IF NOT EXISTS pipeline_log_node_idx ON pipeline_log (created_at) WHERE art = 'node';
