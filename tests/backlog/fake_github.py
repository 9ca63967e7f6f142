"""A real HTTP server on 127.0.0.1 that answers GitHub's contents API for a few files.

`GET /repos/{owner}/{repo}/contents/{path}?ref={ref}` with `Authorization: Bearer <token>` and
`Accept: application/vnd.github.raw+json` returns the raw file; a missing or wrong token is a
401, an unknown repo, path or ref a 404, as GitHub answers them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass(frozen=True)
class SeenRequest:
    path: str
    ref: str | None
    authorization: str | None
    accept: str | None


class FakeGithub:
    def __init__(self, token: str, files: dict[tuple[str, str, str], bytes] | None = None):
        self.token = token
        self.files = dict(files or {})  # (owner/repo, path, ref) -> raw content
        self.requests: list[SeenRequest] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                url = urlsplit(self.path)
                ref = parse_qs(url.query).get("ref", [None])[0]
                fake.requests.append(SeenRequest(unquote(url.path), ref, self.headers.get("Authorization"),
                                                 self.headers.get("Accept")))
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._answer(401, {"message": "Bad credentials", "status": "401"})
                parts = unquote(url.path).split("/", 5)  # "", repos, owner, repo, contents, path
                if len(parts) < 6 or parts[1] != "repos" or parts[4] != "contents":
                    return self._answer(404, {"message": "Not Found", "status": "404"})
                content = fake.files.get((f"{parts[2]}/{parts[3]}", parts[5], ref or "main"))
                if content is None:
                    return self._answer(404, {"message": "Not Found", "status": "404"})
                if self.headers.get("Accept") != "application/vnd.github.raw+json":
                    return self._answer(415, {"message": "this fake serves only the raw media type"})
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.github.raw+json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def _answer(self, status: int, body: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-github", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeGithub:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
