-- Tenants (docs/architecture.md, "Tenants"): explicit namespaces, the home of quotas, and
-- tokens scoped to namespaces with a role; the same tables as the SQLite migration.
CREATE TABLE namespaces (
    name             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    quotas           TEXT   NOT NULL,
    resource_version BIGINT NOT NULL,
    created_at       TEXT   NOT NULL,
    updated_at       TEXT   NOT NULL
);

INSERT INTO namespaces (name, quotas, resource_version, created_at, updated_at)
SELECT name, '{}', 1, to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
FROM (SELECT 'default' AS name UNION SELECT namespace FROM functions UNION SELECT namespace FROM triggers
      UNION SELECT namespace FROM jobs) AS used;

CREATE TABLE tokens (
    id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    role        TEXT NOT NULL,
    namespaces  TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT
);
