-- Functions: the spec and the status are JSON documents (the spec's shape is owned by
-- sless-core and validated there); what is queried or compared is in columns.
CREATE TABLE functions (
    namespace        TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    spec             TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    active_version   INTEGER,
    status           TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    PRIMARY KEY (namespace, name)
);

CREATE TABLE versions (
    namespace   TEXT    NOT NULL,
    function    TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    sha256      TEXT    NOT NULL,
    size_bytes  INTEGER NOT NULL,
    runtime     TEXT    NOT NULL,
    phase       TEXT    NOT NULL,
    message     TEXT    NOT NULL DEFAULT '',
    build_log   TEXT    NOT NULL DEFAULT '',
    created_at  TEXT    NOT NULL,
    PRIMARY KEY (namespace, function, version),
    UNIQUE (namespace, function, sha256)
);
