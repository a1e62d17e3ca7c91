-- The PostgreSQL schema: the same tables, columns and meaning as the SQLite migrations, so the
-- same SQL serves both. Integers are BIGINT (read as i64); times are RFC 3339 UTC text with
-- milliseconds and the spec/status documents JSON text, as on SQLite. Every text column that
-- is compared or sorted uses the "C" collation: byte order, as SQLite compares (a locale's
-- collation would skip hyphens, and pages and cursors would disagree with SQLite's).

CREATE TABLE functions (
    namespace        TEXT COLLATE "C" NOT NULL,
    name             TEXT COLLATE "C" NOT NULL,
    spec             TEXT   NOT NULL,
    resource_version BIGINT NOT NULL,
    active_version   BIGINT,
    status           TEXT   NOT NULL,
    created_at       TEXT   NOT NULL,
    updated_at       TEXT   NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE TABLE versions (
    namespace   TEXT COLLATE "C" NOT NULL,
    function    TEXT COLLATE "C" NOT NULL,
    version     BIGINT NOT NULL,
    sha256      TEXT COLLATE "C" NOT NULL,
    size_bytes  BIGINT NOT NULL,
    runtime     TEXT   NOT NULL,
    phase       TEXT   NOT NULL,
    message     TEXT   NOT NULL DEFAULT '',
    build_log   TEXT   NOT NULL DEFAULT '',
    created_at  TEXT   NOT NULL,
    PRIMARY KEY (namespace, function, version),
    UNIQUE (namespace, function, sha256)
);

CREATE TABLE triggers (
    namespace        TEXT COLLATE "C" NOT NULL,
    name             TEXT COLLATE "C" NOT NULL,
    spec             TEXT   NOT NULL,
    resource_version BIGINT NOT NULL,
    status           TEXT   NOT NULL,
    created_at       TEXT   NOT NULL,
    updated_at       TEXT   NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE TABLE jobs (
    namespace        TEXT COLLATE "C" NOT NULL,
    name             TEXT COLLATE "C" NOT NULL,
    spec             TEXT   NOT NULL,
    resource_version BIGINT NOT NULL,
    status           TEXT   NOT NULL,
    created_at       TEXT   NOT NULL,
    updated_at       TEXT   NOT NULL,
    PRIMARY KEY (namespace, name)
);

-- Invocation records. `id` is a UUIDv7, so ordering by id is ordering by start time;
-- `logs` is a JSON array of strings.
CREATE TABLE invocations (
    id             TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    namespace      TEXT COLLATE "C" NOT NULL,
    function       TEXT COLLATE "C" NOT NULL,
    version        BIGINT,
    source         TEXT    NOT NULL,
    source_name    TEXT,
    started_at     TEXT COLLATE "C" NOT NULL,
    duration_ms    BIGINT  NOT NULL,
    status         BIGINT  NOT NULL,
    outcome        TEXT    NOT NULL,
    error_type     TEXT,
    error_message  TEXT,
    request_bytes  BIGINT  NOT NULL,
    response_bytes BIGINT  NOT NULL,
    cold_start     BOOLEAN NOT NULL,
    logs           TEXT    NOT NULL DEFAULT '[]'
);

CREATE INDEX invocations_by_function ON invocations (namespace, function, id DESC);
CREATE INDEX invocations_by_namespace ON invocations (namespace, id DESC);
CREATE INDEX invocations_by_started_at ON invocations (started_at);
