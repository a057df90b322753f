-- The message a denial carries back to the agent (a user.tool_confirmation's
-- deny_message), kept with the decision so whoever records the outcome in
-- the Session delivers it.
ALTER TABLE action_approvals ADD COLUMN deny_message TEXT NOT NULL DEFAULT '';
