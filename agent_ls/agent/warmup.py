"""Loading the agent core and the model SDK before the first ask needs them.

Everything here blocks and runs in worker threads. The imports share the GIL with the thread
that answers the editor, so while they run the interpreter switches threads more often
(:func:`responsive_while`): a request that arrives mid-import waits for about a millisecond
of someone else's bytecode instead of the default five, several times per round trip.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import logging
import os
import sys
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)

CORE_MODULES = ("agent_ls.settings", "agent_ls.agent.loop")
SWITCH_INTERVAL = 0.001  # seconds; CPython's default is 0.005
GC_PAUSE_LIMIT = 60.0  # seconds

_busy = 0
_busy_lock = threading.Lock()
_default_interval = sys.getswitchinterval()


@contextlib.contextmanager
def responsive_while() -> Iterator[None]:
    """Shorten the GIL switch interval while a background import runs (nested: counted)."""
    global _busy
    with _busy_lock:
        _busy += 1
        if _busy == 1:
            sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        with _busy_lock:
            _busy -= 1
            if _busy == 0:
                sys.setswitchinterval(_default_interval)


def pause_gc() -> None:
    """No cyclic garbage collection while the start-up imports run (call at process start).

    Importing the SDKs allocates a few hundred thousand long-lived objects; the collector
    walks them again and again as they arrive, 10-20 % of the import time, for nothing.
    """
    gc.disable()
    # A front door whose warm-up never runs (no `initialized`) must not go without forever.
    timer = threading.Timer(GC_PAUSE_LIMIT, settle_gc)
    timer.daemon = True
    timer.start()


def settle_gc() -> None:
    """After the imports: move what they built out of the collector's sight (``gc.freeze``:
    later collections, which stall the event loop, skip it) and collect again. Idempotent."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def import_core() -> None:
    """The modules every ask needs (the loop, the settings' pydantic models)."""
    with responsive_while():
        for name in CORE_MODULES:
            importlib.import_module(name)


def prepare_model(spec: str) -> None:
    """Import and warm the SDK of the model ``spec`` names (nothing for ``script:``)."""
    from agent_ls.models import load_model
    from agent_ls.models.sdk import SdkModel

    with responsive_while():
        model = load_model(spec)
        if isinstance(model, SdkModel):
            model.prepare_sdk()


def start_model_worker(spec: str | None = None) -> None:
    """Start the model worker process (:mod:`agent_ls.models.remote`) warming ``spec``
    (default: ``AGENT_LS_MODEL``, else the default model) if that is an SDK model.

    At server start, before the settings are known: the model is almost always the one the
    environment names, and if the settings name another the warm-up asks the worker for it
    too. A failure is left for the first ask to report.
    """
    from agent_ls import DEFAULT_MODEL
    from agent_ls.models import remote

    try:
        remote.start_early(spec or os.environ.get("AGENT_LS_MODEL") or DEFAULT_MODEL)
    except OSError as exc:
        log.info("could not start the model worker: %s", exc)


def preload_in_background(spec: str | None = None) -> threading.Thread:
    """Start loading the core and the SDK of ``spec`` (default: the model the settings name
    without initialization options: ``AGENT_LS_MODEL``, else the default) now, in a daemon
    thread.

    For a server whose client will ask at once (``agent-ls run``): the imports start at
    process start instead of after ``initialized``. An SDK model warms in the model worker,
    which ``serve`` has started already (:func:`start_model_worker`); with the worker off, the
    SDK is imported here after the core. Anything that fails here is left for the first ask
    to report.
    """
    from agent_ls import DEFAULT_MODEL
    from agent_ls.models import remote

    spec = spec or os.environ.get("AGENT_LS_MODEL") or DEFAULT_MODEL
    in_worker = remote.enabled()

    def work() -> None:
        try:
            import_core()
            if not in_worker:
                prepare_model(spec)
        except Exception as exc:
            log.info("preload failed: %s", exc)

    thread = threading.Thread(target=work, name="agent-ls-preload", daemon=True)
    thread.start()
    return thread
