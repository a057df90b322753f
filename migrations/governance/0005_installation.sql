-- One row: the installation was bootstrapped. Its primary key makes two
-- replicas starting at once bootstrap exactly once.
CREATE TABLE installation (
    id TEXT PRIMARY KEY,
    bootstrapped_ms BIGINT NOT NULL
);
INSERT INTO installation (id, bootstrapped_ms) SELECT 'installation', 0 WHERE EXISTS (SELECT 1 FROM principals);
