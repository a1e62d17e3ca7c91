-- One http trigger per function (its public URL is /fn/{namespace}/{function}): enforced by the
-- database, so two writers on one database cannot both create one.
CREATE UNIQUE INDEX triggers_http_function ON triggers (namespace, json_extract(spec, '$.function'))
    WHERE json_extract(spec, '$.type') = 'http';
