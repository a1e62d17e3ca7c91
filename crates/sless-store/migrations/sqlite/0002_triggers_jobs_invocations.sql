-- Triggers and jobs: like functions, the spec and the status are JSON documents owned by
-- sless-core; what is queried or compared is in columns.
CREATE TABLE triggers (
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    spec             TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    status           TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE TABLE jobs (
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    spec             TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    status           TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    PRIMARY KEY (namespace, name)
);

-- Invocation records. `id` is a UUIDv7, so ordering by id is ordering by start time;
-- `logs` is a JSON array of strings.
CREATE TABLE invocations (
    id             TEXT    NOT NULL PRIMARY KEY,
    namespace      TEXT    NOT NULL,
    function       TEXT    NOT NULL,
    version        INTEGER,
    source         TEXT    NOT NULL,
    source_name    TEXT,
    started_at     TEXT    NOT NULL,
    duration_ms    INTEGER NOT NULL,
    status         INTEGER NOT NULL,
    outcome        TEXT    NOT NULL,
    error_type     TEXT,
    error_message  TEXT,
    request_bytes  INTEGER NOT NULL,
    response_bytes INTEGER NOT NULL,
    cold_start     INTEGER NOT NULL,
    logs           TEXT    NOT NULL DEFAULT '[]'
);

-- Listing newest first, per function and per namespace; the per-function one also serves the
-- per-function retention count.
CREATE INDEX invocations_by_function ON invocations (namespace, function, id DESC);
CREATE INDEX invocations_by_namespace ON invocations (namespace, id DESC);
-- Pruning by age.
CREATE INDEX invocations_by_started_at ON invocations (started_at);
