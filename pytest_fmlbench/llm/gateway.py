"""The LLM gateway: the one way a coding tool's model calls leave its sandbox.

A coding tool (Claude Code, Codex, mini-swe-agent) runs in the agent sandbox with no network and no key.
Its SDK talks plain HTTP to ``agentkit.forwarder`` on 127.0.0.1 inside, which relays each connection to a
UNIX socket bound into the sandbox; this gateway serves that socket from threads of the harness::

    gateway = Gateway(client, Path(private_dir) / "llm.sock")   # client: the run's LLMClient
    gateway.start()        # the socket accepts from here on
    ...                    # bind the socket into the sandbox; the tool runs
    gateway.close()        # idempotent; removes the socket

It serves model calls only: ``POST /v1/messages`` for an Anthropic provider, ``POST /v1/chat/completions``
and ``POST /v1/responses`` for OpenAI-protocol providers (openai, google, openrouter, openai-compatible).
Anything else is answered 404 in the provider's error shape and never forwarded. For each call it checks
the run's budgets (403 with the reason once one is spent: SDKs do not retry a 403), serves the run's
model whatever model the tool asked for, drops any credential the tool sent and adds the real key,
passes the reply through as it arrives (SSE chunk by chunk), reads the usage from the reply, prices it,
charges it to the run's ``LLMClient`` (the one meter of the run: budgets and step records), and logs the
call in the run's ``llm_calls.jsonl`` without any header or key. Gateway calls are never replayed: a
resumed coding tool starts a new session. What a reply holds (usage, text, tool calls), in each wire API's
shape, is read by ``gateway_replies``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socketserver
import stat
import threading
import time
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

try:
    import httpx2 as httpx  # what this environment's openai/anthropic SDKs are built on
except ImportError:  # pragma: no cover - the same client under its usual name
    import httpx

from ..agent_host.protocol import JsonLimits, ProtocolViolation, decode
from ..record import Usage
from ..session import RunStopped
from .client import LLMClient
from .errors import LLMSetupError
from .gateway_replies import ReplyReader, one_line
from .providers import Endpoint
from .redact import guard_loggers, redact, register_secret

log = logging.getLogger("fmlbench.llm.gateway")

# where the SDKs send calls when no base URL is configured
_PUBLIC_BASE = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
_BASE_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
# the served paths and which wire API each one speaks
ROUTES = {
    "anthropic": {"/v1/messages": "anthropic"},
    "openai": {"/v1/chat/completions": "chat", "/v1/responses": "responses"},
}

MAX_BODY = 32 * 2**20  # bytes of one request; a coding tool's longest conversations stay far below
# A request body is what the agent's tool sends: read within the same kind of limits as the agent's own
# messages (no NaN, no lone surrogate, a bounded count of values and depth), so that parsing it costs the
# harness a bounded amount (about 64 bytes a value) and every record of it reads back. A long conversation
# with its tools' JSON schemas holds some 10^4-10^5 values, nested some 10-20 levels.
BODY_LIMITS = JsonLimits(MAX_BODY, max_values=1 << 20, max_depth=64, what="a request body")
REQUEST_CAP = 64_000  # characters of a request kept in its record
TEXT_CAP = 32_000  # characters of a reply's text (and of its tool calls) kept in its record

# headers that only concern one hop, or that the gateway sets itself
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
                  "host", "content-length", "accept-encoding", "expect"})
# whatever a tool sends that could carry a credential, in any provider's spelling: never forwarded
_CREDENTIAL = re.compile(r"key|auth|token|secret|cookie|password|credential", re.IGNORECASE)
# the account the real key belongs to decides these, not the tool
_ACCOUNT = frozenset({"openai-organization", "openai-project", "chatgpt-account-id"})
_REPLY_DROP = _HOP | {"content-encoding", "set-cookie", "server", "date"}


def upstream_base(endpoint: Endpoint, env: Mapping[str, str] | None = None) -> str:
    """Where the gateway forwards calls: the endpoint's base URL, else where the provider's SDK would go."""
    env = os.environ if env is None else env
    protocol = endpoint.provider.protocol
    base = endpoint.base_url or env.get(_BASE_ENV[protocol], "").strip() or _PUBLIC_BASE[protocol]
    base = base.rstrip("/")
    if protocol == "anthropic":
        # served paths start with /v1; accept the OpenAI-style .../v1 base users give elsewhere
        base = re.sub(r"/v1$", "", base)
    return base


def key_headers(endpoint: Endpoint) -> dict[str, str]:
    """The real key as the provider's SDK sends it (the run's own calls go that way, so these work too)."""
    if not endpoint.api_key:
        return {}
    try:
        if endpoint.provider.protocol == "anthropic":
            import anthropic

            with anthropic.Anthropic(api_key=endpoint.api_key) as sdk:
                sent = sdk.auth_headers
        else:
            import openai

            with openai.OpenAI(api_key=endpoint.api_key) as sdk:
                sent = sdk.auth_headers
        headers = {k.lower(): v for k, v in sent.items()}
        if headers:
            return headers
    except (ImportError, AttributeError):
        pass  # an SDK without auth_headers: the APIs' documented headers
    if endpoint.provider.protocol == "anthropic":
        return {"x-api-key": endpoint.api_key}
    return {"authorization": f"Bearer {endpoint.api_key}"}


class Gateway:
    """HTTP/1.1 on a UNIX socket, served from threads of the harness. Adds the real key, prices, budgets and
    records every model call; refuses anything that is not one."""

    def __init__(self, client: LLMClient, socket_path: Path, *, env: Mapping[str, str] | None = None):
        protocol = client.endpoint.provider.protocol
        if protocol == "local":
            raise LLMSetupError("--provider=local has no LLM gateway: a coding tool needs a hosted provider, "
                                "or --provider=openai-compatible --base-url=URL for a server of your own")
        self.client = client
        self.socket_path = Path(socket_path)
        self.protocol: str = protocol
        self.routes = ROUTES[protocol]
        self.upstream = upstream_base(client.endpoint, env)
        self._key_headers = key_headers(client.endpoint)
        # (method, path) of each request refused as not a model call, for diagnostics
        self.refused: list[tuple[str, str]] = []
        register_secret(client.endpoint.api_key)
        guard_loggers()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._http: httpx.Client | None = None
        self._closed = False
        self._state = threading.Condition()
        self._active = 0  # requests being served
        self._upstream_open: set[Any] = set()  # upstream replies being read, closed by close()

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        """Bind the socket; returns once it accepts connections."""
        if self._server is not None or self._closed:
            raise RuntimeError("a Gateway starts once")
        path = self.socket_path
        size = len(os.fsencode(path))
        if size > 107:
            raise LLMSetupError(f"LLM gateway socket path is {size} bytes, more than a UNIX socket allows (107): "
                                f"{path}")
        if path.is_symlink() or path.exists():
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise LLMSetupError(f"LLM gateway socket path {path} exists and is not a socket")
            path.unlink()  # left by a run that was killed
        settings = self.client.settings
        self._http = httpx.Client(
            timeout=httpx.Timeout(settings.timeout_s, connect=min(30.0, settings.timeout_s)),
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
            follow_redirects=False,
        )
        try:
            self._server = _Server(str(path), _Handler)
        except OSError as exc:
            self._http.close()
            raise LLMSetupError(f"LLM gateway cannot listen on {path}: {exc.strerror or exc}") from None
        self._server.gateway = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fmlbench-llm-gateway", daemon=True)
        self._thread.start()
        log.debug("LLM gateway for %s (%s) on %s -> %s", self.client.provider, self.protocol, path, self.upstream)

    def close(self) -> None:
        """Stop serving and remove the socket; calls in flight end (their tool is gone by now). Idempotent."""
        with self._state:
            if self._closed:
                return
            self._closed = True
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._state:
            for reply in list(self._upstream_open):
                try:
                    reply.close()
                except Exception:  # noqa: BLE001 - a reply torn mid-read: closing is all that is left
                    pass
            # their usage and records land before the run's total is settled
            self._state.wait_for(lambda: self._active == 0, timeout=10.0)
        if self._http is not None:
            self._http.close()
        try:
            if stat.S_ISSOCK(self.socket_path.lstat().st_mode):
                self.socket_path.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self) -> Gateway:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one call ------------------------------------------------------------------------------
    def _serve(self, handler: _Handler) -> None:
        method = handler.command
        target = urlsplit(handler.path)
        api = self.routes.get(target.path) if method == "POST" else None
        if api is None:
            self.refused.append((method, target.path))
            log.debug("LLM gateway refused %s %s", method, target.path)
            handler.drain_body()
            served = " and ".join(f"POST {p}" for p in self.routes)
            return handler.send_json(404, error_body(
                self.protocol, "not_found",
                f"fmlbench LLM gateway: {method} {target.path} is not a model call; it serves {served} only"))
        try:
            raw = handler.read_body()
        except _BadBody as exc:
            return handler.send_json(exc.status, error_body(self.protocol, "invalid_request", str(exc)))
        try:
            body = decode(raw, BODY_LIMITS)
        except ProtocolViolation as exc:
            return handler.send_json(400, error_body(self.protocol, "invalid_request",
                                                     f"fmlbench LLM gateway: {exc}"))
        try:
            self.client.check_budget()
        except RunStopped as exc:
            log.info("LLM gateway refused a call: %s", exc)
            return handler.send_json(403, error_body(self.protocol, "budget",
                                                     f"fmlbench: the run's LLM budget is spent: {exc}"))

        requested = body.get("model")
        changed = False
        if requested != self.client.model:
            body["model"] = self.client.model  # the run's model, whatever the tool asks for
            changed = True
        if api == "chat" and body.get("stream") and not (body.get("stream_options") or {}).get("include_usage"):
            # without it a streamed chat reply carries no usage, and the call could not be priced
            body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
            changed = True
        call = _Call(self, api, target.path, raw, body, None if requested == self.client.model else requested)
        try:
            self._forward(handler, target, json.dumps(body, ensure_ascii=False).encode() if changed else raw, call)
        finally:
            call.settle()

    def _forward(self, handler: _Handler, target, body: bytes, call: _Call) -> None:
        url = self.upstream + (target.path if self.protocol == "anthropic" else target.path[len("/v1"):])
        if target.query:
            url += "?" + target.query
        request = self._http.build_request("POST", url, headers=self._headers(handler), content=body)
        try:
            reply = self._http.send(request, stream=True)
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
            call.error = f"fmlbench LLM gateway: cannot reach {self.client.endpoint.where}: {one_line(exc)}"
            call.settle()
            handler.send_json(502, error_body(self.protocol, "upstream", call.error))
            return
        with self._state:
            self._upstream_open.add(reply)
        try:
            call.status = reply.status_code
            headers = [(k, v) for k, v in reply.headers.multi_items() if k.lower() not in _REPLY_DROP]
            if reply.headers.get("content-type", "").startswith("text/event-stream"):
                call.outcome = handler.send_stream(reply.status_code, headers, self._relay(reply, call))
                return
            try:
                data = reply.read()
            except httpx.HTTPError as exc:
                call.status = 502
                call.error = (f"fmlbench LLM gateway: the reply from {self.client.endpoint.where} broke off: "
                              f"{one_line(exc)}")
                call.settle()
                handler.send_json(502, error_body(self.protocol, "upstream", call.error))
                return
            call.reader.feed_body(data)
            call.settle()  # before the tool has its reply, so its next step sees this call's usage
            handler.send_bytes(reply.status_code, headers, data)
        finally:
            with self._state:
                self._upstream_open.discard(reply)
            reply.close()

    def _relay(self, reply, call: _Call) -> Iterator[bytes]:
        """The stream's events as they complete; the closing ones only once the call is settled."""
        try:
            for chunk in reply.iter_bytes():
                ready = call.reader.feed_stream(chunk)
                if ready:
                    yield ready
        except Exception:
            call.outcome = "upstream cut"
            raise
        call.settle()
        yield call.reader.rest()

    def _headers(self, handler: _Handler) -> dict[str, str]:
        headers = {}
        for name, value in handler.headers.items():
            low = name.lower()
            if low in _HOP or low in _ACCOUNT or _CREDENTIAL.search(low):
                continue
            headers[low] = value
        headers.update(self._key_headers)
        # decoded replies could not be read for usage as they pass
        headers["accept-encoding"] = "identity"
        return headers

    def _enter(self) -> bool:
        with self._state:
            if self._closed:
                return False
            self._active += 1
            return True

    def _leave(self) -> None:
        with self._state:
            self._active -= 1
            self._state.notify_all()


class _Call:
    """One forwarded model call: what it cost and what is recorded of it, settled once."""

    def __init__(self, gateway: Gateway, api: str, path: str, raw: bytes, body: dict[str, Any], requested: Any):
        self.gateway = gateway
        self.path = path
        self.raw = raw
        self.body = body
        self.requested = requested
        self.reader = ReplyReader(api)
        self.started = time.monotonic()
        self.status = 502
        self.error: str | None = None
        self.outcome = "ok"
        self._settled = False

    def settle(self) -> None:
        """Charge the call to the run and record it (once). A reply cut short still cost what its usage
        says; a call answered with an error cost nothing."""
        if self._settled:
            return
        self._settled = True
        latency = time.monotonic() - self.started
        client = self.gateway.client
        got = self.reader.result()
        if 200 <= self.status < 300 or got.usage_known:
            usage = client.prices.usage(client.provider, client.model, input_tokens=got.input_tokens,
                                        output_tokens=got.output_tokens, cached_tokens=got.cached_tokens,
                                        tokens_known=got.usage_known)
            client.account(usage)
        else:
            usage = Usage()
        error = self.error
        if error is None and self.status >= 400:
            error = self.reader.error_message()
        if error is None and self.outcome != "ok":
            error = {"client gone": "the tool closed the connection before the reply ended",
                     "upstream cut": "the provider's reply broke off"}.get(self.outcome, self.outcome)
        log.debug("LLM gateway %s %s: %d in (%d cached) / %d out tokens, %.3fs", self.path, self.status,
                  usage.input_tokens, usage.cached_tokens, usage.output_tokens, latency)
        if client.ledger is None:
            return
        client.ledger.append_gateway(
            body=self.raw, provider=client.provider, model=client.model, path=self.path, status=self.status,
            latency_s=latency, usage=usage, finish_reason=got.finish_reason,
            request=_capped_json(self.body, REQUEST_CAP), text=_capped_text(redact("".join(got.text)), TEXT_CAP),
            tool_calls=_capped_calls(got.tool_calls), error=None if error is None else redact(error)[:500],
            requested_model=None if self.requested is None else str(self.requested)[:200],
        )


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    block_on_close = False  # close() waits for calls itself, with a bound
    request_queue_size = 64
    gateway: Gateway


class _BadBody(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 900  # an idle kept-alive connection is let go eventually

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # each call is logged once, by the gateway

    def address_string(self) -> str:
        return "llm.sock"  # a UNIX socket's peer has no address

    def _dispatch(self) -> None:
        gateway = self.server.gateway
        if not gateway._enter():
            self.close_connection = True
            return self.send_json(503, error_body(gateway.protocol, "upstream", "fmlbench LLM gateway: closing"))
        try:
            gateway._serve(self)
        except Exception as exc:  # noqa: BLE001 - one call's failure must not end the gateway or leak a trace
            log.warning("LLM gateway: %s %s failed: %s: %s", self.command, urlsplit(self.path).path,
                        type(exc).__name__, one_line(exc))
            self.close_connection = True
        finally:
            gateway._leave()

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    # -- reading -------------------------------------------------------------------------------
    def read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            self.close_connection = True
            raise _BadBody(400, "fmlbench LLM gateway: bad content-length") from None
        if length > MAX_BODY:
            self.close_connection = True
            raise _BadBody(413, f"fmlbench LLM gateway: a request of {length} bytes is over the limit ({MAX_BODY})")
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked(self) -> bytes:
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip() or b"x", 16)
            except ValueError:
                self.close_connection = True
                raise _BadBody(400, "fmlbench LLM gateway: bad chunked request body") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                self.close_connection = True
                raise _BadBody(413, f"fmlbench LLM gateway: a request over {MAX_BODY} bytes is over the limit")
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def drain_body(self) -> None:
        """Read a refused request's body, so the connection can carry the next request."""
        try:
            self.read_body()
        except _BadBody:
            pass

    # -- answering -----------------------------------------------------------------------------
    def send_json(self, status: int, payload: dict[str, Any]) -> None:
        self.send_bytes(status, [("content-type", "application/json")], json.dumps(payload).encode())

    def send_bytes(self, status: int, headers: list[tuple[str, str]], data: bytes) -> None:
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:
            self.close_connection = True  # the tool went away: nothing to answer

    def send_stream(self, status: int, headers: list[tuple[str, str]], chunks: Iterator[bytes]) -> str:
        """Pass a stream through, each chunk as it arrives; says how it ended."""
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
        except OSError:
            self.close_connection = True
            return "client gone"
        try:
            for chunk in chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
        except OSError as exc:
            self.close_connection = True
            if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
                return "client gone"
            return "upstream cut"
        except Exception:  # noqa: BLE001 - httpx errors, or a reply closed under us by close()
            # no closing chunk: the tool sees a broken reply, not a short one
            self.close_connection = True
            return "upstream cut"
        try:
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True
            return "client gone"
        return "ok"


def error_body(protocol: str, kind: str, message: str) -> dict[str, Any]:
    """An error in the provider's own shape, which the tool's SDK turns into a readable message."""
    if protocol == "anthropic":
        kinds = {"not_found": "not_found_error", "invalid_request": "invalid_request_error",
                 "budget": "permission_error", "upstream": "api_error"}
        return {"type": "error", "error": {"type": kinds[kind], "message": message}}
    kinds = {"not_found": ("invalid_request_error", "not_found"), "invalid_request": ("invalid_request_error", None),
             "budget": ("permission_error", "budget_exceeded"), "upstream": ("server_error", None)}
    kind_type, code = kinds[kind]
    return {"error": {"message": message, "type": kind_type, "param": None, "code": code}}


# -- what a record keeps -----------------------------------------------------------------------------
def _capped_json(value: Any, cap: int) -> Any:
    """The request, without keys, and no longer than ``cap`` characters: over it, its head and its tail
    (a coding tool resends the whole conversation, so the newest turn is at the end)."""
    text = redact(json.dumps(value, ensure_ascii=False))
    if len(text) <= cap:
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text  # masking a key cut through a JSON escape
    head = cap // 4
    return {"truncated": True, "chars": len(text), "head": text[:head], "tail": text[len(text) - (cap - head):]}


def _capped_text(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    head = cap // 4
    return f"{text[:head]}\n[... {len(text) - cap} characters left out ...]\n{text[len(text) - (cap - head):]}"


def _capped_calls(calls: list[dict[str, str]]) -> list[dict[str, str]]:
    out, room = [], TEXT_CAP
    for call in calls:
        arguments = _capped_text(redact(call["arguments"]), max(200, room))
        room -= len(arguments)
        out.append({"name": call["name"][:200], "arguments": arguments})
    return out
