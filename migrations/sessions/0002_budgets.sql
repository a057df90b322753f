-- A session-scoped Budget lives on its Session's row (see services/sessions/src/budget.rs).
ALTER TABLE sessions ADD COLUMN budget_json TEXT;
CREATE INDEX sessions_budget ON sessions(environment_id, budget_id);
