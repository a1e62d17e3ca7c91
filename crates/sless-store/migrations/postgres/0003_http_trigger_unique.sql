-- One http trigger per function (its public URL is /fn/{namespace}/{function}): enforced by the
-- database, so two servers on one database cannot both create one.
CREATE UNIQUE INDEX triggers_http_function ON triggers (namespace, ((spec::jsonb) ->> 'function'))
    WHERE (spec::jsonb) ->> 'type' = 'http';
