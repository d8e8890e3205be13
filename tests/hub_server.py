"""A Hugging Face Hub-compatible server on loopback, for the real ``huggingface_hub`` client.

It serves dataset repos from local directories through the endpoints the client calls for a
dataset (``HF_ENDPOINT=server.url``):

- ``GET /api/datasets/ORG/NAME/revision/REV``: repo info (``sha``, ``siblings``);
- ``GET /api/datasets/ORG/NAME/tree/REV[/PATH]?recursive=..&cursor=..``: the file listing,
  1,000 entries per page with a ``Link: <...>; rel="next"`` header, as the Hub pages it;
- ``HEAD``/``GET /datasets/ORG/NAME/resolve/REV/PATH``: a file with ``X-Repo-Commit``,
  ``ETag`` (the git blob id) and ``Content-Length``; ``Range`` answered with 206.

A revision may be a branch, a tag or a commit SHA (each repo maps names to SHAs; one SHA per
directory). Unknown repos and revisions get the 404s the client maps to its errors. Every
request is counted by kind. ``budget=(n, seconds)`` answers 429 (``Retry-After``) past n
requests in any window of that many seconds, and ``error_rate`` answers 503 to that fraction
of requests (seeded), so clients must retry. Loopback only; stops with ``stop()``.
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

PAGE = 1000


@dataclass
class Repo:
    """One dataset repo: ``revisions`` maps a branch, tag or SHA to a SHA; ``trees`` a SHA to
    the directory holding that commit's files."""

    revisions: dict[str, str] = field(default_factory=dict)
    trees: dict[str, Path] = field(default_factory=dict)

    def add_commit(self, root: Path, *names: str) -> str:
        """Serve ``root`` as a new commit, reachable by its SHA and ``names``; returns the SHA."""
        sha = hashlib.sha1(f"{root}:{len(self.trees)}".encode()).hexdigest()
        self.trees[sha] = Path(root)
        self.revisions[sha] = sha
        for name in names:
            self.revisions[name] = sha
        return sha


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what the Hub calls a file's ``oid``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubServer:
    """The server; ``repos`` maps ``ORG/NAME`` to a ``Repo``; ``counts`` counts requests by kind
    (``revision``, ``tree``, ``head``, ``get``) and answers (``429``, ``503``)."""

    def __init__(self, *, budget: tuple[int, float] | None = None, error_rate: float = 0.0, seed: int = 0):
        self.repos: dict[str, Repo] = {}
        self.counts: collections.Counter = collections.Counter()
        self.log: list[tuple[str, str]] = []
        self.budget = budget
        self.error_rate = error_rate
        self._rng = random.Random(seed)
        self._recent: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._blob_ids: dict[Path, str] = {}
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="hub-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def repo(self, repo_id: str) -> Repo:
        return self.repos.setdefault(repo_id, Repo())

    def start(self) -> HubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.log.clear()

    # -- policy ------------------------------------------------------------------------------
    def _refusal(self) -> int | None:
        """429 past the budget, 503 at the error rate, else None (and the request counts)."""
        with self._lock:
            now = time.monotonic()
            if self.budget is not None:
                limit, window = self.budget
                while self._recent and now - self._recent[0] > window:
                    self._recent.popleft()
                if len(self._recent) >= limit:
                    self.counts["429"] += 1
                    return 429
                self._recent.append(now)
            if self.error_rate and self._rng.random() < self.error_rate:
                self.counts["503"] += 1
                return 503
        return None

    def _blob(self, path: Path) -> str:
        if path not in self._blob_ids:
            self._blob_ids[path] = blob_id(path.read_bytes())
        return self._blob_ids[path]

    # -- the handler -------------------------------------------------------------------------
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: counted instead
                pass

            def _send(self, status: int, body: bytes = b"", headers: dict | None = None, *, head: bool = False) -> None:
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, str(value))
                if "Content-Length" not in (headers or {}):
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _json(self, obj, headers: dict | None = None) -> None:
                self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

            def _not_found(self, code: str, message: str) -> None:
                self._send(
                    404,
                    json.dumps({"error": message}).encode(),
                    {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message},
                )

            def do_HEAD(self) -> None:
                self._serve(head=True)

            def do_GET(self) -> None:
                self._serve(head=False)

            def _serve(self, *, head: bool) -> None:
                split = urlsplit(self.path)
                parts = [unquote(p) for p in split.path.split("/")]
                kind = "tree" if "tree" in parts[:6] else "revision" if parts[1:2] == ["api"] else ("head" if head else "get")
                with server._lock:
                    server.counts[kind] += 1
                    server.log.append((kind, split.path))
                refusal = server._refusal()
                if refusal is not None:
                    self._send(
                        refusal, b'{"error": "slow down"}', {"Retry-After": "1", "Content-Type": "application/json"}, head=head
                    )
                    return
                try:
                    if parts[1:3] == ["api", "datasets"] and len(parts) == 5:  # repo info at the default branch
                        self._api(parts[3] + "/" + parts[4], "revision", "main", "", {})
                    elif parts[1:3] == ["api", "datasets"] and len(parts) >= 7:
                        self._api(parts[3] + "/" + parts[4], parts[5], parts[6], "/".join(parts[7:]), parse_qs(split.query))
                    elif parts[1] == "datasets" and len(parts) >= 7 and parts[4] == "resolve":
                        self._resolve(parts[2] + "/" + parts[3], parts[5], "/".join(parts[6:]), head=head)
                    else:
                        self._not_found("EntryNotFound", f"no route {split.path}")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _commit(self, repo_id: str, revision: str) -> tuple[str, Path] | None:
                repo = server.repos.get(repo_id)
                if repo is None:
                    self._not_found("RepoNotFound", f"Repository {repo_id} not found")
                    return None
                sha = repo.revisions.get(revision)
                if sha is None:
                    self._not_found("RevisionNotFound", f"Invalid rev id: {revision}")
                    return None
                return sha, repo.trees[sha]

            def _api(self, repo_id: str, what: str, revision: str, sub: str, query: dict) -> None:
                found = self._commit(repo_id, revision)
                if found is None:
                    return
                sha, root = found
                files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
                if what == "revision":
                    self._json(
                        {
                            "_id": sha[:24],
                            "id": repo_id,
                            "author": repo_id.split("/")[0],
                            "sha": sha,
                            "private": False,
                            "gated": False,
                            "disabled": False,
                            "downloads": 0,
                            "likes": 0,
                            "tags": [],
                            "lastModified": "2026-11-01T00:00:00.000Z",
                            "siblings": [{"rfilename": f} for f in files],
                        }
                    )
                    return
                if what != "tree":
                    self._not_found("EntryNotFound", what)
                    return
                recursive = query.get("recursive", ["false"])[0].lower() == "true"
                prefix = sub.strip("/")
                entries, folders = [], set()
                for rel in files:
                    if prefix and not rel.startswith(prefix + "/"):
                        continue
                    rest = rel[len(prefix) + 1 :] if prefix else rel
                    if not recursive and "/" in rest:
                        folders.add((prefix + "/" if prefix else "") + rest.split("/")[0])
                        continue
                    path = root / rel
                    entries.append({"type": "file", "oid": server._blob(path), "size": path.stat().st_size, "path": rel})
                entries += [{"type": "directory", "oid": "0" * 40, "size": 0, "path": f} for f in sorted(folders)]
                start = int(query.get("cursor", ["0"])[0])
                page = entries[start : start + PAGE]
                headers = {}
                if start + PAGE < len(entries):
                    next_url = f"{server.url}{urlsplit(self.path).path}?recursive={str(recursive).lower()}&cursor={start + PAGE}"
                    headers["Link"] = f'<{next_url}>; rel="next"'
                self._json(page, headers)

            def _resolve(self, repo_id: str, revision: str, rel: str, *, head: bool) -> None:
                found = self._commit(repo_id, revision)
                if found is None:
                    return
                sha, root = found
                path = root / rel
                if not path.is_file() or ".." in rel.split("/"):
                    self._not_found("EntryNotFound", f"{rel} not found")
                    return
                data = path.read_bytes()
                headers = {
                    "X-Repo-Commit": sha,
                    "ETag": f'"{server._blob(path)}"',
                    "Content-Type": "application/octet-stream",
                    "Accept-Ranges": "bytes",
                }
                byte_range = self.headers.get("Range")
                if byte_range and byte_range.startswith("bytes=") and not head:
                    first, _, last = byte_range[6:].partition("-")
                    start, stop = int(first or 0), int(last) + 1 if last else len(data)
                    headers["Content-Range"] = f"bytes {start}-{stop - 1}/{len(data)}"
                    self._send(206, data[start:stop], headers)
                    return
                headers["Content-Length"] = len(data)
                self._send(200, data, headers, head=head)

        return Handler


def quoted(revision: str) -> str:
    return quote(revision, safe="")
