-- The ConnectionVaults a Session was created with (a CMA session's
-- `vault_ids`): recorded for audit and display; calls use the Connections
-- its release pins.
ALTER TABLE sessions ADD COLUMN connection_vault_ids_json TEXT NOT NULL DEFAULT '[]';
