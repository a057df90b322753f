-- AutomationGraphs (api.md §12.7): a secret-free document with immutable
-- revisions, the plan last applied (for drift) and the Automation it
-- manages. `name` is the latest revision's.
CREATE TABLE automation_graphs (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    name TEXT NOT NULL,
    service_principal_id TEXT NOT NULL,
    created_by_principal_id TEXT NOT NULL,
    latest_revision BIGINT NOT NULL,
    applied_revision BIGINT NOT NULL,
    applied_plan_sha256 TEXT NOT NULL,
    automation_id TEXT NOT NULL,
    layout_json TEXT NOT NULL,
    version BIGINT NOT NULL,
    deleted_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX automation_graphs_environment ON automation_graphs(environment_id, id);
CREATE TABLE graph_revisions (
    graph_id TEXT NOT NULL,
    revision BIGINT NOT NULL,
    document_json TEXT NOT NULL,
    document_sha256 TEXT NOT NULL,
    layout_json TEXT NOT NULL,
    created_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (graph_id, revision)
);
-- The apply journal.
CREATE TABLE graph_applications (
    id TEXT PRIMARY KEY,
    graph_id TEXT NOT NULL,
    revision BIGINT NOT NULL,
    plan_sha256 TEXT NOT NULL,
    automation_id TEXT NOT NULL,
    action TEXT NOT NULL,
    applied_by TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE INDEX graph_applications_graph ON graph_applications(graph_id, id);
