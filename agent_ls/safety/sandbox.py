"""The OS sandbox for shell commands: bubblewrap (``bwrap``) on Linux.

Inside, the whole file system is read-only except the workspace folders and a private temp
dir (``$TMPDIR``); the user's credential stores are empty; a few paths inside the workspace
stay read-only even when they do not exist yet (they could make the user's own tools run code
later: git hooks and config, agent and editor settings); there is no network unless asked
for; the command gets its own PID namespace, so nothing it starts outlives it.

``bwrap`` is taken from PATH, never from a folder inside the workspace (a repository could
plant one), and probed once with a harmless ``true``, in a worker thread. In ``auto`` a failed
probe means unsandboxed, with the reason in ``agent.status``.

A protected path that does not exist gets an empty placeholder (a directory or a file) for
the command's lifetime, mounted read-only, and removed after the command (in the background)
if it is still empty: a bind mount needs something to mount on, and the workspace is the
host's own folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SandboxMode = Literal["auto", "on", "off"]
BACKEND = "bwrap"
# Replaced by empty mounts: a read-only tmpfs over directories, an empty file over files.
CREDENTIAL_STORES = (".ssh", ".aws", ".gnupg", ".config/gh", ".netrc", ".docker", ".kube")
# Read-only inside every workspace folder, existing or not: (relative path, whether its
# placeholder is a directory). A missing .mcp.json gets an empty directory: git does not list
# one, while an empty file would show as untracked and could be committed with `git add .`.
PROTECTED: tuple[tuple[str, bool], ...] = (
    (".git/hooks", True),
    (".git/config", False),
    (".agent-ls", True),
    (".claude", True),
    (".mcp.json", True),
    (".vscode", True),
)
# Sockets that hand out credentials or root: masked when present (a read-only mount does
# not stop connect(2) on a Unix socket).
_SOCKETS = ("/run/docker.sock", "/var/run/docker.sock")
# As root, bwrap keeps the caller's capabilities unless told: without --cap-drop, `mount -o
# remount,rw /` inside undoes the read-only root.
_ISOLATION = ("--die-with-parent", "--new-session", "--unshare-pid", "--cap-drop", "ALL")
_BASE_MOUNTS = ("--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc")
PROBE_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """What ``agent.status`` reports, plus the program to run when active."""

    mode: SandboxMode
    active: bool
    backend: str | None = None
    reason: str | None = None
    program: str | None = None

    def to_contract(self) -> dict[str, object]:
        out: dict[str, object] = {"mode": self.mode, "active": self.active}
        out["backend"] = self.backend
        if self.reason:
            out["reason"] = self.reason
        return out


# --------------------------------------------------------------------------- finding bwrap


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


_found: dict[tuple[str, tuple[Path, ...]], tuple[float, str | None]] = {}
FOUND_FOR = 5.0  # seconds a lookup is reused: agent.status asks twice per call


def find_bwrap(roots: Sequence[Path], path_env: str | None = None) -> str | None:
    """The first executable ``bwrap`` on PATH outside the workspace folders (the answer is
    reused for :data:`FOUND_FOR` seconds: each lookup resolves every PATH entry)."""
    key = (os.environ.get("PATH", "") if path_env is None else path_env, tuple(roots))
    now = time.monotonic()
    hit = _found.get(key)
    if hit is not None and now - hit[0] < FOUND_FOR:
        return hit[1]
    program = _look_up_bwrap(roots, key[0])
    _found[key] = (now, program)
    return program


def _look_up_bwrap(roots: Sequence[Path], path_env: str) -> str | None:
    resolved_roots = [r.resolve() for r in roots]
    for entry in path_env.split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue  # "" and "." mean the working directory: the workspace
        candidate = Path(entry) / BACKEND
        try:
            real = candidate.resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if _inside(Path(entry).resolve(), resolved_roots) or _inside(real, resolved_roots):
            continue
        if real.is_file() and os.access(real, os.X_OK):
            return str(real)
    return None


_probe_lock = threading.Lock()
_probed: dict[str, str | None] = {}  # program -> None (works) or why not


def probe_argv(program: str) -> list[str]:
    return [program, *_ISOLATION, "--unshare-net", *_BASE_MOUNTS, "--", "true"]


def probe(program: str) -> str | None:
    """Run ``true`` in a sandbox once per program; None when it works, else why not.

    Blocking: call it from a worker thread.
    """
    with _probe_lock:
        if program in _probed:
            return _probed[program]
        try:
            done = subprocess.run(
                probe_argv(program),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=PROBE_TIMEOUT,
                check=False,
            )
            err = done.stderr.decode("utf-8", "replace").strip().splitlines()
            why = None
            if done.returncode != 0:
                detail = err[-1] if err else f"exit code {done.returncode}"
                why = f"{program} cannot create a sandbox here ({detail})"
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = f"{program} cannot create a sandbox here ({exc})"
        _probed[program] = why
        return why


def resolve_status(mode: str, roots: Sequence[Path]) -> SandboxStatus:
    """The sandbox for a setting and workspace. Blocking (it may probe): use a thread."""
    checked: SandboxMode = "on" if mode == "on" else "off" if mode == "off" else "auto"
    if checked == "off":
        return SandboxStatus(checked, False, reason="turned off by the setting sandbox: off")
    program = find_bwrap(roots)
    if program is None:
        missing = "bwrap (bubblewrap) was not found on PATH outside the workspace"
        return SandboxStatus(checked, False, reason=missing)
    why = probe(program)
    if why is not None:
        return SandboxStatus(checked, False, reason=why)
    return SandboxStatus(checked, True, BACKEND, program=program)


def probe_in_background(roots: Sequence[Path] = ()) -> threading.Thread:
    """Start probing the ``bwrap`` on PATH now, in a daemon thread, so that the first
    ``agent.status`` (which reports the sandbox) does not wait for a subprocess."""

    def work() -> None:
        program = find_bwrap(roots)
        if program is not None:
            probe(program)

    thread = threading.Thread(target=work, name="agent-ls-sandbox-probe", daemon=True)
    thread.start()
    return thread


async def sandbox_status(mode: str, roots: Sequence[Path]) -> SandboxStatus:
    """:func:`resolve_status` with the one-time probe in a worker thread, off the event loop."""
    if mode != "off":
        program = find_bwrap(roots)
        if program is not None and program not in _probed:
            await asyncio.to_thread(probe, program)
    return resolve_status(mode, roots)


# --------------------------------------------------------------------------- one command


@dataclass(frozen=True, slots=True)
class Mount:
    kind: Literal["bind", "ro-bind", "tmpfs-ro", "empty"]
    path: Path
    source: Path | None = None  # for "empty": the empty file laid over the path

    def argv(self) -> list[str]:
        p = str(self.path)
        if self.kind == "bind":
            return ["--bind", p, p]
        if self.kind == "ro-bind":
            return ["--ro-bind", p, p]
        if self.kind == "tmpfs-ro":
            return ["--tmpfs", p, "--remount-ro", p]
        return ["--ro-bind", str(self.source or "/dev/null"), p]


def build_argv(
    program: str, mounts: Sequence[Mount], cwd: Path, network: bool, command: Sequence[str]
) -> list[str]:
    """The bwrap command line: isolation, the read-only root, then the mounts in order."""
    argv = [program, *_ISOLATION]
    if not network:
        argv.append("--unshare-net")
    argv += _BASE_MOUNTS
    for mount in mounts:
        argv += mount.argv()
    return [*argv, "--chdir", str(cwd), "--", *command]


_placeholder_lock = threading.RLock()  # held while a layout looks at the workspace
_placeholders: dict[Path, int] = {}  # placeholder -> commands using it (in this process)


def _gitdir(dot_git: Path) -> Path | None:
    """The directory a ``.git`` file points to (worktrees, submodules)."""
    try:
        first = dot_git.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
    except OSError:
        return None
    if not first or not first[0].startswith("gitdir:"):
        return None
    target = Path(first[0][len("gitdir:") :].strip())
    return (dot_git.parent / target).resolve() if not target.is_absolute() else target.resolve()


def _protected_in(root: Path, roots: Sequence[Path]) -> list[tuple[Path, bool]]:
    """Paths to keep read-only in one workspace folder: (path, is a directory)."""
    wanted: list[tuple[Path, bool]] = []
    dot_git = root / ".git"
    git_inner = [(rel[len(".git/") :], d) for rel, d in PROTECTED if rel.startswith(".git/")]
    if dot_git in _placeholders:
        wanted.append((dot_git, True))  # our own empty .git of a command still running
    elif dot_git.is_file() and not dot_git.is_symlink():
        wanted.append((dot_git, False))  # it could be repointed at a planted git dir
        gitdir = _gitdir(dot_git)
        if gitdir is not None and _inside(gitdir, roots) and gitdir.is_dir():
            wanted += [(gitdir / rel, d) for rel, d in git_inner]
    elif dot_git.is_dir() and not dot_git.is_symlink():
        wanted += [(dot_git / rel, d) for rel, d in git_inner]
    elif not os.path.lexists(dot_git):
        wanted.append((dot_git, True))  # git skips an empty .git; `git init` cannot plant hooks
    wanted += [(root / rel, d) for rel, d in PROTECTED if not rel.startswith(".git/")]
    return wanted


@dataclass
class SandboxRun:
    """The confinement of one command: its mounts, temp dir and placeholders."""

    program: str
    cwd: Path
    network: bool
    tmpdir: Path
    empty: Path | None = None  # an empty read-only file, the stand-in for credential files
    mounts: list[Mount] = field(default_factory=list)
    placeholders: list[Path] = field(default_factory=list)

    def wrap(self, command: Sequence[str]) -> list[str]:
        return build_argv(self.program, self.mounts, self.cwd, self.network, command)

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The child's environment inside: its temp dir, no agent socket."""
        out = {k: v for k, v in env.items() if k != "SSH_AUTH_SOCK"}
        for name in ("TMPDIR", "TMP", "TEMP"):
            out[name] = str(self.tmpdir)
        return out

    def close(self) -> None:
        """Remove the placeholders no other command uses and the temp dir. Blocking."""
        _release(self.placeholders)
        self.placeholders = []
        if self.empty is not None:
            with contextlib.suppress(OSError):
                self.empty.unlink()
        import shutil  # here, not at start-up (~2 ms): most starts run no sandboxed command

        shutil.rmtree(self.tmpdir, ignore_errors=True)


def _release(paths: Sequence[Path]) -> None:
    with _placeholder_lock:
        for path in paths:
            users = _placeholders.get(path)
            if users is None:
                continue  # released already (the exit path): it may be someone else's now
            if users > 1:
                _placeholders[path] = users - 1
                continue
            del _placeholders[path]
            with contextlib.suppress(OSError):  # not empty any more: someone outside wrote it
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()
                elif path.is_file() and not path.is_symlink() and path.stat().st_size == 0:
                    path.unlink()


def remove_placeholders() -> None:
    """The process is exiting: take every placeholder out of the workspaces now."""
    with _placeholder_lock:
        for path in _placeholders:
            _placeholders[path] = 1
        _release(list(_placeholders))


def prepare(
    program: str,
    roots: Sequence[Path],
    *,
    network: bool,
    home: Path | None = None,
    env: dict[str, str] | None = None,
) -> SandboxRun:
    """Lay out one command's sandbox (creates its temp dir and placeholders). Blocking."""
    roots = [r.resolve() for r in roots]
    import tempfile  # here: ~8 ms to import, and most starts run no sandboxed command

    tmpdir = Path(tempfile.mkdtemp(prefix="agent-ls-sandbox-")).resolve()
    run = SandboxRun(program, roots[0], network, tmpdir)
    try:
        run.mounts += [Mount("bind", r) for r in roots]
        run.mounts.append(Mount("bind", tmpdir))
        with _placeholder_lock:  # placeholders of other commands come and go meanwhile
            for root in roots:
                dot_git = root / ".git"
                if dot_git not in _placeholders and dot_git.is_dir() and not dot_git.is_symlink():
                    # A mount point cannot be renamed or removed: `mv .git x && git init`
                    # would otherwise swap in a repository with planted hooks.
                    run.mounts.append(Mount("bind", dot_git))
                for path, is_dir in _protected_in(root, roots):
                    _protect(run, path, is_dir, roots)
        _mask_credentials(run, home or Path(os.path.expanduser("~")), env or dict(os.environ))
    except BaseException:
        run.close()
        raise
    return run


def _protect(run: SandboxRun, path: Path, is_dir: bool, roots: Sequence[Path]) -> None:
    """Mount ``path`` read-only, first making an empty placeholder if it does not exist.

    Under the lock: a placeholder another command still uses is shared, and one being
    removed is gone before this looks (a mount on a path removed meanwhile would vanish).
    """
    with _placeholder_lock:
        if path in _placeholders:
            _placeholders[path] += 1
        elif os.path.lexists(path):
            real = path.resolve()
            if _inside(real, roots) and real.exists():  # a link out of it is read-only anyway
                run.mounts.append(Mount("ro-bind", real))
            return
        elif not path.parent.is_dir():
            return
        else:
            try:
                if is_dir:
                    path.mkdir()
                else:
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:  # made outside this very instant: protect it as it is
                run.mounts.append(Mount("ro-bind", path))
                return
            except OSError:
                return  # not makeable (a read-only folder): nothing can be created there
            _placeholders[path] = 1
    run.placeholders.append(path)
    run.mounts.append(Mount("ro-bind", path))


def _mask_credentials(run: SandboxRun, home: Path, env: dict[str, str]) -> None:
    targets = [home / rel for rel in CREDENTIAL_STORES]
    sockets = [Path(p) for p in _SOCKETS]
    if env.get("SSH_AUTH_SOCK"):
        sockets.append(Path(env["SSH_AUTH_SOCK"]))
    seen: set[Path] = set()
    for path in targets + sockets:
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            continue  # absent: nothing to hide (and the root is read-only)
        if real in seen:
            continue
        seen.add(real)
        if real.is_dir():
            run.mounts.append(Mount("tmpfs-ro", real))
            continue
        if run.empty is None:  # outside the writable temp dir: read-only inside
            run.empty = run.tmpdir.with_name(run.tmpdir.name + ".empty")
            run.empty.touch(0o444)
        run.mounts.append(Mount("empty", real, run.empty))


# --------------------------------------------------------------------------- failures

_READ_ONLY = re.compile(r"read-only file system|\bEROFS\b", re.I)
_DENIED = re.compile(r"permission denied|\bEACCES\b|operation not permitted|\bEPERM\b", re.I)
_MISSING = re.compile(r"no such file or directory|\bENOENT\b", re.I)
# Removing a mount point; writing a placeholder directory.
_BUSY = re.compile(r"device or resource busy|\bEBUSY\b|is a directory|\bEISDIR\b", re.I)
_NO_NETWORK = re.compile(
    r"could not resolve|temporary failure in name resolution|name or service not known"
    r"|network is unreachable|\bENETUNREACH\b|connection refused|\bECONNREFUSED\b"
    r"|getaddrinfo|no address associated with hostname|failed to establish a new connection"
    r"|couldn't connect to server|unable to connect|name resolution",
    re.I,
)
_CREDENTIAL_NAMES = tuple(f"/{rel}" for rel in CREDENTIAL_STORES)
_PROTECTED_NAMES = tuple(rel for rel, _ in PROTECTED)


def refusal_note(output: str, network: bool) -> str | None:
    """Which sandbox refusal a failed command's output points to, as a note for the model."""
    from agent_ls import prompts

    lines = output.splitlines()
    denied = [line for line in lines if _DENIED.search(line) or _BUSY.search(line)]
    missing = [line for line in lines if _DENIED.search(line) or _MISSING.search(line)]
    if any(name in line for line in missing for name in _CREDENTIAL_NAMES):
        return prompts.load("sandbox/credentials.md")
    if _READ_ONLY.search(output) or any(n in line for line in denied for n in _PROTECTED_NAMES):
        return prompts.load("sandbox/read_only.md")
    if not network and _NO_NETWORK.search(output):
        return prompts.load("sandbox/no_network.md")
    return None
