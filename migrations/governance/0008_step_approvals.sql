-- An Automation's approval step asks for an ActionApproval too (api.md
-- §12.8 rule 6): no Session, Run or tool use, but the firing and step it
-- holds up. Such an approval is keyed (session_id '', tool_use_id
-- '<firing>/<step>'), so asking again answers the same one.
ALTER TABLE action_approvals ADD COLUMN automation_firing_id TEXT NOT NULL DEFAULT '';
ALTER TABLE action_approvals ADD COLUMN step_id TEXT NOT NULL DEFAULT '';
