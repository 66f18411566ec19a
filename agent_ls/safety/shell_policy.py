"""Whether a shell command may run: classifier verdicts, rules, grants and questions.

Authorisation (:func:`authorize_command`) works on the parsed simple commands, never on the
raw line. For each one, in order of precedence:

1. a deny rule (also tried behind wrappers such as ``sudo``) or a classifier deny refuses the
   whole line;
2. ``bypassPermissions`` asks nothing else (an opaque line is refused when deny rules exist,
   since it cannot be checked against them);
3. an opaque line (``eval``, ``bash -c``, substitutions in command position...) asks once,
   showing everything, and cannot be granted for the session;
4. an ask rule asks every time;
5. an allow rule or a session grant clears the command's *own* ask (``npm test`` runs project
   code) but never the asks that come from around it: redirections to files, sensitive
   variable assignments (``PATH=.. x``) and write targets outside the workspace or on
   sensitive paths. Those are asked each time;
6. otherwise the classifier's verdict decides.

With the OS sandbox active (:mod:`agent_ls.safety.sandbox`), the reasons the sandbox contains
are dropped before anything is asked (:func:`is_contained_reason`): writes that stay inside
the workspace and running project code (tests, builds, linters). Deleting, the network,
privileges, secrets, git history and everything the rules do not know still ask, and so do the
write-target checks (outside the workspace, sensitive paths, paths known only at run time). A
line with a network reason that is allowed runs with network (:func:`needs_network`).

"Allow for this session" grants exactly the command words shown in the dialog.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agent_ls.safety.paths import (
    holds_credential_stores,
    secret_kind,
    sensitive_reason,
)
from agent_ls.safety.rules import command_words, unwrapped
from agent_ls.safety.shell_rules import ASK_REASONS
from agent_ls.safety.shell_words import expand_word

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_ls.ports.editor import EditorPort
    from agent_ls.safety.permissions import Permissions
    from agent_ls.safety.shell import SimpleCommand, Verdict


class WorkspaceView(Protocol):
    @property
    def root(self) -> Path: ...

    def contains(self, path: Path) -> bool: ...


class ShellScope(Protocol):
    """What authorising a command looks at (a tool's context has all of it)."""

    @property
    def workspace(self) -> WorkspaceView: ...

    @property
    def permissions(self) -> Permissions: ...

    @property
    def port(self) -> EditorPort: ...

    @property
    def named_paths(self) -> set[Path]: ...

    @property
    def readable_paths(self) -> set[Path]: ...


_REDIRECT_REASON = re.compile(
    r"^(?:redirects|appends) output to (?P<target>.+?)(?P<dyn>, a file named by an expansion)?$"
)
_EFFECT_REASON = re.compile(
    r"^(?:(?:redirects|appends) output to |the redirection opens a network connection"
    r"|sets [A-Za-z_][A-Za-z0-9_]*, which changes what programs run or how)"
    r"|gets text with a substitution that may run later"
)
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})
_DYNAMIC = re.compile(r"[$`]|^['\"]|<\(|>\(")
# Commands whose arguments are not files read for their content: no read question.
_NOT_READING = frozenset(
    """echo printf ls cd pushd popd pwd test [ [[ stat du df file type which command realpath
    readlink dirname basename wc touch mkdir rm rmdir ln chmod chown chgrp tr seq expr sleep
    kill pkill pgrep pidof date id whoami uname nproc true false : export local declare typeset
    readonly unset alias hash umask wait jobs exit return break continue shift trap set let
    getconf locale arch tty uptime free ps printenv groups logname users who w cal help whereis
    mkfifo mktemp unlink""".split()  # noqa: SIM905
)
# Commands whose first operand is a pattern or a program, not a file (unless -e / -f gives it).
_PATTERN_FIRST = frozenset(
    "grep egrep fgrep rg ag ack sed awk gawk mawk nawk jq yq xmllint".split()  # noqa: SIM905
)
_PATTERN_OPTIONS = ("-e", "-f", "--regexp", "--file", "--expression", "--source", "--from-file")
# Device files any program may read: never a question.
_HARMLESS_READS = frozenset(
    {"/dev/null", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/tty", "-"}
)
MAX_GLOB_MATCHES = 200


# Commands whose own ask is only "writes files in the workspace"; their targets are checked
# one by one (outside the workspace, sensitive paths), and those checks are never contained.
# Not mv (its source goes away, even into /dev/null) nor ln (links can point out).
_WRITERS = (
    "mkdir touch mktemp cp install tar zip unzip gzip gunzip bzip2 xz patch split csplit chmod"
)
_CONTAINED_WRITERS = frozenset(_WRITERS.split())
_CONTAINED_REASON = re.compile(
    "|".join(
        [
            *(re.escape(f"{n} {ASK_REASONS[n]}") + "$" for n in sorted(_CONTAINED_WRITERS)),
            r"\S+ runs project code \(builds and tests execute arbitrary code\)$",
            r"\S+ \S+ runs project scripts \(project code\)$",
            r"\S+ -m \S+ runs the module \S+ \(project code\)$",
            r"\S+ runs the script ",
            r"runs the program (?!/)",  # ./gradlew, bin/test: the project's own programs
            r"(?:redirects|appends) output to ",  # the target is judged on its own
            r"(?:sed|yq) \S+ edits files in place$",
            r"(?:sort|tree) \S+ writes its output to a file$",
            r"(?:tee writes to|uniq writes its output to|xxd writes to) ",
            r"base64 \S+ writes to a file$",
            r"time -o writes its report to a file$",
        ]
    )
)
_NETWORK_REASON = re.compile(
    r"reaches the network|reaches a remote|reaches remotes|opens a network connection"
    r"|installs or removes packages|installs or manages packages|uploads a package"
    r"|manages packages or runs project scripts"
)


def is_contained_reason(reason: str) -> bool:
    """An ask the sandbox makes moot: a write inside the workspace, or project code."""
    return bool(_CONTAINED_REASON.match(reason)) and "(opaque)" not in reason


def is_network_reason(reason: str) -> bool:
    return bool(_NETWORK_REASON.search(reason))


def needs_network(verdict_reasons: Sequence[str]) -> bool:
    """Whether a line the user let run should get the network inside the sandbox."""
    return any(is_network_reason(r) for r in verdict_reasons)


@dataclass(frozen=True, slots=True)
class Authorization:
    refusal: str | None  # None: it may run; else why not, for the model
    network: bool = False  # run it with network (it asked for the network and was allowed)


def is_effect_reason(reason: str) -> bool:
    """An ask that comes from around the command (redirection, assignment), not from it."""
    return bool(_EFFECT_REASON.search(reason))


def _operands(args: Sequence[str], takes_value: frozenset[str] = frozenset()) -> list[str]:
    out: list[str] = []
    i, ended = 0, False
    while i < len(args):
        a = args[i]
        if ended or a == "-" or not a.startswith("-"):
            out.append(a)
        elif a == "--":
            ended = True
        elif a in takes_value:
            i += 1
        i += 1
    return out


def _option_values(args: Sequence[str], short: str, *long: str) -> list[str]:
    """Values of ``-X VALUE``, ``-XVALUE``, ``--long VALUE`` and ``--long=VALUE``."""
    values: list[str] = []
    for i, a in enumerate(args):
        if a == "--":
            break
        nxt = args[i + 1] if i + 1 < len(args) else None
        if short and a == short and nxt is not None:
            values.append(nxt)
        elif short and a.startswith(short) and not a.startswith("--") and len(a) > len(short):
            values.append(a[len(short) :])
        for name in long:
            if a == name and nxt is not None:
                values.append(nxt)
            elif a.startswith(name + "="):
                values.append(a[len(name) + 1 :])
    return values


_OPT_VALUE = {
    "touch": frozenset({"-d", "-t", "-r", "--date", "--reference"}),
    "mkdir": frozenset({"-m", "--mode"}),
    "truncate": frozenset({"-s", "-r", "--size", "--reference"}),
    "install": frozenset({"-m", "-o", "-g", "-t", "-S", "--mode", "--owner", "--group"}),
    "cp": frozenset({"-t", "-S", "--suffix", "--target-directory"}),
    "mv": frozenset({"-t", "-S", "--suffix", "--target-directory"}),
    "ln": frozenset({"-t", "-S", "--suffix", "--target-directory"}),
    "sed": frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"}),
    "rsync": frozenset({"-e", "--rsh", "--exclude", "--include", "--filter", "-f"}),
}


def write_targets(argv: Sequence[str]) -> list[str]:
    """Paths a known writing command writes, removes or changes, from its arguments.

    Best effort: commands that run arbitrary code (interpreters, build tools) can write
    anywhere and are asked about anyway; this names what is plain from the words.
    """
    if not argv:
        return []
    name, args = argv[0].rpartition("/")[2], list(argv[1:])
    takes = _OPT_VALUE.get(name, frozenset())
    ops = _operands(args, takes)
    if name in ("rm", "rmdir", "unlink", "shred", "touch", "mkdir", "mkfifo", "truncate", "tee"):
        return ops
    if name in ("chmod", "chown", "chgrp", "chattr"):
        refs = _option_values(args, "", "--reference")
        return ops if refs else ops[1:]
    if name == "mv":
        return ops + _option_values(args, "-t", "--target-directory")
    if name in ("cp", "install", "ln", "rsync", "scp"):
        target_dirs = _option_values(args, "-t", "--target-directory")
        if target_dirs:
            return target_dirs
        if name == "install" and "-d" in args:
            return ops
        local = [o for o in ops if not re.match(r"^[^/]*:", o)]  # host:path is remote
        if name == "ln" and len(ops) == 1:
            return ["."]
        return local[-1:] if len(ops) >= 2 else []
    if name == "dd":
        return [a[3:] for a in args if a.startswith("of=")]
    if name == "sed":
        in_place = any(
            a.startswith("--in-place") or (re.match(r"^-[a-zA-Z]*i", a) and not a.startswith("--"))
            for a in args
        )
        if not in_place:
            return []
        scripted = bool(
            _option_values(args, "-e", "--expression") + _option_values(args, "-f", "--file")
        )
        return ops if scripted else ops[1:]
    if name == "sort":
        return _option_values(args, "-o", "--output")
    if name == "curl":
        found = _option_values(args, "-o", "--output") + _option_values(args, "", "--output-dir")
        if any(a in ("-O", "--remote-name", "--remote-name-all") for a in args):
            found.append(".")
        return found
    if name == "wget":
        found = _option_values(args, "-O", "--output-document")
        found += _option_values(args, "-P", "--directory-prefix")
        return found or ["."]
    if name == "tar":
        return _option_values(args, "-C", "--directory") + _tar_created(args)
    if name == "unzip":
        return _option_values(args, "-d") or ["."]
    if name == "find":
        outs = [v for opt in ("-fprint", "-fprint0", "-fprintf", "-fls") for v in _after(args, opt)]
        if "-delete" in args:
            roots = []
            for a in args:
                if a.startswith(("-", "(", "!")):
                    break
                roots.append(a)
            outs += roots or ["."]
        return outs
    return []


def _tar_created(args: Sequence[str]) -> list[str]:
    """The archive ``tar c`` / ``tar -czf out.tgz`` writes."""
    if not args:
        return []
    first = args[0].lstrip("-")
    if not args[0].startswith("--") and "c" in first and "f" in first:
        rest = first[first.index("f") + 1 :]
        return [rest] if rest else list(args[1:2])
    if any(a in ("-c", "--create") for a in args):
        return _option_values(args, "-f", "--file")
    return []


def _after(args: Sequence[str], option: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == option]


@dataclass
class _Where:
    """The working directory as the line moves through ``cd``: None once it is unknown."""

    cwd: Path | None

    def follow(self, part: SimpleCommand) -> None:
        if part.name in ("cd", "pushd"):
            index = next(
                (
                    i
                    for i, a in enumerate(part.argv)
                    if i and a not in ("-L", "-P", "-e", "-@", "--")
                ),
                None,
            )
            if index is None:
                self.cwd = Path.home() if part.name == "cd" else None
                return
            paths = part.expanded[index] if index < len(part.expanded) else (part.argv[index],)
            if part.argv[index] == "-" or not paths or len(paths) != 1:
                self.cwd = None
            elif self.cwd is not None or os.path.isabs(paths[0]):
                self.cwd = self.resolve(paths[0])
        elif part.name == "popd":
            self.cwd = None

    def resolve(self, raw: str) -> Path | None:
        if _DYNAMIC.search(raw):
            return None
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            if self.cwd is None:
                return None
            path = self.cwd / path
        # globs: judge the directory they expand in
        parts = path.parts
        for i, p in enumerate(parts):
            if re.search(r"(?<!\\)[*?\[]", p):
                path = Path(*parts[:i]) if i else Path("/")
                break
        try:
            return path.resolve()
        except (OSError, RuntimeError):
            return None


@dataclass
class _PartCheck:
    """What one simple command needs before it may run, by what can clear it."""

    part: SimpleCommand
    own: list[str] = field(default_factory=list)  # the command's own: allow rules, grants
    around: list[str] = field(default_factory=list)  # redirections, variables: asked each time
    targets: list[str] = field(default_factory=list)  # its own write targets: asked each time
    cwd: Path | None = None  # where it runs

    @property
    def sticky(self) -> list[str]:
        return self.around + self.targets


def _target_reason(raw: str, where: _Where, ctx: ShellScope) -> str | None:
    if raw in _HARMLESS_TARGETS or raw.startswith("/dev/fd/"):
        return None
    resolved = where.resolve(raw)
    if resolved is None:
        return f"writes {raw}, a path only known when it runs (it may be outside the workspace)"
    if not ctx.workspace.contains(resolved):
        shown = raw if str(resolved) == raw else f"{raw} ({resolved})"
        return f"writes {shown}, outside the workspace"
    sensitive = sensitive_reason(resolved)
    if sensitive:
        return f"writes {raw}: {sensitive}"
    return None


def _add(reasons: list[str], reason: str | None) -> None:
    if reason and reason not in reasons:
        reasons.append(reason)


def _check_part(part: SimpleCommand, where: _Where, ctx: ShellScope) -> _PartCheck:
    check = _PartCheck(part)
    if part.decision == "ask":
        for reason in part.reasons:
            _add(check.around if is_effect_reason(reason) else check.own, reason)
    for reason in part.reasons:
        m = _REDIRECT_REASON.match(reason)
        if m and m.group("dyn"):
            _add(check.around, f"{m.group('target')} may be outside the workspace")
        elif m:
            _add(check.around, _target_reason(m.group("target"), where, ctx))
    for target in write_targets(part.argv):
        _add(check.targets, _target_reason(target, where, ctx))
    base = part.name.rpartition("/")[2]
    if part.name and base not in _NOT_READING:
        files = set(_file_operands(base, part.argv))
        written = _written_indices(part.argv)
        for index in range(1, len(part.argv)):
            if index in written:
                continue  # a write target is judged as one (`cp a /etc/x` writes /etc/x)
            for reason in _read_reasons(part, index, index in files, where, ctx):
                _add(check.own, reason)
        if not files and _searches_cwd(base, part.argv):  # `rg token` searches "."
            for reason in _path_reasons(".", ".", True, where, ctx):
                _add(check.own, reason)
    for raw, paths in part.reads:
        for path in paths or ():
            for reason in _path_reasons(raw, path, True, where, ctx):
                _add(check.around, reason)
    _add(check.around, _git_elsewhere(part, where, ctx))
    return check


def _searches_cwd(name: str, argv: Sequence[str]) -> bool:
    """A recursive search that, given no folder, searches the current one."""
    if name in ("rg", "ag", "fd", "fdfind", "find", "tree"):
        return True
    recursive = any(a in ("--recursive", "--dereference-recursive") for a in argv)
    short = any(re.match(r"^-[a-zA-Z]*[rR]", a) for a in argv if not a.startswith("--"))
    return name in ("grep", "egrep", "fgrep") and (recursive or short)


def _written_indices(argv: Sequence[str]) -> set[int]:
    """Indices of the words ``write_targets`` names (the last operand of ``cp``...)."""
    targets = write_targets(argv)
    if not targets or argv[0].rpartition("/")[2] in ("touch", "mkdir", "tee", "rm", "truncate"):
        return set()  # these name only targets; reading them is nothing new either
    out: set[int] = set()
    for target in targets:
        for i in range(len(argv) - 1, 0, -1):
            if i not in out and (argv[i] == target or argv[i].endswith("=" + target)):
                out.add(i)
                break
    return out


def _file_operands(name: str, argv: Sequence[str]) -> list[int]:
    """Indices of the words that name files the command reads (best effort)."""
    operands = [i for i, a in enumerate(argv) if i and (a == "-" or not a.startswith("-"))]
    if "--" in argv:
        cut = argv.index("--")
        operands = [i for i in operands if i < cut] + list(range(cut + 1, len(argv)))
    if name == "find":  # the roots, before the first test or action
        roots = []
        for i in range(1, len(argv)):
            if argv[i].startswith(("-", "(", "!")):
                break
            roots.append(i)
        return roots
    if name in _PATTERN_FIRST and operands:
        given = any(a.startswith(_PATTERN_OPTIONS) for a in argv[1:])
        return operands if given else operands[1:]
    return operands


def _word_paths(part: SimpleCommand, index: int) -> tuple[str, ...] | None:
    """What the word expands to (`~`, `$HOME`, braces); None when only known at run time."""
    if index < len(part.expanded):
        return part.expanded[index]
    raw = part.argv[index]
    return None if _DYNAMIC.search(raw) else (raw,)


def _read_reasons(
    part: SimpleCommand, index: int, is_file: bool, where: _Where, ctx: ShellScope
) -> list[str]:
    raw = part.argv[index]
    if raw.startswith("-"):  # `--file=~/.aws/credentials`: the value is a path too
        _, eq, value = raw.partition("=")
        paths = expand_word(value) if eq and value else None
        kinds = [(p, secret_kind(Path(os.path.expanduser(p)))) for p in paths or ()]
        return [f"reads {p} (in {raw}), which looks like a secret: {k}" for p, k in kinds if k]
    if part.name.rpartition("/")[2] == "git" and re.match(r"^[^/:]*:[^/]", raw):
        _, _, path = raw.partition(":")  # `git show HEAD:.env` reads it from history
        kind = secret_kind(Path(path))
        if kind:
            return [f"reads {path} from the git history ({raw}), which looks like a secret: {kind}"]
    reasons: list[str] = []
    paths = _word_paths(part, index)
    named = re.search(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", raw)
    if paths is None and named and _CREDENTIAL_VARIABLE.search(named.group(1)):
        return [f"reads {raw}, a file named by a credentials variable only known when it runs"]
    for path in _word_paths(part, index) or ():
        for reason in _path_reasons(raw, path, is_file, where, ctx):
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def _globbed(path: str, where: _Where) -> list[str]:
    """The files a glob matches now (bash expands it the same way when it runs), else itself."""
    if not re.search(r"(?<!\\)[*?\[]", path):
        return [path]
    import glob

    pattern = path if os.path.isabs(path) or where.cwd is None else str(where.cwd / path)
    matches = sorted(glob.glob(pattern))[:MAX_GLOB_MATCHES]
    return matches or [path]


def _named(path: Path, ctx: ShellScope) -> bool:
    """The user named this path, or a folder above it, in the prompt."""
    return path in ctx.named_paths or any(
        path.is_relative_to(n) for n in ctx.named_paths if n != path and n.is_dir()
    )


def _path_reasons(raw: str, path: str, is_file: bool, where: _Where, ctx: ShellScope) -> list[str]:
    """Why reading ``path`` (the word ``raw`` as typed, expanded) needs the user's say-so."""
    if path in _HARMLESS_READS or path.startswith("/dev/fd/") or path.startswith("-"):
        return []
    reasons: list[str] = []
    for one in _globbed(path, where):
        resolved = where.resolve(one)
        shown = raw if one == raw else f"{raw} ({one})"
        named = resolved is not None and _named(resolved, ctx)
        kind = secret_kind(Path(one)) or (secret_kind(resolved) if resolved else None)
        outside = (
            is_file
            and resolved is not None
            and not named
            and not ctx.workspace.contains(resolved)
            and not any(resolved.is_relative_to(f) for f in ctx.readable_paths)
        )
        where_ = ", outside the workspace," if outside else ","
        if kind and not named:
            reasons.append(f"reads {shown}{where_} which looks like a secret: {kind}")
        elif is_file and resolved is not None and holds_credential_stores(resolved) and not named:
            folder = shown if str(resolved) in shown else f"{shown} ({resolved})"
            reasons.append(
                f"reads everything under {folder}{where_} which holds credential stores "
                "(~/.ssh, ~/.aws, ~/.config/gh, ...)"
            )
        elif outside:
            reasons.append(f"reads {shown}, outside the workspace")
    return list(dict.fromkeys(reasons))


# Commands whose output names files in folders whose own words were judged (find's roots...).
_LISTERS = frozenset("find fd fdfind ls git".split())  # noqa: SIM905
_LIST_FLAGS = ("-l", "-L", "--files", "--files-with-matches", "--files-without-match")
_XARGS_VALUES = frozenset(
    [
        "-I",
        "-L",
        "-n",
        "-P",
        "-s",
        "-d",
        "-E",
        "-e",
        "-a",
        "--arg-file",
        "--delimiter",
        "--max-args",
        "--max-procs",
        "--max-lines",
        "--replace",
        "--eof",
        "--max-chars",
        "--process-slot-var",
    ]
)


def _xargs_reader(part: SimpleCommand) -> tuple[str, list[str]] | None:
    """``(program, arg files)`` when the part is ``xargs PROGRAM`` and PROGRAM reads files."""
    argv = next((a for a in unwrapped(part.argv) if a and a[0] == "xargs"), None)
    if argv is None:
        return None
    i, files = 1, []
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in ("-a", "--arg-file") and i + 1 < len(argv):
            files.append(argv[i + 1])
        elif argv[i].startswith("--arg-file="):
            files.append(argv[i].split("=", 1)[1])
        i += 2 if argv[i] in _XARGS_VALUES else 1
    program = argv[i].rpartition("/")[2] if i < len(argv) else "echo"
    return (f"xargs {program}", files) if program not in _NOT_READING else None


_CREDENTIAL_VARIABLE = re.compile(r"CRED|SECRET|TOKEN|PASSW|AUTH|KEY", re.I)


def _data_reader(part: SimpleCommand) -> tuple[str, list[str]] | None:
    """``(program, [])`` when a reading command takes a file name only known when it runs
    (``f=$(cat list); cat $f``, ``cat "$(cmd)"``): the line's other commands name it."""
    base = part.name.rpartition("/")[2]
    if not part.name or base in _NOT_READING or base == "xargs":
        return None
    for i in _file_operands(base, part.argv):  # not `grep "$PATTERN"`: a pattern names no file
        if i in part.computed:
            return (f"{base} {part.argv[i]}", [])
    return None


def _check_xargs(checks: list[_PartCheck], ctx: ShellScope) -> None:
    """``echo ~/.ssh/id_rsa | xargs cat``: the files xargs reads are the words of the other
    commands of the line, or data only known when it runs."""
    for check in checks:
        found = _xargs_reader(check.part) or _data_reader(check.part)
        if found is None:
            continue
        program, files = found
        sources = files + [raw for raw, _ in check.part.reads]
        for source in sources:
            _add(
                check.own,
                f"{program} reads the files named in {source}, known only when it runs",
            )
        for other in checks:
            part = other.part
            base = part.name.rpartition("/")[2]
            if other is check or not part.name:
                continue
            where = _Where(other.cwd)
            if base in _NOT_READING:  # echo, printf, ls: their words become the file names
                for index in range(1, len(part.argv)):
                    for reason in _read_reasons(part, index, True, where, ctx):
                        _add(check.own, f"{program} {reason}")
            elif (
                base not in _LISTERS
                and not (base in ("rg", "grep", "ag") and any(a in _LIST_FLAGS for a in part.argv))
                and (_file_operands(base, part.argv) or part.reads)  # not a filter like sort
            ):
                _add(
                    check.own,
                    f"{program} reads files named by the output of `{part.text}`, "
                    "known only when it runs",
                )


def _repo_root(path: Path) -> Path | None:
    for folder in (path, *path.parents):
        if (folder / ".git").exists():
            return folder
    return None


def _git_elsewhere(part: SimpleCommand, where: _Where, ctx: ShellScope) -> str | None:
    """git run in another repository (``-C ../other``, ``cd vendor/lib && git status``) runs
    that repository's hooks and ``core.fsmonitor``: a question, each time."""
    argv = next((a for a in unwrapped(part.argv) if a and a[0].rpartition("/")[2] == "git"), None)
    if argv is None:
        return None
    folder = where.cwd
    i = 1
    while i < len(argv):
        v = argv[i]
        if v == "-C" and i + 1 < len(argv):
            folder = _Where(folder).resolve(argv[i + 1]) if argv[i + 1] else folder
            i += 2
        elif v in ("-c", "--namespace", "--super-prefix", "--config-env", "--exec-path"):
            i += 2
        elif v.startswith("-"):
            i += 1
        else:
            break
    why = "its hooks and config (core.fsmonitor, ...) can run code"
    if folder is None:
        return f"git runs in a folder only known when it runs, maybe another repository: {why}"
    theirs = _repo_root(folder)
    if theirs is None or theirs == _repo_root(ctx.workspace.root):
        return None
    return f"git runs in the repository {theirs}, not the workspace's own: {why}"


def _quote_block(command: str) -> str:
    shown = command if len(command) <= 4000 else command[:4000] + "\n[... the line continues ...]"
    return "\n".join("    " + line for line in shown.splitlines() or [""])


async def authorize_command(command: str, ctx: ShellScope) -> str | None:
    """None when the command may run unsandboxed; else why not, for the model."""
    return (await authorize(command, ctx)).refusal


async def authorize(command: str, ctx: ShellScope, sandboxed: bool = False) -> Authorization:
    """Whether the command may run (in the sandbox when ``sandboxed``) and with network."""
    from agent_ls.safety.shell import classify

    verdict = classify(command)
    asked = [r for part in verdict.commands if part.decision == "ask" for r in part.reasons]
    network = needs_network(asked)
    refusal = await _authorize(command, verdict, ctx, sandboxed, network)
    return Authorization(refusal, network=network and refusal is None)


async def _authorize(
    command: str, verdict: Verdict, ctx: ShellScope, sandboxed: bool, network: bool
) -> str | None:
    perms = ctx.permissions
    for part in verdict.commands:
        match = perms.shell_match(part.argv)
        if match and match.verdict == "deny":
            return (
                f"`{command_words(part.argv)}` is denied by the user's permission rule "
                f"`{match.rule}`; the command was not run. Do not try to get around the rule."
            )
    if verdict.decision == "deny":
        return "This command was refused as destructive: " + "; ".join(verdict.reasons)
    if perms.mode == "bypassPermissions":
        if verdict.opaque and perms.has_shell_deny_rules():
            return (
                "This command cannot be analysed statically ("
                + "; ".join(verdict.reasons)
                + "), so it cannot be checked against the user's deny rules; it was not run. "
                "Run the commands directly instead of through eval, bash -c or substitutions."
            )
        return None
    if not verdict.commands and not verdict.opaque and verdict.decision == "allow":
        return None  # nothing runs: assignments or comments only

    where = _Where(ctx.workspace.root)
    checks: list[_PartCheck] = []
    for part in verdict.commands:
        check = _check_part(part, where, ctx)
        if sandboxed:
            check.own = [r for r in check.own if not is_contained_reason(r)]
            check.around = [r for r in check.around if not is_contained_reason(r)]
        check.cwd = where.cwd
        checks.append(check)
        where.follow(part)
    _check_xargs(checks, ctx)
    line = _quote_block(command)

    if verdict.opaque or not verdict.commands:
        reasons = list(verdict.reasons) if verdict.commands else ["it cannot be analysed"]
        for check in checks:
            reasons += [r for r in check.own + check.sticky if r not in reasons]
        message = (
            f"Run this shell command?\n\n{line}\n\n"
            f"It cannot be checked statically: {'; '.join(reasons)}.\n"
            "It can only be allowed once: what cannot be analysed is never granted for the "
            "session."
        )
        if await perms.ask(ctx.port, message, grant=None, reasons=reasons):
            return None
        return "The user denied running this command; it was not run."

    compound = len(verdict.commands) > 1
    answered: set[str] = set()  # reasons the user already allowed in this line
    for check in checks:
        part = check.part
        argv = part.argv
        words = command_words(argv) if argv else ""
        match = perms.shell_match(argv) if argv else None  # a grant may have just been given
        rule_ask = match is not None and match.verdict == "ask"
        own = [] if match is not None and match.verdict == "allow" else list(check.own)
        if rule_ask:
            assert match is not None
            own.insert(0, f"the permission rule `{match.rule}` asks for it")
        own = [r for r in own if f"{words}: {r}" not in answered]
        around = [r for r in check.around if r not in answered]
        targets = [r for r in check.targets if r not in answered]
        if not own and not around and not targets:
            continue
        grantable = bool(own) and not rule_ask and not targets
        grant = perms.shell_grant_for(argv) if grantable else None
        message = _dialog(line, part.text, words, own, around, targets, grant, compound, rule_ask)
        if sandboxed and network:
            message += (
                "\nIf allowed, it runs in the sandbox with network access (files outside the "
                "workspace stay read-only)."
            )
        if not await perms.ask(
            ctx.port,
            message,
            grant=grant,
            reasons=own + around + targets,
            rule_asks=rule_ask,
        ):
            return f"The user denied `{part.text}`; the command was not run."
        answered.update(around + targets)
        answered.update(f"{words}: {r}" for r in own)
    return None


def _dialog(
    line: str,
    text: str,
    words: str,
    own: list[str],
    around: list[str],
    targets: list[str],
    grant: str | None,
    compound: bool,
    rule_ask: bool,
) -> str:
    """The confirmation: the whole line, the part asked about and what a grant covers."""
    sticky = around + targets
    reasons = "; ".join(own + sticky)
    lines = ["Run this shell command?", "", line, ""]
    if compound:
        lines.append(f"The part `{text}` needs permission: {reasons}.")
    else:
        lines.append(f"Why this is asked: {reasons}.")
    if grant:
        scope = "not the rest of the line" if compound else "nothing else"
        lines.append(
            f'"Allow for this session" will allow the command `{words}` (exactly these words) '
            f"for the rest of this session; {scope}."
        )
        if sticky:
            lines.append("Still asked each time: " + "; ".join(sticky) + ".")
    elif rule_ask:
        lines.append("It can only be allowed once: a permission rule asks for it every time.")
    else:
        kinds = []
        if any(r.startswith("git runs") for r in around):
            kinds.append("git in another repository")
        if any(not r.startswith(("sets ", "reads ", "git runs")) for r in around):
            kinds.append("redirections to files")
        if any(r.startswith("sets ") for r in around):
            kinds.append("sensitive variables")
        if any(r.startswith("reads ") for r in around):
            kinds.append("secret-looking files read through a redirection")
        if targets:
            kinds.append("writes outside the workspace, to sensitive paths or to run-time paths")
        lines.append(f"It can only be allowed once (always asked: {'; '.join(kinds)}).")
    return "\n".join(lines)
