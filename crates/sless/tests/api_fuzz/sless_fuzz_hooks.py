"""Schemathesis hooks for crates/sless/tests/api_fuzz.rs.

`GET .../logs?follow=true` is a server-sent event stream that stays open until the client
leaves (docs/api.md, "Invocations and logs"); the run reads the recent lines instead, so the
request timeout keeps meaning "the server hung".
"""

import schemathesis


@schemathesis.hook
def map_query(ctx, query):
    if query and "follow" in query:
        query["follow"] = "false"
    return query
