-- API keys may expire: an operator's and a user's alike (NULL: the key does not expire).
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS expires_at timestamptz;
