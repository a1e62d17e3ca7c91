-- Tenants (docs/architecture.md, "Tenants"): explicit namespaces, the home of quotas, and
-- tokens scoped to namespaces with a role. Every namespace already in use becomes a
-- namespace resource, and `default` always exists.
CREATE TABLE namespaces (
    name             TEXT    NOT NULL PRIMARY KEY,
    quotas           TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL
);

INSERT INTO namespaces (name, quotas, resource_version, created_at, updated_at)
SELECT name, '{}', 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
FROM (SELECT 'default' AS name UNION SELECT namespace FROM functions UNION SELECT namespace FROM triggers
      UNION SELECT namespace FROM jobs);

-- `secret_hash`: HMAC-SHA256 of the secret under the server's token key (hex); the secret
-- itself is never stored. `namespaces`: a JSON array of names.
CREATE TABLE tokens (
    id          TEXT NOT NULL PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    role        TEXT NOT NULL,
    namespaces  TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT
);
