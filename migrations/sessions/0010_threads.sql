-- Multiagent threads (api.md §15): a Session's child threads live on its
-- row (at most 24, changed in the same commit as their events); each Run
-- names its thread ('' is the primary); a cross-post names the event it
-- copies into the primary view.
ALTER TABLE sessions ADD COLUMN threads_json TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runs ADD COLUMN thread_id TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN origin_event_id TEXT;
