-- The delivery screen an Automation froze into its child Session (api.md
-- §18.8): JSON, null for none. Written once, at creation.
ALTER TABLE sessions ADD COLUMN delivery_screen_json TEXT;
