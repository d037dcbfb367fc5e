"""A loopback HTTP server for one file that honours Range requests, and can cut its first answer short."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RangeServer:
    """Serves ``payload`` at ``/<name>``; ``cut_after`` bytes into the first full answer, it drops the
    connection (a download interrupted midway). ``requests`` records each request's Range header and
    Authorization header."""

    def __init__(self, payload: bytes, name: str = "file.bin", cut_after: int | None = None,
                 token: str | None = None, redirect_to: str | None = None):
        self.payload, self.name, self.cut_after, self.token, self.redirect_to = payload, name, cut_after, token, redirect_to
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append({"path": self.path, "range": self.headers.get("Range"),
                                        "authorization": self.headers.get("Authorization")})
                if server.redirect_to and self.path == f"/{server.name}":
                    self.send_response(302)
                    self.send_header("Location", server.redirect_to)
                    self.end_headers()
                    return
                if self.path.lstrip("/") not in (server.name, f"cdn/{server.name}"):
                    self.send_error(404)
                    return
                if server.token and self.path == f"/{server.name}" and \
                        self.headers.get("Authorization") != f"Bearer {server.token}":
                    self.send_error(401)
                    return
                start = 0
                header = self.headers.get("Range")
                if header:
                    start = int(header.removeprefix("bytes=").split("-")[0])
                    if start >= len(server.payload):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(server.payload) - 1}/{len(server.payload)}")
                else:
                    self.send_response(200)
                body = server.payload[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if server.cut_after is not None and not header:
                    self.wfile.write(body[: server.cut_after])
                    self.wfile.flush()
                    server.cut_after = None
                    self.connection.shutdown(2)  # the rest never comes
                    return
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def url(self) -> str:
        return f"{self.base}/{self.name}"

    def __enter__(self) -> RangeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
