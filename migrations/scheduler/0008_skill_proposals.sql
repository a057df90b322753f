-- SkillProposals (api.md §18.7): a SKILL.md a graph's step_skill_proposal
-- learnt, one per firing and step, waiting for a person to adopt it as a
-- skill version or reject it.
CREATE TABLE automation_skill_proposals (
    id TEXT PRIMARY KEY,
    environment_id TEXT NOT NULL,
    automation_id TEXT NOT NULL,
    firing_id TEXT NOT NULL,
    step_id TEXT NOT NULL,
    skill_id TEXT NOT NULL,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    content TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    adopted_skill_id TEXT NOT NULL,
    adopted_version BIGINT NOT NULL,
    decided_by TEXT NOT NULL,
    decided_ms BIGINT NOT NULL,
    decision_note TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    version BIGINT NOT NULL,
    UNIQUE (firing_id, step_id)
);
CREATE INDEX automation_skill_proposals_env ON automation_skill_proposals(environment_id, id);
CREATE INDEX automation_skill_proposals_adopted ON automation_skill_proposals(automation_id, adopted_skill_id);
