"""A fake model API on 127.0.0.1 speaking the Anthropic and OpenAI streaming wire formats.

``POST /v1/messages`` answers Anthropic SSE (``event:`` + ``data:`` records, pings included);
``POST /v1/chat/completions`` answers OpenAI SSE chunks ending in ``data: [DONE]``. Both also
answer non-streaming requests with one JSON object. A request the real API would refuse gets
the real API's 400 with its error body instead (:mod:`tests.fakeapi.validate`). Responses come
from a FIFO queue of scripted :class:`Turn`\\ s and :class:`Fault`\\ s shared by both
endpoints; an empty queue answers ``Turn(text="(no scripted response)")`` so a test fails
visibly instead of hanging.

Streams use chunked transfer encoding, so a cut stream (:meth:`Fault.cut_stream`) looks to the
client like a real dropped connection (an incomplete chunked body), or with ``clean=True`` like
a body that ends before ``message_stop``.

Standalone: ``python -m tests.fakeapi.server --script turns.json [--port N] [--repeat]`` prints
its base URL on stdout and serves until interrupted. The script is a JSON list of turn objects
(``{"text": ..., "tool_uses": [{"name": ..., "input": {...}}], "thinking": ..., "usage": {...}}``)
or fault objects (``{"fault": "status", "status": 429, "retry_after": 1}``,
``{"fault": "cut_stream", "after_events": 3}``, ``{"fault": "error_event"}``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import socket
import ssl
import sys
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from tests.fakeapi import validate
from tests.fakeapi.validate import ThinkingBindings
from tests.fakeapi.wire import (
    Fault,
    RecordedRequest,
    Response,
    SSERecord,
    Turn,
    anthropic_message,
    anthropic_records,
    load_script,
    openai_completion,
    openai_records,
)

# --- server ------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # As a real API's server does: without it Nagle holds each small SSE record until the
        # previous one is ACKed, and the client's delayed ACK turns that into ~40 ms stalls
        # on every response of a reused (keep-alive) connection.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._json(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        fake = self.server.fake
        fake._enter()
        try:
            self._post(fake)
        finally:
            fake._leave()

    def _post(self, fake: FakeAPI) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        request = RecordedRequest(
            "POST", path, {k.lower(): v for k, v in self.headers.items()}, body
        )
        fake._record(request)
        if path.endswith("/messages"):
            protocol: Literal["anthropic", "openai"] = "anthropic"
        elif path.endswith("/chat/completions"):
            protocol = "openai"
        else:
            self._json(404, {"error": {"type": "not_found_error", "message": f"no route {path}"}})
            return
        if fake.validate and self._refused(request, protocol):
            return
        response = fake._next_response()
        if isinstance(response, Turn) and response.latency:
            time.sleep(response.latency)
        b = body if isinstance(body, dict) else {}
        model = str(b.get("model", "fake-model"))
        msg_id = fake._new_id("msg_fake_" if protocol == "anthropic" else "chatcmpl-fake")
        if isinstance(response, Fault) and response.kind == "status":
            headers = dict(response.headers)
            if response.retry_after is not None:
                headers["retry-after"] = f"{response.retry_after:g}"
            self._json(response.status_code, response.error_body(protocol), headers)
            return
        turn = (
            response
            if isinstance(response, Turn)
            else (
                response.turn
                or Turn(text="this partial answer is cut off before the turn completes")
            )
        )
        if protocol == "anthropic" and turn.thinking is not None:
            thinking = turn.thinking if isinstance(turn.thinking, str) else "".join(turn.thinking)
            fake.bindings.record(b, thinking, turn.signature)
        if not b.get("stream"):
            if protocol == "anthropic":
                self._json(200, anthropic_message(turn, model, msg_id, fake._tool_ids))
            else:
                self._json(200, openai_completion(turn, model, msg_id, fake._tool_ids))
            return
        if protocol == "anthropic":
            records = anthropic_records(turn, model, msg_id, fake._tool_ids)
        else:
            opts = b.get("stream_options") or {}
            records = openai_records(
                turn, model, msg_id, fake._tool_ids, bool(opts.get("include_usage"))
            )
        delay = turn.chunk_delay if turn.chunk_delay is not None else fake.chunk_delay
        self._stream(records, response if isinstance(response, Fault) else None, protocol, delay)

    def _refused(self, request: RecordedRequest, protocol: Literal["anthropic", "openai"]) -> bool:
        """Answer 400 as the real API does when it would refuse ``request`` (the scripted
        response stays queued for the next request)."""
        fake = self.server.fake
        error: dict[str, Any]
        if protocol == "anthropic":
            retired = validate.retired_model(request.body)
            if retired is not None:
                self.server.fake._reject(request, retired)
                self._json(
                    404,
                    {"type": "error", "error": {"type": "not_found_error", "message": retired}},
                )
                return True
            message = validate.anthropic_request(request.body) or fake.bindings.check(
                request.body
            )
            if message is None:
                return False
            error = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": message},
            }
        else:
            problem = validate.openai_request(request.body)
            if problem is None:
                return False
            message, param = problem
            error = {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": param,
                    "code": None,
                }
            }
        self.server.fake._reject(request, message)
        self._json(400, error)
        return True

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", self.server.fake._new_id("req_fake_"))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _stream(
        self,
        records: list[SSERecord],
        fault: Fault | None,
        protocol: Literal["anthropic", "openai"],
        delay: float,
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", self.server.fake._new_id("req_fake_"))
        self.end_headers()
        limit = fault.after_events if fault is not None else len(records)
        try:
            self.wfile.flush()
            for event, data in records[:limit]:
                if delay:
                    time.sleep(delay)
                self._write_record(event, data)
            if fault is not None and fault.kind == "error_event":
                body = fault.error_body(protocol)
                self._write_record("error" if protocol == "anthropic" else None, body)
            elif fault is not None and not fault.clean:
                self.close_connection = True  # drop it without the terminating chunk
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            self.server.fake._client_gone()

    def _write_record(self, event: str | None, data: Any) -> None:
        payload = data if isinstance(data, str) else json.dumps(data)
        text = (f"event: {event}\n" if event else "") + f"data: {payload}\n\n"
        raw = text.encode()
        self.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeAPI

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that hung up (a cancelled stream) is not a server error
        super().handle_error(request, client_address)


class FakeAPI:
    """The scripted fake API server. Thread-safe; usable as a context manager.

    ``chunk_delay`` is the default delay (seconds) before each SSE record. With ``validate``
    (the default) a request the real API would refuse (:mod:`tests.fakeapi.validate`) gets its
    400 and lands in :attr:`rejections`; test fixtures assert that list is empty at the end.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        chunk_delay: float = 0.0,
        validate: bool = True,
        tls: tuple[str, str] | None = None,
    ):
        self.chunk_delay = chunk_delay
        self.tls = tls  # (certificate file, key file): served over HTTPS
        self.validate = validate
        self.rejections: list[tuple[RecordedRequest, str]] = []
        self.bindings = ThinkingBindings()
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._queue: deque[Response] = deque()
        self._cycle: list[Response] = []
        self._requests: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._tool_ids = itertools.count(1)
        self._gone = threading.Condition(self._lock)
        self.disconnects = 0
        self.in_flight = 0
        self.peak_in_flight = 0  # the most requests answered at the same time
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    handler: type[_Handler] = _Handler  # a subclass may stamp or log what it sends

    def start(self) -> FakeAPI:
        if self._server is None:
            self._server = _Server((self._host, self._port), self.handler)
            self._server.fake = self
            if self.tls is not None:
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(*self.tls)
                self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="fakeapi",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL (``http://127.0.0.1:PORT``); OpenAI clients want ``url + "/v1"``."""
        if self._server is None:
            raise RuntimeError("FakeAPI is not started")
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host!s}:{port}"

    # scripting
    def enqueue(self, *responses: Response) -> FakeAPI:
        """Queue turns/faults; each request consumes the next one."""
        with self._lock:
            self._queue.extend(responses)
        return self

    def repeat(self, responses: list[Response]) -> FakeAPI:
        """Answer ``responses`` in a cycle whenever the queue is empty."""
        with self._lock:
            self._cycle = list(responses)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy), oldest first."""
        with self._lock:
            return list(self._requests)

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def wait_disconnect(self, count: int = 1, timeout: float = 2.0) -> bool:
        """Wait until ``count`` streams have seen their client go away mid-stream."""
        with self._gone:
            return self._gone.wait_for(lambda: self.disconnects >= count, timeout)

    # used by the handler
    def _enter(self) -> None:
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _reject(self, request: RecordedRequest, message: str) -> None:
        with self._lock:
            self.rejections.append((request, message))

    def _next_response(self) -> Response:
        with self._lock:
            if not self._queue and self._cycle:
                self._queue.extend(self._cycle)
            return self._queue.popleft() if self._queue else Turn(text="(no scripted response)")

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}{next(self._ids)}"

    def _client_gone(self) -> None:
        with self._gone:
            self.disconnects += 1
            self._gone.notify_all()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakeapi.server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--script", help="JSON list of turns/faults to answer in order")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds per SSE record")
    parser.add_argument("--repeat", action="store_true", help="cycle the script forever")
    parser.add_argument(
        "--no-validate", action="store_true", help="answer requests the real API would refuse"
    )
    args = parser.parse_args(argv)
    api = FakeAPI(
        host=args.host,
        port=args.port,
        chunk_delay=args.chunk_delay,
        validate=not args.no_validate,
    )
    if args.script:
        script = load_script(args.script)
        if args.repeat:
            api.repeat(script)
        else:
            api.enqueue(*script)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    with api:
        print(api.url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            done.wait()
    print(f"served {len(api.requests)} requests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
