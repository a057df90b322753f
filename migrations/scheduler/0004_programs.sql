-- Step programs (api.md §12.8): a steps firing keeps its program snapshot
-- and progress with the firing, written by compare-and-set on `version`;
-- `graph_json` names the graph revision that fired it.
ALTER TABLE automation_firings ADD COLUMN program_json TEXT NOT NULL DEFAULT 'null';
ALTER TABLE automation_firings ADD COLUMN graph_json TEXT NOT NULL DEFAULT 'null';
ALTER TABLE automation_firings ADD COLUMN version BIGINT NOT NULL DEFAULT 0;
CREATE INDEX automation_firings_running ON automation_firings(state, automation_id);
