"""What the tests that drive a real dagster-webserver send it: the UI's GraphQL calls, and when it answers them."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def graphql(port: int, query: str, variables: dict | None = None, timeout: float = 120) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def webserver_ready(port: int) -> bool:
    """True once the webserver answers and its code location has loaded (or failed to: the test then says why)."""
    try:
        data = graphql(port, "{ workspaceOrError { ... on Workspace { locationEntries { "
                             "locationOrLoadError { __typename } } } } }")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
    entries = data["data"]["workspaceOrError"]["locationEntries"]
    return bool(entries) and entries[0]["locationOrLoadError"] is not None
