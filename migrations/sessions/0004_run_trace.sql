-- The trace context of the request that admitted a Run, so the Run's work
-- (runner, model calls) continues that request's trace.
ALTER TABLE runs ADD COLUMN traceparent TEXT NOT NULL DEFAULT '';
