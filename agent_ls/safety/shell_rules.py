"""Per-command rules of the shell classifier: allow tables, argument checks, wrappers, denials.

Everything here works on words that `shell.py` already took out of the tree-sitter tree. A command
that no rule knows asks (fail closed). Handlers register themselves with `@rule("name", ...)`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["allow", "ask", "deny"]
RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
OPAQUE = "cannot be analysed statically (opaque)"


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True, slots=True)
class Word:
    """One shell word: its source text, its value when statically known, and whether it globs."""

    raw: str
    value: str | None  # None when it depends on expansions or substitutions
    glob: bool = False  # an unquoted glob/brace at the start: may expand into options

    @property
    def shown(self) -> str:
        return self.value if self.value is not None else self.raw

    @property
    def brief(self) -> str:
        """The source text, shortened for a reason line."""
        return self.raw if len(self.raw) <= 60 else self.raw[:57] + "..."

    @property
    def known(self) -> str | None:
        """The value when it is safe to reason about it as one fixed argument."""
        return None if self.glob else self.value


STDIN_WORD = Word("<arguments read from stdin>", None)


@dataclass(slots=True)
class Judgement:
    decision: Decision = "allow"
    items: list[tuple[Decision, str]] = field(default_factory=list)
    opaque: bool = False

    def add(self, decision: Decision, reason: str, opaque: bool = False) -> Judgement:
        if opaque and "(opaque)" not in reason:
            reason = f"{reason}: {OPAQUE}"
        if RANK[decision] > RANK[self.decision]:
            self.decision = decision
        if (decision, reason) not in self.items:
            self.items.append((decision, reason))
        self.opaque = self.opaque or opaque
        return self

    def merge(self, other: Judgement) -> Judgement:
        for decision, reason in other.items:
            self.add(decision, reason)
        self.opaque = self.opaque or other.opaque
        return self

    @property
    def reasons(self) -> list[str]:
        """What explains the decision: the allow reasons, or the ask/deny ones, worst first."""
        if self.decision == "allow":
            return [r for d, r in self.items if d == "allow"]
        ranked = sorted((i for i in self.items if i[0] != "allow"), key=lambda i: -RANK[i[0]])
        return [r for _, r in ranked]


@dataclass(frozen=True, slots=True)
class Ctx:
    depth: int
    payload: Callable[[str, int], Judgement]  # the whole classifier, for `bash -c` / `eval` text
    # The walker judges the script of this command's transparent `bash -c` itself, command by
    # command (see `transparent_script`): the shell only adds its own allow.
    inline_spliced: bool = False

    def deeper(self) -> Ctx:
        return Ctx(self.depth + 1, self.payload, self.inline_spliced)

    def spliced(self) -> Ctx:
        return Ctx(self.depth, self.payload, True)


Handler = Callable[[str, list[Word], Judgement, Ctx], None]
HANDLERS: dict[str, Handler] = {}


def rule(*names: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        HANDLERS.update(dict.fromkeys(names, handler))
        return handler

    return register


# --------------------------------------------------------------------------- tables

SYSTEM_DIRS = _words(
    "/bin /usr/bin /usr/local/bin /sbin /usr/sbin /usr/local/sbin /opt/homebrew/bin"
)
DISK_RE = re.compile(r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|r?disk\d)")
CATASTROPHIC = _words(
    "/ /* ~ ~/* $HOME $HOME/* /bin /boot /dev /etc /home /lib /lib64 /opt /proc /root /sbin /srv "
    "/sys /usr /var /System /Users /Library /Applications"
)
# Read-only whatever the arguments: no option of theirs writes, deletes or runs anything.
READ_ONLY = _words(
    """ls cat head tail wc grep egrep fgrep pwd echo which whereis type stat du df basename dirname
    realpath readlink true false : whoami id groups uname nl paste rev seq expr tac numfmt cut tr
    diff cmp comm column fold fmt expand unexpand join od hexdump strings md5sum sha1sum sha224sum
    sha256sum sha384sum sha512sum b2sum cksum sum jq printenv test [ sleep cd pushd popd dirs wait
    exit return break continue shift help jobs nproc arch locale tty uptime free ps pgrep pidof
    logname users who w let set ulimit getconf lsb_release cal readelf"""
)
SHELLS = _words("sh bash zsh dash ksh mksh ash fish csh tcsh")
# family: (inline-code short letters, inline long options, options taking a value, version args)
INTERPRETERS: dict[str, tuple[str, frozenset[str], frozenset[str], frozenset[str]]] = {
    "python": ("c", _words(""), _words("-W -X -Q"), _words("--version -V")),
    "node": (
        "ep",
        _words("--eval --print"),
        _words("-r --require --import --loader --input-type"),
        _words("--version -v"),
    ),
    "perl": ("eE", _words(""), _words("-I -M -m"), _words("--version -v")),
    "ruby": ("e", _words(""), _words("-I -r -C"), _words("--version -v")),
    "php": ("rBRFE", _words(""), _words("-d -c"), _words("--version -v")),
    "lua": ("e", _words(""), _words("-l"), _words("-v")),
    "Rscript": ("e", _words("--expr"), _words(""), _words("--version")),
    "osascript": ("e", _words(""), _words(""), _words("")),
    "pwsh": ("ceC", _words("-Command -EncodedCommand"), _words(""), _words("--version")),
}
FAMILY = {"pypy": "python", "pypy3": "python", "nodejs": "node", "luajit": "lua"}
FAMILY |= {"powershell": "pwsh", "R": "Rscript"}
DECODERS = _words("base64 base32 xxd openssl gunzip zcat uudecode gpg")
RUNS_CODE = _words(
    """make cmake ninja meson gradle gradlew mvn ant cargo go rustc gcc g++ cc clang clang++ javac
    java pytest py.test tox nox jest vitest mocha karma tsc ts-node tsx npx yarn pnpm deno bun rake
    bundle mix dotnet swift ruff mypy black isort flake8 pylint eslint prettier pre-commit phpunit
    rspec ctest bazel buck scons just task nodemon uvicorn gunicorn flask django-admin jupyter
    ipython irb"""
)
INSTALLS = _words(
    "pip pip3 pipx uv poetry pdm conda mamba apt apt-get aptitude yum dnf zypper brew port pacman "
    "apk snap flatpak gem npm cpan cpanm composer nix-env"
)
NETWORK = _words(
    "curl wget ssh scp sftp ftp rsync nc ncat netcat telnet socat ping dig nslookup host whois "
    "http https aria2c gh aws gcloud az kubectl helm terraform"
)
_ASK_GROUPS = [
    ("rm unlink", "deletes files"),
    ("rmdir", "deletes directories"),
    ("shred", "destroys file contents"),
    ("mv rename", "moves or renames files"),
    ("cp install", "copies files (writes)"),
    ("ln", "creates links"),
    ("mkdir", "creates directories"),
    ("touch mktemp", "creates or updates files"),
    ("truncate", "changes file sizes"),
    ("tar zip unzip", "creates or extracts archives (writes files)"),
    ("gzip gunzip bzip2 xz", "compresses or decompresses files in place"),
    ("patch split csplit", "writes files"),
    ("chmod", "changes file permissions"),
    ("chown", "changes file ownership"),
    ("chgrp", "changes file group"),
    ("chattr", "changes file attributes"),
    ("sudo doas", "runs a command with elevated privileges"),
    ("su", "switches user (privilege change)"),
    ("kill pkill killall", "kills processes"),
    ("dd", "reads and writes raw data"),
    ("docker podman", "controls containers"),
    ("systemctl service launchctl", "changes system services"),
    ("crontab at", "schedules jobs"),
    ("reboot shutdown halt poweroff", "stops or restarts the machine"),
    ("mount umount fdisk parted mkswap", "changes disks or filesystems"),
    ("iptables", "changes the firewall"),
    ("useradd userdel usermod passwd visudo", "changes accounts or privileges"),
    ("open xdg-open", "opens files in other programs"),
    ("vim vi nano emacs", "opens an interactive editor"),
    ("less more man", "opens an interactive pager (pagers can run commands)"),
    ("top htop", "is interactive"),
    ("watch", "runs a command string repeatedly"),
    ("shopt enable", "changes the shell's options or builtins"),
    ("history fc", "reads, changes or re-runs shell history"),
    ("coproc", "starts a background process"),
    ("sqlite3", "can write databases"),
    ("nm objdump ar", "can load plugins"),
]
ASK_REASONS = {name: why for names, why in _ASK_GROUPS for name in names.split()}

SENSITIVE_ENV = _words(
    """PATH IFS BASH_ENV ENV PROMPT_COMMAND PS0 PS1 PS4 SHELLOPTS BASHOPTS GLOBIGNORE HOME
    XDG_CONFIG_HOME PAGER MANPAGER GIT_PAGER EDITOR VISUAL LESSOPEN LESSCLOSE PYTHONPATH
    PYTHONSTARTUP PYTHONHOME NODE_OPTIONS NODE_PATH PERL5OPT PERL5LIB RUBYOPT RUBYLIB
    RUSTC_WRAPPER BROWSER SSH_ASKPASS SUDO_ASKPASS CDPATH EXECIGNORE FPATH INPUTRC ZDOTDIR
    GCONV_PATH PERLLIB JAVA_TOOL_OPTIONS _JAVA_OPTIONS JDK_JAVA_OPTIONS CLASSPATH GEM_HOME
    GEM_PATH RUBYGEMS_GEMDEPS NODE_EXTRA_CA_CERTS PYTHONUSERBASE TERMINFO SHELL"""
)


def sensitive_env(name: str, value: str | None) -> str | None:
    """Why setting NAME changes what later code runs, or None when it is harmless."""
    if name in ("PAGER", "GIT_PAGER", "MANPAGER") and value in ("cat", ""):
        return None
    if name in SENSITIVE_ENV or name.startswith(("LD_", "DYLD_", "GIT_", "BASH_")):
        return f"sets {name}, which changes what programs run or how"
    return None


def interpreter_family(name: str) -> str | None:
    """`python3.12` -> "python", `nodejs` -> "node"; None for other commands."""
    family = FAMILY.get(name) or ("python" if re.fullmatch(r"python[0-9.]*", name) else name)
    return family if family in INTERPRETERS else None


def is_known_command(name: str) -> bool:
    """A name the rules know: a function defined with it shadows a real command."""
    tables = (READ_ONLY, HANDLERS, SHELLS, ASK_REASONS, RUNS_CODE, INSTALLS, NETWORK, INTERPRETERS)
    return any(name in table for table in tables) or name in FAMILY


# --------------------------------------------------------------------------- entry point


def judge(words: Sequence[Word], ctx: Ctx) -> Judgement:
    """Judge one simple command given as words, name first."""
    j = Judgement()
    head, args = words[0], list(words[1:])
    name = head.known
    if name is None:
        return j.add("ask", f"command name {head.brief} is not known statically", opaque=True)
    if "/" in name:
        folder, _, base = name.rpartition("/")
        if folder not in SYSTEM_DIRS or not base:
            return j.add("ask", f"runs the program {name}")
        name = base
    if ctx.depth > 8:
        return j.add("ask", "commands nested too deeply", opaque=True)
    if name.startswith("mkfs") or name in ("mke2fs", "wipefs"):
        return j.add("deny", f"{name} formats or wipes a filesystem (destroys all data on it)")
    family = interpreter_family(name) or name
    if name in HANDLERS:
        HANDLERS[name](name, args, j, ctx)
    elif name in SHELLS:
        _shell(name, args, j, ctx)
    elif family in INTERPRETERS:
        _interpreter(name, family, args, j, ctx)
    elif name in READ_ONLY:
        j.add("allow", f"{name} is read-only")
    elif [w.known for w in args] == ["--version"] and name in RUNS_CODE | INSTALLS:
        j.add("allow", f"{name} --version prints a version")
    else:
        add_ask(j, name)
    return j


def add_ask(j: Judgement, name: str) -> None:
    if name in ASK_REASONS:
        j.add("ask", f"{name} {ASK_REASONS[name]}")
    elif name in NETWORK:
        j.add("ask", f"{name} reaches the network")
    elif name in INSTALLS:
        j.add("ask", f"{name} installs or manages packages (and may run their scripts)")
    elif name in RUNS_CODE:
        j.add("ask", f"{name} runs project code (builds and tests execute arbitrary code)")
    else:
        j.add("ask", f"{name} is not on the read-only allowlist")


def _check_payload(text: str, j: Judgement, ctx: Ctx) -> None:
    """Code handed to eval or `sh -c` stays opaque, but a visible catastrophe still denies."""
    if text.strip():
        for decision, reason in ctx.payload(text, ctx.depth + 1).items:
            if decision == "deny":
                j.add("deny", reason)


# --------------------------------------------------------------------------- denials


def _norm_target(w: Word) -> str:
    s = w.value if w.value is not None else w.raw.replace('"', "")
    s = re.sub(r"/+", "/", s.replace("${HOME}", "$HOME"))
    while len(s) > 1 and (s.endswith("/") or s.endswith("/.")):
        s = s[:-1] if s.endswith("/") else s[:-2] or "/"
    return s


def _catastrophic(w: Word) -> str | None:
    """What deleting ``w`` recursively would destroy ("the whole filesystem"), as bash
    expands it (braces, ``~``, ``$HOME``), or None."""
    from agent_ls.safety.shell_words import expand_word, home

    candidates = [_norm_target(w)]
    for word in expand_word(w.raw) or ():
        candidates.append(_norm_target(Word(word, word)))
    for c in candidates:
        if c in CATASTROPHIC or c.rstrip("/*") in ("", home().rstrip("/")):
            top = c.startswith("/") and c.rstrip("/*") != home().rstrip("/")
            return "the whole filesystem" if top else "the home directory"
    return None


@rule("rm")
def _rm(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    opts, targets = split_options(args)
    if any(has_short(o, "rRf") or o in ("--recursive", "--force") for o in opts):
        for t in targets:
            what = _catastrophic(t)
            if what:
                j.add("deny", f"{name} -rf {t.shown} would delete {what}")
    if "--no-preserve-root" in opts:
        j.add("deny", f"{name} --no-preserve-root disables the protection of /")
    j.add("ask", f"{name} deletes files")


@rule("rsync")
def _rsync(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    """rsync between two local folders copies and may delete; with a host it reaches it."""
    opts, operands = split_options(args)
    remote = [w.shown for w in operands if re.match(r"^([^/]*:|rsync://)", w.shown)]
    if remote or any(o.startswith(("-e", "--rsh")) for o in opts):
        j.add("ask", f"rsync reaches the network ({remote[0] if remote else 'a remote shell'})")
    if any(o.startswith(("--del", "--remove-source")) for o in opts):
        j.add("ask", "rsync deletes files (--delete or --remove-source-files)")
    j.add("ask", "rsync copies files (writes)")


@rule("chmod", "chown", "chgrp")
def _chmod(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    opts, targets = split_options(args)
    if any(has_short(o, "R") or o == "--recursive" for o in opts):
        for t in (t for t in targets[1:] if _catastrophic(t)):
            j.add("deny", f"{name} -R on {t.shown} changes the whole system ({ASK_REASONS[name]})")
    j.add("ask", f"{name} {ASK_REASONS[name]}")


@rule("dd")
def _dd(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    for target in (w.shown[3:] for w in args if w.shown.startswith("of=")):
        if DISK_RE.match(target):
            j.add("deny", f"dd writes directly to the disk device {target} (destroys its data)")
    j.add("ask", "dd reads and writes raw data")


@rule("shred")
def _shred(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    for w in (w for w in args if DISK_RE.match(w.shown)):
        j.add("deny", f"shred overwrites the disk device {w.shown}")
    j.add("ask", "shred destroys file contents")


# --------------------------------------------------------------------------- shell builtins


@rule("eval")
def _eval(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    j.add("ask", f"{name} runs its arguments as shell code", opaque=True)
    _check_payload(" ".join(w.value for w in args if w.value is not None), j, ctx)


@rule("source", ".")
def _source(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    target = args[0].shown if args else "a script"
    j.add("ask", f"{name} runs {target} in the current shell", opaque=True)


@rule("exec")
def _exec(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    if not args:
        j.add("ask", "exec changes the shell's file descriptors", opaque=True)
        return
    j.add("ask", "exec replaces the shell with another program", opaque=True)
    rest = skip_options(args, _words("-a"))
    if rest:
        j.merge(judge(rest, ctx.deeper()))


@rule("trap")
def _trap(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    if all(w.known in ("-l", "-p") for w in args):
        j.add("allow", "trap lists signal handlers")
    else:
        j.add("ask", "trap registers code to run later", opaque=True)


@rule("alias")
def _alias(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    if any(w.value is None or "=" in w.value for w in args):
        j.add("ask", "alias definitions change what later commands run", opaque=True)
    else:
        j.add("allow", "alias lists aliases")


@rule("read", "mapfile", "readarray", "printf", "getopts")
def _assigns(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    """Read-only, unless they set a variable such as PATH."""
    for k, w in enumerate(args):
        target = w.known
        if name == "printf":  # only `printf -v NAME` assigns
            after_v = args[k + 1].known if k + 1 < len(args) else None
            target = (target[2:] or after_v) if target and target.startswith("-v") else None
        why = sensitive_env(target, None) if target else None
        if why is not None:
            j.add("ask", f"{name} {why}")
            return
    j.add("allow", f"{name} is read-only")


@rule("hash", "umask")
def _hash_umask(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    if not args or (name == "umask" and all(w.known in ("-S", "-p") for w in args)):
        j.add("allow", f"{name} only prints")
    elif name == "hash":
        j.add("ask", "hash changes where command names resolve", opaque=True)
    else:
        j.add("ask", "umask changes the permissions of files created later")


# --------------------------------------------------------------------------- wrappers


def _run_inner(rest: list[Word], j: Judgement, ctx: Ctx, alone: str) -> None:
    if rest:
        j.merge(judge(rest, ctx.deeper()))
    else:
        j.add("allow", alone)


_WRAPPER_VALUES: dict[str, frozenset[str]] = {
    "nice": _words("-n --adjustment"),
    "timeout": _words("-s --signal -k --kill-after"),
    "stdbuf": _words("-i -o -e --input --output --error"),
    "ionice": _words("-c -n -p -P -u --class --classdata"),
    "sudo": _words("-u -g -C -D -h -p -r -t -U -T --user --group"),
    "doas": _words("-u -C"),
    "time": _words("-o --output -f --format"),
    **dict.fromkeys(("nohup", "setsid", "builtin", "busybox"), _words("")),
}


@rule(*_WRAPPER_VALUES)
def _wrapper(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    if name in ("sudo", "doas"):
        j.add("ask", f"{name} runs a command with elevated privileges")
    if name == "time" and any(long_is(w.known or "", "--output") or w.known == "-o" for w in args):
        j.add("ask", "time -o writes its report to a file")
    rest = skip_options(args, _WRAPPER_VALUES[name])
    if name == "timeout":
        rest = rest[1:]  # the duration
    if name in ("sudo", "doas") and not rest:
        j.add("ask", f"{name} opens a privileged shell")
    else:
        _run_inner(rest, j, ctx, f"{name} without a command only prints or does nothing")


@rule("env")
def _env(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    i = 0
    while i < len(args):
        v = args[i].known
        if v is None:
            j.add("ask", f"env: argument {args[i].brief} cannot be checked statically", opaque=True)
            return
        if v.startswith("-S") or long_is(v, "--split-string"):
            j.add("ask", "env -S splits a string into a command", opaque=True)
            return
        if v == "--":
            i += 1
            break
        if v.startswith("-") and len(v) > 1:
            i += 2 if v in ("-u", "--unset", "-C", "--chdir") else 1
        elif "=" in v and not v.startswith("="):
            if (why := sensitive_env(*v.split("=", 1))) is not None:
                j.add("ask", why)
            i += 1
        else:
            break
    _run_inner(args[i:], j, ctx, "env prints the environment")


@rule("command")
def _command(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    if args and args[0].known in ("-v", "-V"):
        j.add("allow", "command -v looks up a command")
    else:
        _run_inner(skip_options(args, _words("")), j, ctx, "command alone does nothing")


_XARGS_VALUES = _words(
    "-I -L -n -P -s -d -E -a --arg-file --delimiter --max-args --max-procs --max-lines --replace "
    "--eof --max-chars --process-slot-var"
)


@rule("xargs")
def _xargs(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    rest = skip_options(args, _XARGS_VALUES)
    if not rest:
        j.add("allow", "xargs echoes its input")
    elif rest[0].known is None:
        j.add("ask", f"xargs runs {rest[0].brief}, which is not known statically", opaque=True)
    else:
        inner = judge([*rest, STDIN_WORD], ctx.deeper())
        if inner.decision == "allow":
            j.add("allow", f"xargs runs {rest[0].known}, which is read-only")
        j.merge(inner)


# --------------------------------------------------------------------------- shells, interpreters


def _shell(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    i, inline, stdin = 0, False, False
    while i < len(args) and (v := args[i].known) is not None:
        if v == "--version" and len(args) == 1:
            j.add("allow", f"{name} --version prints a version")
            return
        if v in ("--", "-"):
            i, stdin = i + 1, v == "-"
            break
        if v.startswith("--"):
            i += 2 if v in ("--rcfile", "--init-file") else 1
        elif v[:1] in "-+" and len(v) > 1:
            inline, stdin = inline or "c" in v[1:], stdin or "s" in v[1:]
            i += 2 if v in ("-o", "+o", "-O", "+O") else 1
        else:
            break
    if inline and ctx.inline_spliced and _transparent_options(name, args):
        j.add("allow", f"{name} -c runs a script, judged command by command")
    elif inline:
        j.add("ask", f"{name} -c runs a command string", opaque=True)
        if i < len(args) and args[i].value is not None:
            _check_payload(args[i].value or "", j, ctx)
    elif stdin or i >= len(args):
        j.add("ask", f"{name} reads commands from its input", opaque=True)
    elif args[i].known is None:
        j.add("ask", f"{name} runs a script named by {args[i].brief}", opaque=True)
    else:
        j.add("ask", f"{name} runs the script {args[i].known}")


# Shells whose `-c` script the bash parser reads as they do, and the options that leave it so.
_TRANSPARENT_SHELLS = _words("sh bash dash ksh mksh ash zsh")
_SET_OPTIONS = _words("pipefail errexit nounset xtrace verbose noclobber noglob")
_ZSH_PLAIN = re.compile(r"[A-Za-z0-9_./:=@%+,'\"\s|&;$<>-]*")


def _transparent_options(name: str, args: list[Word]) -> int | None:
    """Index of the script among ``args`` when ``name ARGS`` is ``bash -c SCRIPT [args]``
    with only options that change nothing about how SCRIPT parses or what it reads first
    (``-l`` reads the user's own profile); else None."""
    i, inline = 0, False
    while i < len(args):
        v = args[i].known
        if v is None:
            return None
        if v in ("--login", "--noprofile", "--norc"):
            i += 1
        elif v == "--":  # the end of the options: the script follows
            i += 1
            break
        elif v in ("-o", "+o") and i + 1 < len(args) and args[i + 1].known in _SET_OPTIONS:
            i += 2
        elif re.fullmatch(r"-[lceuxv]+|\+[euxv]+", v):
            inline = inline or "c" in v
            i += 1
        else:
            break
    if not inline or i >= len(args) or args[i].known is None:
        return None
    if name == "zsh" and not _ZSH_PLAIN.fullmatch(args[i].known or ""):
        return None  # glob qualifiers, `=(...)`, `${(e)...}`: zsh is not bash there
    return i


def transparent_script(words: Sequence[Word]) -> tuple[int, str] | None:
    """``(index, script)`` when the command is a shell wrapper (``bash -lc "ls && pwd"``,
    ``timeout 5 sh -c '...'``) whose script can be judged as if written on the line.

    Follows the same wrappers as `judge` does (env, timeout, nice, sudo, ...), never xargs
    (its input can end up in the script)."""
    k = 0
    for _ in range(8):
        name = words[k].known if k < len(words) else None
        if name is None:
            return None
        if "/" in name:
            folder, _, base = name.rpartition("/")
            if folder not in SYSTEM_DIRS:
                return None
            name = base
        args = list(words[k + 1 :])
        if name in _TRANSPARENT_SHELLS:
            index = _transparent_options(name, args)
            if index is None:
                return None
            return k + 1 + index, args[index].known or ""
        if name in _WRAPPER_VALUES:
            rest = skip_options(args, _WRAPPER_VALUES[name])
            rest = rest[1:] if name == "timeout" else rest
        elif name == "env":
            rest = skip_options(args, _words("-u --unset"))
            while rest and rest[0].known and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", rest[0].known):
                rest = rest[1:]
        elif name == "command" and not (args and args[0].known in ("-v", "-V")):
            rest = skip_options(args, _words(""))
        else:
            return None
        if not rest:
            return None
        k = len(words) - len(rest)
    return None


def _interpreter(name: str, family: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    letters, long_inline, with_value, version = INTERPRETERS[family]
    if len(args) == 1 and args[0].known in version:
        j.add("allow", f"{name} {args[0].known} prints a version")
        return
    i = 0
    while i < len(args):
        v = args[i].known
        if v is None:
            j.add("ask", f"{name}: argument {args[i].brief} cannot be checked statically", True)
            return
        short = v[1:] if v.startswith("-") and not v.startswith("--") else ""
        if v.split("=", 1)[0] in long_inline or any(c in letters for c in short):
            j.add("ask", f"{name} {v.split('=', 1)[0]} runs inline code", opaque=True)
            return
        if family == "python" and "m" in short:
            module = short[short.index("m") + 1 :] or (
                args[i + 1].shown if i + 1 < len(args) else ""
            )
            if module in INSTALLS:  # python -m pip install ...: the network, site-packages
                j.add("ask", f"{name} -m {module} installs or manages packages")
            else:
                j.add("ask", f"{name} -m {module} runs the module {module} (project code)")
            return
        if v == "-" or not v.startswith("-"):
            break
        i += 1
        if v == "--":
            break
        i += v in with_value
    if i >= len(args) or args[i].known == "-":
        j.add("ask", f"{name} reads a program from its input", opaque=True)
    else:
        j.add("ask", f"{name} runs the script {args[i].shown}")


@rule("pip", "pip3", "npm", "yarn", "pnpm", "go", "cargo", "uv", "poetry")
def _packages(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    sub = first_positional(args)
    if len(args) == 1 and args[0].known in ("--version", "-v", "-V", "version"):
        j.add("allow", f"{name} {args[0].known} prints a version")
    elif (name, sub) in _LISTING and all(w.known is not None for w in args):
        j.add("allow", f"{name} {sub} only lists")
    elif sub in ("install", "i", "ci", "add", "update", "upgrade", "remove", "uninstall", "sync"):
        j.add("ask", f"{name} {sub} installs or removes packages (and may run their scripts)")
    elif sub in ("publish", "upload"):
        j.add("ask", f"{name} {sub} uploads a package")
    elif sub in _PROJECT_SCRIPTS.get(name, ()):
        j.add("ask", f"{name} {sub} runs project scripts (project code)")
    elif name in INSTALLS and sub:
        j.add("ask", f"{name} {sub} manages packages or runs project scripts")
    else:
        add_ask(j, name)


_NODE_SCRIPTS = _words("test t tst run run-script rum urn start build")
_PROJECT_SCRIPTS = {"npm": _NODE_SCRIPTS, "yarn": _NODE_SCRIPTS, "pnpm": _NODE_SCRIPTS}
_PROJECT_SCRIPTS |= {"uv": _words("run"), "poetry": _words("run")}
_LISTING = {(p, s) for p in ("pip", "pip3") for s in ("list", "show", "freeze")}
_LISTING |= {("npm", "ls"), ("npm", "list"), ("go", "version")}


# --------------------------------------------------------------------------- option helpers


def split_options(args: Sequence[Word]) -> tuple[list[str], list[Word]]:
    """Options (words that start with `-`) and operands; everything after `--` is an operand."""
    opts: list[str] = []
    operands: list[Word] = []
    done = False
    for w in args:
        v = w.known
        if not done and v == "--":
            done = True
        elif not done and v is not None and v.startswith("-") and len(v) > 1:
            opts.append(v)
        else:
            operands.append(w)
    return opts, operands


def has_short(opt: str, letters: str) -> bool:
    return opt.startswith("-") and not opt.startswith("--") and any(c in letters for c in opt[1:])


def long_is(opt: str, *names: str) -> str | None:
    """The long option among `names` that `opt` selects, counting the unique-prefix
    abbreviations getopt_long accepts (`--in-pl` is `--in-place`)."""
    key = opt.split("=", 1)[0]
    if not key.startswith("--") or len(key) < 3:
        return None
    return next((n for n in names if n.startswith(key)), None)


def skip_options(args: Sequence[Word], with_value: frozenset[str]) -> list[Word]:
    """Drop leading options (and the values of those in `with_value`); return what follows."""
    i = 0
    while i < len(args):
        v = args[i].known
        if v is None or not v.startswith("-") or v == "-":
            break
        if v == "--":
            i += 1
            break
        i += 2 if v in with_value else 1
    return list(args[i:])


def first_positional(args: Sequence[Word]) -> str | None:
    return next((w.known for w in args if w.known and not w.known.startswith("-")), None)


def positionals(args: Sequence[Word], with_value: frozenset[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for v in (w.known or "" for w in args):
        if skip:
            skip = False
        elif v in with_value:
            skip = True
        elif not v.startswith("-") or v == "-":
            out.append(v)
    return out


# --------------------------------------------------------------------------- argument checkers
# A checker returns None when the invocation is read-only, else the reason (after the name).

Checker = Callable[[list[Word]], str | None]


def checker(*names: str) -> Callable[[Checker], Checker]:
    """Register a checker; any argument that is not statically known asks."""

    def register(check: Checker) -> Checker:
        def handler(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
            unknown = next((w for w in args if w.known is None), None)
            if unknown is not None:
                j.add("ask", f"{name}: argument {unknown.brief} cannot be checked statically")
                return
            why = check(args)
            if why is not None:
                j.add("ask", f"{name} {why}")
                return
            label = name
            if name == "git":
                vals = [w.known or "" for w in args]
                label = " ".join(["git", *vals[git_globals(vals)[0] :][:1]])
            j.add("allow", f"{label} is read-only here")

        for n in names:
            HANDLERS[n] = handler
        return check

    return register


def flag_checker(names: str, bad: dict[str, str]) -> None:
    """Register a checker that asks when one of the `bad` options is given."""

    def check(args: list[Word]) -> str | None:
        for key in ((w.known or "").split("=", 1)[0] for w in args):
            hit = key if key in bad else long_is(key, *(k for k in bad if k.startswith("--")))
            if hit is not None:
                return f"{key} {bad[hit]}"
        return None

    checker(*names.split())(check)


flag_checker("tree", {"-o": "writes its output to a file", "-R": "writes index files"})
flag_checker("file", dict.fromkeys(("-C", "--compile"), "compiles a magic file (writes)"))
flag_checker("yq", dict.fromkeys(("-i", "--inplace"), "edits files in place"))
flag_checker("fd fdfind", dict.fromkeys(("-x", "--exec", "-X", "--exec-batch"), "runs commands"))
_FIND_UNSAFE = dict.fromkeys(("-exec", "-execdir", "-ok", "-okdir"), "runs a command for each file")
_FIND_UNSAFE |= dict.fromkeys(("-fls", "-fprint", "-fprint0", "-fprintf"), "writes a file list")
_FIND_UNSAFE["-delete"] = "deletes files"


@checker("find")
def find_check(args: list[Word]) -> str | None:
    bad = next((w.known for w in args if w.known in _FIND_UNSAFE), None)
    return f"{bad} {_FIND_UNSAFE[bad]}" if bad else None


@checker("rg")
def rg_check(args: list[Word]) -> str | None:
    for v in (w.known or "" for w in args):
        hit = long_is(v, "--pre", "--hostname-bin", "--search-zip")
        if hit == "--search-zip" or has_short(v, "z"):
            return f"{v} runs decompression programs"
        if hit is not None:
            return f"{v} runs an external program"
    return None


@checker("sort")
def sort_check(args: list[Word]) -> str | None:
    for o in split_options(args)[0]:
        hit = long_is(o, "--compress-program", "--output")
        if hit == "--compress-program":
            return f"{o} runs a program"
        if hit == "--output" or has_short(o, "o"):
            return f"{o} writes its output to a file"
    return None


@checker("uniq")
def uniq_check(args: list[Word]) -> str | None:
    pos = positionals(args, _words("-f -s -w"))
    return f"writes its output to {pos[1]}" if len(pos) > 1 else None


@checker("xxd")
def xxd_check(args: list[Word]) -> str | None:
    pos = positionals(
        args, _words("-c -g -l -s -o -n -C -cols -len -seek -groupsize -offset -name")
    )
    return f"writes to {pos[1]}" if len(pos) > 1 else None


@checker("base64")
def base64_check(args: list[Word]) -> str | None:
    bad = [o for o in split_options(args)[0] if o.startswith("-o") or long_is(o, "--output")]
    return f"{bad[0]} writes to a file" if bad else None


@checker("date")
def date_check(args: list[Word]) -> str | None:
    if any(w.known and (w.known.startswith("-s") or long_is(w.known, "--set")) for w in args):
        return "--set changes the system clock"
    pos = positionals(args, _words("-d --date -r --reference -f --file"))
    return "MMDDhhmm sets the system clock" if any(p[:1] != "+" for p in pos) else None


@rule("tee")
def _tee(name: str, args: list[Word], j: Judgement, ctx: Ctx) -> None:
    harmless = ("/dev/null", "/dev/stdout", "/dev/stderr", "-")
    files = [w.shown for w in split_options(args)[1] if w.shown not in harmless]
    if files:
        j.add("ask", f"tee writes to {', '.join(files)}")
    else:
        j.add("allow", "tee without files only copies its input")


@checker("hostname")
def hostname_check(args: list[Word]) -> str | None:
    if positionals(args, _words("")) or any(w.known in ("-F", "--file") for w in args):
        return "with an argument sets the host name"
    return None


_SED_LONG_OK = _words(
    "--quiet --silent --regexp-extended --posix --null-data --zero-terminated --separate "
    "--sandbox --debug --unbuffered --line-length --follow-symlinks --binary --help --version"
)


@checker("sed")
def sed_check(args: list[Word]) -> str | None:
    scripts: list[str] = []
    explicit = False  # a script came from -e / --expression: operands are files
    i = 0
    while i < len(args):
        v, nxt = args[i].known or "", args[i + 1].known if i + 1 < len(args) else None
        i += 1
        if v == "--":
            break
        if v.startswith("--"):
            hit = long_is(v, "--in-place", "--file", "--expression")
            if hit == "--in-place":
                return f"{v} edits files in place"
            if hit == "--file":
                return f"{v} runs a script file that cannot be checked"
            if hit == "--expression":
                scripts.append(v.split("=", 1)[1] if "=" in v else nxt or "")
                explicit, i = True, i + ("=" not in v)
            elif long_is(v, *_SED_LONG_OK) is None:
                return f"option {v} is not known to be safe"
        elif v.startswith("-") and len(v) > 1:
            for k, c in enumerate(v[1:], start=1):
                if c == "i":
                    return f"{v} edits files in place"
                if c == "f":
                    return "-f runs a script file that cannot be checked"
                if c not in "nrEsuzel":
                    return f"option {v} is not known to be safe"
                if c in "el":  # the rest of the word, or the next one, is the value
                    if c == "e":
                        scripts.append(v[k + 1 :] or nxt or "")
                        explicit = True
                    i += not v[k + 1 :]
                    break
        elif not explicit and not scripts:
            scripts.append(v)
    bad = next((s for s in scripts if not sed_script_safe(s)), None)
    return f"script {bad!r} may write files or run commands, or is not understood" if bad else None


def _skip_delim(s: str, i: int, delim: str) -> int:
    """Index after the closing (unescaped) delimiter, -1 when there is none."""
    while i < len(s):
        if s[i] == "\\":
            i += 2
        elif s[i] == delim:
            return i + 1
        elif s[i] == "\n":
            return -1
        else:
            i += 1
    return -1


def _sed_address(s: str, i: int) -> int:
    n = len(s)
    if i < n and s[i].isdigit():
        while i < n and (s[i].isdigit() or s[i] == "~"):
            i += 1
    elif i < n and s[i] == "$":
        i += 1
    elif i < n and s[i] in "/\\":
        start, delim = (i + 1, "/") if s[i] == "/" else (i + 2, s[i + 1] if i + 1 < n else "")
        i = _skip_delim(s, start, delim) if delim else -1
        while 0 <= i < n and s[i] in "IM":
            i += 1
    return i


def sed_script_safe(s: str) -> bool:
    """A small sed parser: True only when every command is known not to write or execute."""
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in " \t\n;":
            i += 1
        if i >= n:
            return True
        i = _sed_address(s, i)
        if 0 <= i < n and s[i] == ",":
            i = _sed_address(s, i + 2 if i + 1 < n and s[i + 1] in "+~" else i + 1)
        while 0 <= i < n and s[i] in " \t!":
            i += 1
        if not 0 <= i < n:
            return False
        c, i = s[i], i + 1
        if c in "pdDgGhHlnNPqQxz=F":
            while i < n and s[i] in "0123456789 \t":
                i += 1
            if i < n and s[i] not in ";\n}":
                return False  # `xp`: no separator, sed refuses it
        elif c in "sy":
            if i >= n or s[i] in "\\\n":
                return False
            i = _skip_delim(s, i + 1, s[i])
            i = _skip_delim(s, i, s[i - 1]) if i >= 0 else -1
            if i < 0:
                return False
            while i < n and s[i] not in ";\n}":
                if s[i] not in " \t" and (c == "y" or s[i] not in "gpiImM0123456789"):
                    return False  # the `w FILE` and `e` flags
                i += 1
        elif c in "aic#rRbtT:v":  # text, comments and file names run to the line end
            while i < n and s[i] not in ("\n" if c in "aic#rR" else ";\n"):
                i += 1
        elif c not in "{}":  # w/W write files, e executes; anything else is not understood
            return False


def _awk_strip(p: str) -> str:
    """Blank out string and regex literals so `|` and `>` inside them do not count."""
    out: list[str] = []
    i, prev = 0, ""
    while i < len(p):
        c = p[i]
        if c == '"' or (c == "/" and prev in ("", "(", ",", "~", "!", "&", "|", "{", "}", ";")):
            end = _skip_delim(p, i + 1, c)
            if end < 0:
                return p  # unbalanced: keep everything, the caller will ask
            out.append('""')
            i, prev = end, '"'
            continue
        out.append(c)
        prev = ";" if c == "\n" else prev if c.isspace() else c
        i += 1
    return "".join(out)


def awk_program_safe(program: str) -> bool:
    p = _awk_strip(program)
    if re.search(r"\bsystem\s*\(|@load|@include|\|&|(?<!\|)\|(?!\|)", p):
        return False  # system(), `print | "cmd"`, `"cmd" | getline`, extensions
    for segment in re.split(r"[;{}\n]", p):
        while re.search(r"\([^()]*\)", segment):
            segment = re.sub(r"\([^()]*\)", "", segment)  # `print (a > b)` compares
        if re.search(r"\bprintf?\b", segment) and ">" in segment:
            return False  # `print > "file"`
    return True


_AWK_LONG_OK = _words(
    "--field-separator --assign --characters-as-bytes --traditional --copyright --help --lint "
    "--non-decimal-data --optimize --no-optimize --posix --re-interval --sandbox "
    "--use-lc-numeric --version --bignum --csv --source"
)
_AWK_LONG_BAD = _words(
    "--file --include --load --exec --dump-variables --profile --pretty-print --debug"
)


@checker("awk", "gawk", "mawk", "nawk")
def awk_check(args: list[Word]) -> str | None:
    program: str | None = None
    i = 0
    while i < len(args):
        v, nxt = args[i].known or "", args[i + 1].known if i + 1 < len(args) else None
        if v == "--":
            i += 1
            break
        if v.startswith("--"):
            hit = long_is(v, *_AWK_LONG_BAD) or long_is(v, *_AWK_LONG_OK)
            if hit is None or hit in _AWK_LONG_BAD:
                return f"option {v} may load code or write files"
            if hit == "--source":
                program = v.split("=", 1)[1] if "=" in v else nxt
            takes = hit in ("--source", "--field-separator", "--assign") and "=" not in v
            i += 1 + takes
        elif v.startswith("-") and len(v) > 1:
            if v[1] in "Fve":
                program = (v[2:] or nxt) if v[1] == "e" else program
                i += 1 if len(v) > 2 else 2
            elif v[1] in "bcCgMnNOrsStV" and len(v) == 2:
                i += 1
            else:  # -f file, -i include, -l load, -E exec, -d/-p/-o write files, -W ...
                return f"option {v} may load code or write files"
        else:
            break
    if program is None:
        program = args[i].known if i < len(args) else None
    if program is None:
        return "without a program text cannot be checked"
    if not awk_program_safe(program):
        return "program may run commands or write files (system, pipes or redirects)"
    return None


# --------------------------------------------------------------------------- git

_GIT_VALUE_OPTS = _words("-C --git-dir --work-tree --namespace --super-prefix")
_GIT_FLAGS = _words(
    "--no-pager -P --bare --no-replace-objects --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-lazy-fetch"
)
GIT_READ = _words(
    """status log diff show blame annotate rev-parse ls-files ls-tree cat-file shortlog describe
    rev-list grep merge-base name-rev show-ref for-each-ref count-objects check-ignore check-attr
    whatchanged show-branch cherry diff-tree diff-files diff-index range-diff version var
    verify-commit verify-tag check-ref-format"""
)
GIT_REMOTE = _words("fetch push pull clone ls-remote send-email request-pull svn p4 archive")
_GIT_UNSAFE = _words(
    "--output --ext-diff --textconv --exec --open-files-in-pager --upload-pack --receive-pack "
    "--paginate"
)


def git_globals(vals: list[str]) -> tuple[int, str | None]:
    """Index of the git subcommand after the global options, or the reason to ask."""
    i = 0
    while i < len(vals):
        v = vals[i]
        if (v.startswith("-c") and v[1:2] == "c") or long_is(v, "--config-env", "--exec-path"):
            return i, f"{v} overrides configuration (can make git run arbitrary programs)"
        if v == "-p" or long_is(v, "--paginate"):
            return i, f"{v} runs a pager"
        if v in ("--version", "--help", "-h"):
            return len(vals), None
        key = v.split("=", 1)[0]
        if key in ("--git-dir", "--work-tree"):
            return i, f"{key} points git at another repository (its hooks and config run code)"
        if v in _GIT_VALUE_OPTS:
            i += 2
        elif v in _GIT_FLAGS or v.split("=", 1)[0] in _GIT_VALUE_OPTS:
            i += 1
        elif v.startswith("-"):
            return i, f"global option {v} is not known to be safe"
        else:
            break
    return i, None


@checker("git")
def git_check(args: list[Word]) -> str | None:
    vals = [w.known or "" for w in args]
    i, why = git_globals(vals)
    if why is not None or i >= len(vals):
        return why
    sub, rest = vals[i], vals[i + 1 :]
    for a in rest:
        if long_is(a, *_GIT_UNSAFE) or (sub == "grep" and a.startswith("-O")):
            return f"{sub} {a} writes files or runs external programs"
    if sub in GIT_READ:
        return None
    if sub in _GIT_SPECIAL:
        return _GIT_SPECIAL[sub](rest)
    if sub in GIT_REMOTE:
        return f"{sub} reaches a remote"
    if sub in ("difftool", "mergetool", "gui", "citool"):
        return f"{sub} runs external programs"
    return f"{sub} changes the repository or working tree"


_BRANCH_LIST = _words(
    "--list --all --remotes --show-current --contains --no-contains --merged --no-merged "
    "--points-at"
)
_BRANCH_NEUTRAL = _words(
    "--verbose --sort --format --column --no-column --color --no-color --ignore-case --abbrev "
    "--no-abbrev --quiet"
)


def _git_branch(rest: list[str]) -> str | None:
    listing = positional = False
    for a in rest:
        key = a.split("=", 1)[0]
        if a.startswith("--") and key not in _BRANCH_LIST | _BRANCH_NEUTRAL:
            return f"branch {a} changes branches"
        if a.startswith("-") and not a.startswith("--") and any(c not in "larviq" for c in a[1:]):
            return f"branch {a} changes branches"
        listing = listing or key in _BRANCH_LIST or has_short(a, "lar")
        positional = positional or not a.startswith("-")
    return "branch NAME creates a branch" if positional and not listing else None


_TAG_LISTING = ("-n", "--contains", "--no-contains", "--points-at", "--merged", "--no-merged")


def _git_tag(rest: list[str]) -> str | None:
    listing = positional = False
    for a in rest:
        if a in ("-l", "--list") or a.startswith(_TAG_LISTING):
            listing = True
        elif a.startswith(("--sort", "--format", "--column", "--color", "-i", "--ignore-case")):
            continue
        elif a.startswith("-"):
            return f"tag {a} creates or deletes tags"
        else:
            positional = True
    return "tag NAME creates a tag" if positional and not listing else None


_CONFIG_WRITES = _words("set unset edit rename-section remove-section")


def _git_config(rest: list[str]) -> str | None:
    pos = [a for a in rest if not a.startswith("-")]
    writes = _words("--add --unset --unset-all --replace-all --rename-section --remove-section")
    writes |= {"--edit", "-e"}
    if any(a in writes for a in rest) or (pos and pos[0] in _CONFIG_WRITES):
        return "config changes configuration"
    reads = ("--get", "--get-all", "--get-regexp", "--list", "-l", "--get-urlmatch", "--get-color")
    if pos[:1] in (["get"], ["list"]) or any(a in reads for a in rest) or len(pos) == 1:
        return None
    return "config changes configuration"


def _git_remote(rest: list[str]) -> str | None:
    pos = [a for a in rest if not a.startswith("-")]
    if not pos:
        return None if all(a in ("-v", "--verbose") for a in rest) else "remote with options"
    if pos[0] == "get-url":
        return None
    if pos[0] in ("show", "update", "prune"):
        return f"remote {pos[0]} reaches a remote"
    return f"remote {pos[0]} changes the configured remotes"


def _sub_only(name: str, ok: str, why: str) -> Callable[[list[str]], str | None]:
    def check(rest: list[str]) -> str | None:
        sub = next((a for a in rest if not a.startswith("-")), "")
        return None if sub in ok.split(",") else f"{name} {sub} {why}".replace("  ", " ")

    return check


def _git_help(rest: list[str]) -> str | None:
    viewer = next((a for a in rest if a in ("-w", "--web", "-i", "--info", "-m", "--man")), None)
    return f"help {viewer} opens a browser or viewer" if viewer else None


_GIT_SPECIAL: dict[str, Callable[[list[str]], str | None]] = {
    "help": _git_help,
    "branch": _git_branch,
    "tag": _git_tag,
    "config": _git_config,
    "remote": _git_remote,
    "stash": _sub_only("stash", "list,show", "changes the working tree"),
    "reflog": _sub_only("reflog", ",show", "rewrites the reflog"),
    "worktree": _sub_only("worktree", "list", "changes worktrees"),
    "submodule": _sub_only("submodule", ",status,summary", "reaches remotes or runs commands"),
    "notes": _sub_only("notes", ",list,show", "changes notes"),
}
