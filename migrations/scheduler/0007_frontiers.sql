-- History frontiers (api.md §18.7): per Automation and name, the last
-- Session a graph recorded as processed, moved by a compare-and-set from
-- the position its selection saw.
CREATE TABLE automation_frontiers (
    automation_id TEXT NOT NULL,
    name TEXT NOT NULL,
    position TEXT NOT NULL,
    firing_id TEXT NOT NULL,
    updated_ms BIGINT NOT NULL,
    PRIMARY KEY (automation_id, name)
);
