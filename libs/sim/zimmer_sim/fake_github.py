"""A real HTTP server (127.0.0.1 by default) that answers the parts of GitHub's API the backlog uses:
the backlog's tests read it, and the simulated fleet (`zimmer sim`) serves it to a running backlog
(`github_world` evolves its issues).

- `GET /repos/{owner}/{repo}/contents/{path}?ref={ref}` (raw media type): a file, or 404.
- `GET /repos/{owner}/{repo}/issues?state=open&per_page=&page=`: open issues (and open PRs, as
  GitHub lists them too), paginated with a Link header.
- `POST /graphql`: executed by graphql-core against a subset of GitHub's schema (repository,
  issue, timelineItems with cross-referenced and connected events, pull requests, rateLimit), so a
  query the real API would reject is rejected here too. A missing repository or issue answers
  null at its path with a NOT_FOUND error, as GitHub does.

Every request needs `Authorization: Bearer <token>` (401 otherwise). Faults on demand: `stall`
(hold each answer for some seconds), `fail_next` (a status: 5xx; 200 answers HTML, 201 answers
JSON of the wrong shape), `rate_limit_next` (403 with x-ratelimit-remaining: 0), `hidden_repos`
(NOT_FOUND as a whole).

The server answers from its own thread while the owner changes `issues` and `open_prs`; a change
made under `lock` is seen whole (the listing and the timelines read under it).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from graphql import GraphQLError, build_schema, graphql_sync

SDL = """
type Query { repository(owner: String!, name: String!): Repository  rateLimit: RateLimit }
type RateLimit { remaining: Int!  resetAt: String! }
type Repository { nameWithOwner: String!  issue(number: Int!): Issue }
enum IssueState { OPEN CLOSED }
enum PullRequestState { OPEN CLOSED MERGED }
enum IssueTimelineItemsItemType { CROSS_REFERENCED_EVENT CONNECTED_EVENT MENTIONED_EVENT }
type PageInfo { hasNextPage: Boolean!  endCursor: String }
type Issue {
  number: Int!  state: IssueState!  title: String!
  timelineItems(first: Int, after: String, itemTypes: [IssueTimelineItemsItemType!]): IssueTimelineItemsConnection!
}
type IssueTimelineItemsConnection { pageInfo: PageInfo!  nodes: [IssueTimelineItems] }
union IssueTimelineItems = CrossReferencedEvent | ConnectedEvent
type CrossReferencedEvent { source: ReferencedSubject! }
type ConnectedEvent { subject: ReferencedSubject! }
union ReferencedSubject = Issue | PullRequest
type PullRequest {
  number: Int!  state: PullRequestState!  merged: Boolean!  mergedAt: String  updatedAt: String!
  repository: Repository!
}
"""


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    ref: str | None
    authorization: str | None
    accept: str | None
    body: dict[str, Any] | None = None


@dataclass
class FakePR:
    repo: str
    number: int
    state: str  # OPEN, CLOSED or MERGED
    updated_at: datetime
    connected: bool = False  # linked in the sidebar (ConnectedEvent) rather than referenced in text

    def node(self) -> dict[str, Any]:
        return {"__typename": "PullRequest", "number": self.number, "state": self.state,
                "merged": self.state == "MERGED",
                "mergedAt": self.updated_at.isoformat() if self.state == "MERGED" else None,
                "updatedAt": self.updated_at.isoformat().replace("+00:00", "Z"),
                "repository": {"nameWithOwner": self.repo}}


@dataclass
class FakeIssue:
    title: str = "An issue"
    state: str = "OPEN"
    prs: list[FakePR] = field(default_factory=list)
    issue_mentions: int = 0  # other issues cross-referencing this one (not pull requests)


class FakeGithub:
    def __init__(self, token: str, files: dict[tuple[str, str, str], bytes] | None = None, port: int = 0,
                 host: str = "127.0.0.1", share_port: bool = False):
        """Bound at once (port 0: any free one), so `url` is known before `start`: `zimmer up` can
        hand it to the backlog before the backlog starts. `share_port`: bind with SO_REUSEPORT,
        beside the socket that held the port for us until now."""
        self.token = token
        self.files = dict(files or {})  # (owner/repo, path, ref) -> raw content
        self.issues: dict[tuple[str, int], FakeIssue] = {}  # (owner/repo, number)
        self.open_prs: dict[tuple[str, int], str] = {}  # open PRs the issues listing shows: (repo, n) -> title
        self.hidden_repos: set[str] = set()
        self.requests: list[SeenRequest] = []
        self.stall_seconds = 0.0
        self._fail: list[int] = []  # statuses to answer, one per request, before serving normally
        self._lock = threading.Lock()  # the fault queue
        self.lock = threading.RLock()  # issues and open_prs, against a reader in the server's thread
        self.schema = self._schema()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                fake._serve(self, "GET", None)

            def do_POST(self) -> None:  # noqa: N802 - http.server dispatches on this name
                length = int(self.headers.get("Content-Length") or 0)
                fake._serve(self, "POST", self.rfile.read(length))

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

        self._server = ThreadingHTTPServer((host, port), Handler, bind_and_activate=False)
        self._server.allow_reuse_port = share_port
        try:
            self._server.server_bind()
            self._server.server_activate()
        except OSError:
            self._server.server_close()
            raise
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-github", daemon=True)

    # ---- fixtures and faults ---------------------------------------------------------------------

    def issue(self, repo: str, number: int, **kw: Any) -> FakeIssue:
        with self.lock:
            self.issues[(repo, number)] = issue = FakeIssue(**kw)
        return issue

    def fail_next(self, status: int = 502, times: int = 1) -> None:
        with self._lock:
            self._fail += [status] * times

    def rate_limit_next(self, times: int = 1) -> None:
        self.fail_next(403, times)

    def graphql_requests(self) -> list[SeenRequest]:
        return [r for r in self.requests if r.path == "/graphql"]

    # ---- serving ---------------------------------------------------------------------------------

    def _serve(self, h: BaseHTTPRequestHandler, method: str, raw: bytes | None) -> None:
        url = urlsplit(h.path)
        query = parse_qs(url.query)
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        self.requests.append(SeenRequest(method, unquote(url.path), query.get("ref", [None])[0],
                                         h.headers.get("Authorization"), h.headers.get("Accept"), body))
        if self.stall_seconds:
            time.sleep(self.stall_seconds)
        if h.headers.get("Authorization") != f"Bearer {self.token}":
            return _answer(h, 401, {"message": "Bad credentials", "status": "401"})
        with self._lock:
            status = self._fail.pop(0) if self._fail else None
        if status == 403:
            return _answer(h, 403, {"message": "API rate limit exceeded"},
                           {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(time.time()) + 3600)})
        if status == 200:  # a 200 that is not what was asked for: a proxy's HTML page
            return _send(h, 200, b"<html>502 Bad Gateway</html>", "text/html")
        if status == 201:  # JSON of the wrong shape
            return _answer(h, 200, {"data": {"r0": {"i1": {"number": 1, "state": "OPEN"}}}})
        if status is not None:
            return _answer(h, status, {"message": "Server Error"})
        parts = unquote(url.path).split("/", 5)  # "", repos, owner, repo, contents|issues, path
        if method == "POST" and url.path == "/graphql":
            return self._graphql(h, body)
        if method == "GET" and len(parts) == 5 and parts[1] == "repos" and parts[4] == "issues":
            return self._list_issues(h, f"{parts[2]}/{parts[3]}", query)
        if method != "GET" or len(parts) < 6 or parts[1] != "repos" or parts[4] != "contents":
            return _answer(h, 404, {"message": "Not Found", "status": "404"})
        content = self.files.get((f"{parts[2]}/{parts[3]}", parts[5], query.get("ref", ["main"])[0]))
        if content is None:
            return _answer(h, 404, {"message": "Not Found", "status": "404"})
        if h.headers.get("Accept") != "application/vnd.github.raw+json":
            return _answer(h, 415, {"message": "this fake serves only the raw media type"})
        _send(h, 200, content, "application/vnd.github.raw+json")

    def _list_issues(self, h: BaseHTTPRequestHandler, repo: str, query: dict[str, list[str]]) -> None:
        if repo in self.hidden_repos:
            return _answer(h, 404, {"message": "Not Found"})
        with self.lock:
            listed: list[dict[str, Any]] = [
                {"number": n, "title": i.title, "state": "open"} for (r, n), i in self.issues.items()
                if r == repo and i.state == "OPEN"]
            listed += [{"number": n, "title": t, "state": "open", "pull_request": {}}
                       for (r, n), t in self.open_prs.items() if r == repo]
        listed.sort(key=lambda x: -x["number"])
        per_page, page = int(query.get("per_page", ["30"])[0]), int(query.get("page", ["1"])[0])
        chunk = listed[(page - 1) * per_page: page * per_page]
        more = page * per_page < len(listed)
        link = {"link": f'<{self.url}/repos/{repo}/issues?page={page + 1}>; rel="next"'} if more else {}
        _answer(h, 200, chunk, link)

    def _graphql(self, h: BaseHTTPRequestHandler, body: dict[str, Any] | None) -> None:
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            return _answer(h, 400, {"message": "Problems parsing JSON"})
        result = graphql_sync(self.schema, body["query"], variable_values=body.get("variables") or {})
        out: dict[str, Any] = {"data": result.data}
        if result.errors:
            out["errors"] = [{**e.formatted, "type": (e.extensions or {}).get("type", "INVALID")}
                             for e in result.errors]
        _answer(h, 200, out)

    def _schema(self) -> Any:
        schema = build_schema(SDL)
        fake = self

        def repository(_root: Any, _info: Any, owner: str, name: str) -> dict[str, Any]:
            repo = f"{owner}/{name}"
            if repo in fake.hidden_repos:
                raise GraphQLError(f"Could not resolve to a Repository with the name '{repo}'.",
                                   extensions={"type": "NOT_FOUND"})
            return {"nameWithOwner": repo}

        def issue(root: dict[str, Any], _info: Any, number: int) -> dict[str, Any]:
            with fake.lock:
                found = fake.issues.get((root["nameWithOwner"], number))
                if found is None:
                    raise GraphQLError(f"Could not resolve to an Issue with the number of {number}.",
                                       extensions={"type": "NOT_FOUND"})
                return {"number": number, "state": found.state, "title": found.title, "_issue": found,
                        "_prs": [(pr.connected, pr.node()) for pr in found.prs]}

        def timeline(root: dict[str, Any], _info: Any, first: int = 100, after: str | None = None,
                     itemTypes: list[str] | None = None) -> dict[str, Any]:  # noqa: N803 - GitHub's name
            found: FakeIssue = root["_issue"]
            nodes: list[dict[str, Any]] = [
                {"__typename": "CrossReferencedEvent", "source": {"__typename": "Issue", "number": 1, "state": "OPEN",
                                                                  "title": "another issue"}}
                for _ in range(found.issue_mentions)]
            for connected, pr in root["_prs"]:  # as the issue read them, under the lock
                nodes.append({"__typename": "ConnectedEvent", "subject": pr} if connected
                             else {"__typename": "CrossReferencedEvent", "source": pr})
            wanted = {"CROSS_REFERENCED_EVENT": "CrossReferencedEvent", "CONNECTED_EVENT": "ConnectedEvent"}
            if itemTypes:
                nodes = [n for n in nodes if n["__typename"] in {wanted.get(t) for t in itemTypes}]
            start = int(after) if after else 0
            page = nodes[start:start + min(first, 100)]
            more = start + len(page) < len(nodes)
            return {"pageInfo": {"hasNextPage": more, "endCursor": str(start + len(page)) if page else None},
                    "nodes": page}

        schema.query_type.fields["repository"].resolve = repository
        schema.query_type.fields["rateLimit"].resolve = lambda *_: {"remaining": 4999, "resetAt": "2099-01-01T00:00:00Z"}
        schema.get_type("Repository").fields["issue"].resolve = issue
        schema.get_type("Issue").fields["timelineItems"].resolve = timeline
        for union in ("IssueTimelineItems", "ReferencedSubject"):
            schema.get_type(union).resolve_type = lambda value, *_: value["__typename"]
        return schema

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeGithub:
        """Serve, from a daemon thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        self.stall_seconds = 0
        if self._thread.is_alive():  # a fake never started (bound only) has nothing to shut down
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()

    def __enter__(self) -> FakeGithub:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _send(h: BaseHTTPRequestHandler, status: int, data: bytes, content_type: str,
          headers: dict[str, str] | None = None) -> None:
    try:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up (a stalled answer past its timeout)


def _answer(h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
    _send(h, status, json.dumps(body).encode(), "application/json", headers)
