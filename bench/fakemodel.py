"""The fake Anthropic/OpenAI API (``tests.fakeapi``) in its own process, with send times.

``python -m bench.fakemodel --script turns.json [--repeat] [--chunk-delay S]`` prints its base
URL, then one JSON line per SSE record it sends: ``{"t": <CLOCK_MONOTONIC seconds after the
flush>, "req": <request number>, "event": ..., "text": <text delta or null>}``. Running it in
its own process keeps its threads off the benchmark client's GIL; :class:`FakeModel` starts it
and collects the lines.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from bench.stats import now

REPO = Path(__file__).resolve().parents[1]


def serve(argv: list[str] | None = None) -> int:
    from tests.fakeapi import FakeAPI, load_script
    from tests.fakeapi.server import _Handler

    parser = argparse.ArgumentParser(prog="python -m bench.fakemodel")
    parser.add_argument("--script", required=True)
    parser.add_argument("--repeat", action="store_true")
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    out_lock = threading.Lock()
    requests = [0]

    class StampedHandler(_Handler):
        def do_POST(self) -> None:
            with out_lock:
                requests[0] += 1
            super().do_POST()

        def _write_record(self, event: str | None, data: Any) -> None:
            super()._write_record(event, data)
            stamp = now()
            text = None
            if isinstance(data, dict):
                delta = data.get("delta")
                if isinstance(delta, dict) and delta.get("type") == "text_delta":
                    text = delta.get("text")
                choices = data.get("choices")
                if isinstance(choices, list) and choices:
                    text = (choices[0].get("delta") or {}).get("content")
            line = json.dumps({"t": stamp, "req": requests[0], "event": event, "text": text})
            with out_lock:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

    class StampedAPI(FakeAPI):
        handler = StampedHandler

    api = StampedAPI(chunk_delay=args.chunk_delay)
    script = load_script(args.script)
    if args.repeat:
        api.repeat(script)
    else:
        api.enqueue(*script)
    with api:
        print(api.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
    return 0


class FakeProcess:
    """A fake API in its own process: it prints its base URL, then one JSON line per record,
    which are collected here; closing its stdin stops it."""

    def __init__(self, argv: list[str]) -> None:
        self.records: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self.proc = subprocess.Popen(
            argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http"):
            raise RuntimeError("the fake API did not start")
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            record = json.loads(line)
            with self._cond:
                self.records.append(record)
                self._cond.notify_all()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> FakeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FakeModel(FakeProcess):
    """Starts ``bench.fakemodel`` on ``script`` and collects its stamped records."""

    def __init__(self, script: list[dict[str, Any]], workdir: Path, chunk_delay: float = 0.0):
        path = workdir / "fake-script.json"
        path.write_text(json.dumps(script), encoding="utf-8")
        argv = [sys.executable, "-m", "bench.fakemodel", "--script", str(path), "--repeat"]
        super().__init__([*argv, "--chunk-delay", str(chunk_delay)])

    def request_records(self, req: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """The records of request ``req`` (1-based) once its ``message_stop`` was sent."""

        def done() -> bool:
            return any(r["req"] == req and r["event"] == "message_stop" for r in self.records)

        with self._cond:
            if not self._cond.wait_for(done, timeout):
                raise TimeoutError(f"the fake API did not finish request {req}")
            return [r for r in self.records if r["req"] == req]


if __name__ == "__main__":
    sys.exit(serve())
