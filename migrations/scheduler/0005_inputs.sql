-- continue_selected inputs (api.md §18.4): a firing's input into an
-- existing Session, recorded under its key `(firing, step, attempt)` with
-- the event id minted for it before it is asked for, then accepted with
-- the Run it admitted (`run_id` empty until then). The firing settles at
-- the Session's first idle after it that does not wait; a crash before
-- acceptance leaves a row recovery asks again with the same event id,
-- which the sessions service answers with the first input.
CREATE TABLE automation_inputs (
    input_key TEXT PRIMARY KEY,
    firing_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_seq BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    request_json TEXT NOT NULL
);
CREATE INDEX automation_inputs_firing ON automation_inputs(firing_id);
CREATE INDEX automation_inputs_session ON automation_inputs(session_id);
