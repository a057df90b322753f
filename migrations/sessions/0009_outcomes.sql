-- Outcomes (api.md §14): the Session's newest Outcome on its row (moved in
-- the same commit as its events), and every Outcome by id for reading.
ALTER TABLE sessions ADD COLUMN outcome_json TEXT;
CREATE TABLE outcomes (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    status TEXT NOT NULL,
    grading BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    outcome_json TEXT NOT NULL
);
CREATE INDEX outcomes_session ON outcomes(session_id, id);
CREATE INDEX outcomes_grading ON outcomes(grading, session_id);
