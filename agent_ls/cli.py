"""The ``agent-ls`` command line: serve, acp, run, demo, check-command, mcp, sessions,
remember, undo."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from agent_ls import __version__


def _serve(args: argparse.Namespace) -> int:
    from agent_ls.agent.warmup import pause_gc

    pause_gc()  # until the warm-up has loaded the SDK (AgentService.warm)
    _setup_logging(args)
    logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.root.level))
    from agent_ls.agent.warmup import start_model_worker

    # First: the SDK's import is the longest wait of the first ask, and it runs elsewhere.
    start_model_worker()
    from agent_ls.safety.sandbox import probe_in_background

    # While pygls loads: the workspace is not known yet, but the bwrap found on PATH is almost
    # always the one it will use (one inside the workspace is skipped, and probed later).
    probe_in_background()
    if args.preload:  # the client asks at once: load the SDK while pygls loads
        from agent_ls.agent.warmup import preload_in_background

        preload_in_background()
    from agent_ls.lsp.attrs_replay import lsprotocol_from_caches

    with lsprotocol_from_caches():  # lsprotocol's classes, as a former start recorded them
        from agent_ls.lsp.server import server

    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        if not port.isdigit():
            print(f"agent-ls serve: --tcp takes HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        server.start_tcp(host or "127.0.0.1", int(port))
    else:
        server.start_io()
    return 0


def _setup_logging(args: argparse.Namespace) -> None:
    handler: logging.Handler = (
        logging.FileHandler(args.log_file) if args.log_file else logging.StreamHandler(sys.stderr)
    )
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper(), logging.WARNING),
        handlers=[handler],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def _acp_settings(args: argparse.Namespace) -> dict[str, object] | None:
    """``--settings`` (a JSON object, or a file holding one) with ``--model``/``--mode`` on top."""
    raw: dict[str, object] = {}
    if args.settings:
        text = args.settings
        if not text.lstrip().startswith("{"):
            text = Path(text).expanduser().read_text(encoding="utf-8")
        loaded = json.loads(text)
        if not isinstance(loaded, dict):
            raise ValueError("--settings must be a JSON object")
        raw.update(loaded)
    if args.model:
        raw["model"] = args.model
    if args.mode:
        raw["mode"] = args.mode
    return raw or None


def _acp(args: argparse.Namespace) -> int:
    _setup_logging(args)
    try:
        settings = _acp_settings(args)
    except (OSError, ValueError) as exc:
        print(f"agent-ls acp: --settings: {exc}", file=sys.stderr)
        return 2
    from agent_ls.agent.warmup import start_model_worker

    model = (settings or {}).get("model")
    start_model_worker(model if isinstance(model, str) else None)  # as `serve`: first
    import asyncio

    from agent_ls.acp.main import serve  # imports acp (in a thread): only when `acp` runs

    asyncio.run(serve(settings))
    return 0


def _workspace(args: argparse.Namespace, command: str) -> Path | None:
    """``--cwd`` resolved, or None after saying why it is not a folder (a usage error)."""
    cwd = Path(args.cwd).expanduser().resolve()
    if cwd.is_dir():
        return cwd
    print(f"agent-ls {command}: --cwd {args.cwd} is not a directory", file=sys.stderr)
    return None


def _policy(args: argparse.Namespace) -> str:
    if args.yes:
        return "yes"
    if args.no:
        return "no"
    return "ask" if sys.stdin.isatty() and sys.stderr.isatty() else "no"


def _run(args: argparse.Namespace) -> int:
    if args.resume:
        from agent_ls.agent.store import SessionStore

        if not SessionStore.default().exists(args.resume):
            print(
                f"agent-ls run: no saved session {args.resume!r} ('agent-ls sessions' lists them)",
                file=sys.stderr,
            )
            return 1
    prompt = " ".join(args.prompt).strip()
    if prompt == "-" or (not prompt and not sys.stdin.isatty()):
        prompt = sys.stdin.read().strip()
    if not prompt:
        print("agent-ls run: give a prompt (or - to read it from stdin)", file=sys.stderr)
        return 2
    cwd = _workspace(args, "run")
    if cwd is None:
        return 2
    import gc

    from agent_ls.client.spawn import spawn_server

    # The server starts (and loads the model SDK) while this process imports the client;
    # both are forked from this interpreter where they can be (agent_ls.forking).
    server = spawn_server(cwd, args.model, preload=True, main=main)
    gc.disable()  # for the imports only (see agent.warmup.pause_gc)
    from agent_ls.client.headless import RunOptions, run_headless

    gc.freeze()
    gc.enable()

    options = RunOptions(
        prompt=prompt,
        cwd=cwd,
        policy=_policy(args),  # type: ignore[arg-type]
        model=args.model,
        session_id=args.resume,
        mode=args.mode,
        sandbox=args.sandbox,
        json_output=args.json,
        quiet=args.quiet,
        checker=args.checker,
    )
    try:
        return run_headless(options, server)
    finally:
        from agent_ls.client.spawn import reap_workers

        reap_workers()


DEMO_PROMPT = "The average() helper in stats.py crashes on an empty list. Fix it and run the tests."


def _demo(args: argparse.Namespace) -> int:
    # Imported here: every command pays for what this module imports before it forks.
    import shutil
    import tempfile
    from importlib import resources

    from agent_ls.client.headless import RunOptions, run_headless

    demo = resources.files("agent_ls") / "demo"
    target = Path(tempfile.mkdtemp(prefix="agent-ls-demo-"))
    with resources.as_file(demo / "project") as project:
        shutil.copytree(project, target, dirs_exist_ok=True)
    script_dir = Path(tempfile.mkdtemp(prefix="agent-ls-demo-script-"))
    with resources.as_file(demo / "script.json") as script:
        shutil.copy(script, script_dir / "script.json")
    print(f"agent-ls demo: an offline run with the scripted model in {target}", file=sys.stderr)
    print(f"> {DEMO_PROMPT}", file=sys.stderr)
    options = RunOptions(
        prompt=DEMO_PROMPT,
        cwd=target,
        policy="yes",
        model=f"script:{script_dir / 'script.json'}",
        quiet=False,
    )
    try:
        code = run_headless(options)
    finally:
        shutil.rmtree(script_dir, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(target, ignore_errors=True)
    if args.keep:
        print(f"\nThe edited project is in {target}", file=sys.stderr)
    else:
        print("\n(The demo's copy was removed; `agent-ls demo --keep` keeps it.)", file=sys.stderr)
    return code


def _warm(args: argparse.Namespace) -> int:
    from agent_ls import DEFAULT_MODEL
    from agent_ls.client import warm

    directory = warm.socket_dir(create=not (args.status or args.stop))
    if directory is None and not (args.status or args.stop):
        print(
            "agent-ls warm: no private folder for the socket (set XDG_RUNTIME_DIR)",
            file=sys.stderr,
        )
        return 1
    if args.status or args.stop:
        found = warm.running(directory) if directory is not None else []
        mine = warm.socket_path(directory, warm.fingerprint()) if directory else None
        for path, status in found:
            if args.stop:
                warm.ask(path, "stop")
            use = "used by runs" if path == mine else "another installation's: not used"
            print(
                f"{'stopped' if args.stop else 'running'}: pid {status.get('pid')} ({use}, "
                f"{status.get('model') or 'no model'} loaded), "
                f"{status.get('served')} runs served, {status.get('running')} running now, "
                f"exits after {float(status.get('idle', 0)):.0f} s unused"
            )
        if not found:
            print("agent-ls warm: none running")
        return 0 if found or args.stop else 1
    spec = args.model or os.environ.get("AGENT_LS_MODEL") or DEFAULT_MODEL
    if args.foreground:
        def ready(path: str) -> None:
            print(f"ready {path}", flush=True)
            if not sys.stdout.isatty():  # whoever waited for that line stops reading
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.close(null)

        return warm.serve_warm(main, spec, args.idle, ready)
    from agent_ls.dirs import data_dir

    try:
        socket = warm.start_in_background(spec, args.idle, data_dir() / "warm.log")
    except OSError as exc:
        print(f"agent-ls warm: {exc}", file=sys.stderr)
        return 1
    print(f"agent-ls warm: ready ({spec}); runs fork from it until {args.idle:.0f} s unused "
          f"(socket {socket})")
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from agent_ls.client.headless import RunOptions, list_mcp_headless

    cwd = _workspace(args, "mcp")
    if cwd is None:
        return 2
    options = RunOptions(
        prompt="", cwd=cwd, policy=_policy(args), json_output=args.json  # type: ignore[arg-type]
    )
    return list_mcp_headless(options)


def _rules_file(path: Path) -> dict[str, list[str]]:
    """The ``permissions`` of a settings.json, or nothing when it is absent or unreadable."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    perms = raw.get("permissions") if isinstance(raw, dict) else None
    if not isinstance(perms, dict):
        return {}
    return {
        k: [r for r in v if isinstance(r, str)]
        for k, v in perms.items()
        if k in ("allow", "ask", "deny") and isinstance(v, list)
    }


def _check_command(args: argparse.Namespace) -> int:
    from agent_ls.safety.check import check_command
    from agent_ls.settings import PermissionRules, user_config_dir

    command = " ".join(args.command)
    if not command.strip():
        print("agent-ls check-command: give a command to classify", file=sys.stderr)
        return 2
    cwd = _workspace(args, "check-command")
    if cwd is None:
        return 2
    merged: dict[str, list[str]] = {"allow": [], "ask": [], "deny": []}
    for kind, rules in _rules_file(user_config_dir() / "settings.json").items():
        merged[kind] += rules
    # A repository cannot allow its own commands: the project's deny and ask rules only.
    for kind, rules in _rules_file(cwd / ".agent-ls" / "settings.json").items():
        merged[kind] += rules if kind != "allow" else []
    print(json.dumps(check_command(command, cwd, PermissionRules(**merged))))
    return 0


def _sessions(args: argparse.Namespace) -> int:
    from agent_ls.agent.store import SessionStore

    rows = SessionStore.default().list()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("No saved sessions.")
        return 0
    for row in rows:
        where = f"  [{row['workspace']}]" if row.get("workspace") else ""
        print(f"{row['sessionId']}  {row['updated']}  {row['title']}{where}")
    return 0


def _remember(args: argparse.Namespace) -> int:
    from agent_ls.agent.memory import remember

    cwd = _workspace(args, "remember")
    if cwd is None:
        return 2
    try:
        path, line = remember(cwd, " ".join(args.text))
    except ValueError as exc:
        print(f"agent-ls remember: {exc}", file=sys.stderr)
        return 2
    print(f"{path}: {line}")
    return 0


def _undo(args: argparse.Namespace) -> int:
    from agent_ls.agent.store import SessionStore
    from agent_ls.client.headless import RunOptions, run_headless

    cwd = _workspace(args, "undo")
    if cwd is None:
        return 2
    store = SessionStore.default()
    session_id = args.session
    if session_id is None:
        # The newest session whose last run changed files in this workspace (and only here).
        for row in store.list():
            files = store.load_journal(str(row["sessionId"]))
            if files and all(Path(p).is_relative_to(cwd) for p in files):
                session_id = str(row["sessionId"])
                break
        if session_id is None:
            print(f"agent-ls undo: no saved run changed files in {cwd}", file=sys.stderr)
            return 1
    elif not store.exists(session_id):
        print(f"agent-ls undo: unknown session {session_id!r}", file=sys.stderr)
        return 2
    print(f"agent-ls undo: session {session_id}", file=sys.stderr)
    options = RunOptions(
        prompt="",
        cwd=cwd,
        policy=_policy(args),  # type: ignore[arg-type]
        session_id=session_id,
        json_output=args.json,
        quiet=True,
        undo=True,
    )
    return run_headless(options)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors exit 2 with a clear line
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line. Given the ``command`` about to run, only its subcommand is built:
    `agent-ls run` builds its parser before it forks the server, and the forked server builds
    one again, each on the way to the first request (all of them: ~3 ms, one: ~0.3 ms)."""
    parser = _Parser(prog="agent-ls", description="A coding agent inside your editor, over LSP.")
    parser.add_argument("--version", action="version", version=f"agent-ls {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    for name, add in _COMMANDS.items():
        if command is None or command == name:
            add(sub)
    return parser


def _add_serve(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the language server (stdio by default)")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    serve.add_argument("--stdio", action="store_true", help="use stdio (the default)")
    serve.add_argument(
        "--log-file",
        default=os.environ.get("AGENT_LS_LOG_FILE"),
        help="write logs here instead of stderr (env AGENT_LS_LOG_FILE)",
    )
    serve.add_argument(
        "--log-level",
        default=os.environ.get("AGENT_LS_LOG_LEVEL", "warning"),
        help="debug, info, warning, error (env AGENT_LS_LOG_LEVEL)",
    )
    # Used by `agent-ls run`, whose first request comes at once; an editor's server loads
    # the SDK after `initialized`, so that `initialize` is answered first.
    serve.add_argument("--preload", action="store_true", help=argparse.SUPPRESS)
    serve.set_defaults(func=_serve)


def _add_acp(sub: Any) -> None:
    acp = sub.add_parser("acp", help="speak the Agent Client Protocol on stdio (Zed, JetBrains...)")
    acp.add_argument("--model", "-m", help="anthropic:<model>, openai:<model> or script:<path>")
    acp.add_argument("--mode", choices=["default", "acceptEdits", "plan", "bypassPermissions"])
    acp.add_argument(
        "--settings",
        metavar="JSON|FILE",
        help="the settings object (as the editors' `agent` section), inline or in a file",
    )
    acp.add_argument(
        "--log-file",
        default=os.environ.get("AGENT_LS_LOG_FILE"),
        help="write logs here instead of stderr (env AGENT_LS_LOG_FILE)",
    )
    acp.add_argument(
        "--log-level",
        default=os.environ.get("AGENT_LS_LOG_LEVEL", "warning"),
        help="debug, info, warning, error (env AGENT_LS_LOG_LEVEL)",
    )
    acp.set_defaults(func=_acp)


def _add_run(sub: Any) -> None:
    run = sub.add_parser("run", help="run one prompt headless, as an LSP client of the server")
    run.add_argument("prompt", nargs="*", help="the prompt (- reads stdin)")
    decide = run.add_mutually_exclusive_group()
    decide.add_argument("--yes", "-y", action="store_true", help="accept every edit and command")
    decide.add_argument("--no", "-n", action="store_true", help="deny every edit and command")
    run.add_argument("--model", "-m", help="anthropic:<model>, openai:<model> or script:<path>")
    run.add_argument("--cwd", default=".", help="the workspace folder (default: .)")
    run.add_argument("--resume", metavar="SESSION_ID", help="continue a saved session")
    run.add_argument("--mode", choices=["default", "acceptEdits", "plan", "bypassPermissions"])
    run.add_argument(
        "--sandbox",
        choices=["auto", "on", "off"],
        help="run shell commands in bubblewrap: auto (when it works, the default), on, off",
    )
    run.add_argument("--json", action="store_true", help="print the result object as JSON")
    run.add_argument(
        "--checker",
        default=os.environ.get("AGENT_LS_CHECKER"),
        metavar="CMD",
        help="a command whose 'path:line:col: message' output serves as the editor's "
        'diagnostics, e.g. "ruff check --output-format=concise {file}" (env AGENT_LS_CHECKER)',
    )
    run.add_argument("--quiet", "-q", action="store_true", help="print only the answer")
    run.set_defaults(func=_run)


def _add_warm(sub: Any) -> None:
    warm = sub.add_parser(
        "warm", help="keep a warmed-up server in the background for `agent-ls run` to fork"
    )
    warm.add_argument("--model", "-m", help="the model whose SDK to load (default: as `run`)")
    warm.add_argument(
        "--idle", type=float, default=900.0, metavar="SECONDS",
        help="exit after this long without a run (default 900)",
    )
    warm_do = warm.add_mutually_exclusive_group()
    warm_do.add_argument("--status", action="store_true", help="list the running ones")
    warm_do.add_argument("--stop", action="store_true", help="stop them (runs in flight finish)")
    warm_do.add_argument(
        "--foreground", action="store_true", help="serve in this process (logs to stderr)"
    )
    warm.set_defaults(func=_warm)


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser("demo", help="an offline run on a bundled example project")
    demo.add_argument("--keep", action="store_true", help="keep the edited copy of the project")
    demo.set_defaults(func=_demo)


def _add_check_command(sub: Any) -> None:
    check = sub.add_parser(
        "check-command", help="the agent's verdict on a shell command (allow, ask, deny) as JSON"
    )
    check.add_argument("--cwd", default=".", help="the workspace folder (default: .)")
    check.add_argument("command", nargs=argparse.REMAINDER, help="the command line")
    check.set_defaults(func=_check_command)


def _add_mcp(sub: Any) -> None:
    mcp = sub.add_parser("mcp", help="list the MCP servers (and their tools) for a workspace")
    mcp_decide = mcp.add_mutually_exclusive_group()
    mcp_decide.add_argument("--yes", "-y", action="store_true", help="approve .mcp.json servers")
    mcp_decide.add_argument("--no", "-n", action="store_true", help="deny .mcp.json servers")
    mcp.add_argument("--cwd", default=".", help="the workspace folder (default: .)")
    mcp.add_argument("--json", action="store_true", help="print the agent.mcp result as JSON")
    mcp.set_defaults(func=_mcp)


def _add_sessions(sub: Any) -> None:
    sessions = sub.add_parser("sessions", help="list saved sessions")
    sessions.add_argument("--json", action="store_true")
    sessions.set_defaults(func=_sessions)


def _add_remember(sub: Any) -> None:
    note = sub.add_parser("remember", help="append a line to the project's memory (MEMORY.md)")
    note.add_argument("text", nargs="+", help="the note")
    note.add_argument("--cwd", default=".", help="the workspace folder (default: .)")
    note.set_defaults(func=_remember)


def _add_undo(sub: Any) -> None:
    undo = sub.add_parser("undo", help="revert what a session's last run changed (headless)")
    undo.add_argument("--session", metavar="SESSION_ID", help="default: the newest that did")
    undo.add_argument("--cwd", default=".", help="the workspace folder (default: .)")
    undo_decide = undo.add_mutually_exclusive_group()
    undo_decide.add_argument("--yes", "-y", action="store_true", help="accept the whole revert")
    undo_decide.add_argument("--no", "-n", action="store_true", help="reject it (a dry run)")
    undo.add_argument("--json", action="store_true", help="print the result object as JSON")
    undo.set_defaults(func=_undo)


_COMMANDS: dict[str, Callable[[Any], None]] = {
    "serve": _add_serve,
    "acp": _add_acp,
    "run": _add_run,
    "warm": _add_warm,
    "demo": _add_demo,
    "check-command": _add_check_command,
    "mcp": _add_mcp,
    "sessions": _add_sessions,
    "remember": _add_remember,
    "undo": _add_undo,
}


def entry() -> NoReturn:
    """The ``agent-ls`` program: run :func:`main`, flush, and exit without teardown.

    Nothing is left to do once the command has answered (sessions are on disk, the server
    was told to exit), and collecting a heap that holds the SDKs costs more than the run's
    own last turn.
    """
    from agent_ls import codecache  # installed by agent_ls.__main__, before this module's imports

    code = main()
    codecache.save()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in _COMMANDS else None
    args = build_parser(command).parse_args(argv)
    if getattr(args, "cmd", None) == "check-command" and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    result: int = args.func(args)
    return result
