-- Nova's emotional base mood (nova_emotions) and her way of speaking (nova_intentionen) grow from
-- how her own replies were perceived (selbstbild): the profile row keeps, per field, the values
-- perceived in her last few turns (bounded in the node), and a value that recurs among them
-- becomes a sentence. The tally changes with the profile under the row's lock, in the step that
-- grows it, so a redelivered background job counts nothing twice.
ALTER TABLE pair_profiles ADD COLUMN IF NOT EXISTS profil_zaehlung jsonb NOT NULL DEFAULT '{}'::jsonb;
