"""Shell-command safety classifier on a real parser (tree-sitter-bash).

`classify(command)` parses the line, finds every simple command in it (lists, pipelines,
subshells, groups, functions, command and process substitutions, here-doc pipelines) and judges
each one with the rules in `shell_rules`:

- allow: clearly read-only inspection (`ls`, `grep`, `git status`, `sed -n 1,5p f`, ...);
- ask: anything that writes, deletes, installs, runs project code, reaches the network, changes
  privileges, kills processes or touches git history, and every command not on the allowlist;
- ask + opaque: what cannot be decided statically (`eval`, `source`, `bash -c`, `python -c`,
  substitutions or variables in command position, `$'...'` names, parse errors, ...);
- deny: a short list of catastrophic forms (`rm -rf /`, `mkfs`, `dd of=/dev/sda`, fork bombs).

Nothing here runs a command: the module only reads the parse tree.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from dataclasses import dataclass
from typing import Literal

import tree_sitter
import tree_sitter_bash

from agent_ls.safety.shell_rules import (
    DECODERS,
    DISK_RE,
    RANK,
    SHELLS,
    Ctx,
    Judgement,
    Word,
    interpreter_family,
    is_known_command,
    judge,
    sensitive_env,
    transparent_script,
)
from agent_ls.safety.shell_words import assigned_value, expand_word, join_continuations

__all__ = ["SimpleCommand", "Verdict", "classify"]

Decision = Literal["allow", "ask", "deny"]
Effect = tuple[
    Decision, str, bool
]  # what a redirection or assignment adds: decision, reason, opaque
Node = tree_sitter.Node


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    text: str  # the simple command's source text as written (with its own redirections)
    name: str  # command name as parsed ("git"), "" if not a plain word
    argv: tuple[str, ...]  # name + arguments with quotes removed where statically known
    decision: Decision
    reasons: tuple[str, ...]
    # Per argv word: what bash expands it to (`~`, `$HOME`, braces), None when only known at
    # run time, () when it is not a path at all (the script of `bash -c`).
    expanded: tuple[tuple[str, ...] | None, ...] = ()
    # Files read through an input redirection (`< f`, `$(< f)`, `done < f`): as written, and
    # expanded as for `expanded`.
    reads: tuple[tuple[str, tuple[str, ...] | None], ...] = ()
    # Indices of argv words made of data the line computes when it runs (`$(cat list)`, a
    # variable set by `read` or from a substitution): file names nobody typed.
    computed: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision  # the most severe over all parts: deny > ask > allow
    reasons: list[str]
    commands: list[SimpleCommand]  # every simple command found, in source order
    opaque: bool  # something could not be decided statically

    def to_json(self) -> dict[str, object]:
        """The `agent-ls check-command` output object."""
        return {"decision": self.decision, "reasons": list(self.reasons)}


# tree-sitter-bash splits words at CR, VT and FF; bash does not (`echo a\r#; rm x` runs rm).
# The parser reads them as a plain word character (same length, so offsets stay); the text
# shown and judged is always the original.
_NOT_BLANKS = bytes.maketrans(b"\r\v\f", b"\x01\x01\x01")
_LOCK = threading.Lock()
_PARSER: tree_sitter.Parser | None = None
MAX_LENGTH = 100_000


def classify(command: str) -> Verdict:
    """Judge a shell command line without running it."""
    return _classify(command, 0)


def _parse(src: bytes) -> tree_sitter.Tree:
    global _PARSER
    with _LOCK:  # created once, lazily; a Parser is not safe to share between threads
        if _PARSER is None:
            _PARSER = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
        return _PARSER.parse(src)


def _classify(command: str, depth: int) -> Verdict:
    if "\x00" in command or len(command) > MAX_LENGTH:
        why = "a NUL byte" if "\x00" in command else "more text than is analysed"
        return Verdict("ask", [f"the command contains {why}: {_OPAQUE}"], [], True)
    src = command.encode("utf-8", "surrogateescape")
    root = _parse(src.translate(_NOT_BLANKS)).root_node
    if b"\\\n" in src:  # bash joins `tr\<newline>uncate` into one word; tree-sitter splits it
        joined = join_continuations(src, _kept_continuations(root))
        if joined != src:
            src = joined
            root = _parse(src.translate(_NOT_BLANKS)).root_node
    w = _Walker(src, depth)
    try:
        if root.has_error:
            bad = _first_error(root) or root
            near = f"missing {bad.type}" if bad.is_missing else f"near {w.text(bad)[:40]!r}"
            w.flag(bad, f"the command could not be parsed ({near})")
        if _hidden_continuation(src.decode("utf-8", "surrogateescape")):
            w.flag(root, "a line continuation after `$` hides an expansion")
        w.walk(root, ())
        if w.arithmetic and w.runtime_data:
            w.flag(root, "arithmetic on values computed at run time can run code in them (a[$(x)])")
    except RecursionError:
        w.flag(root, "the command is nested too deeply")
    found = sorted(w.found, key=lambda f: f[0])
    commands = [cmd for _, cmd, _ in found]
    decision: Decision = max((c.decision for c in commands), key=RANK.__getitem__, default="allow")
    reasons: list[str] = []
    for level in ("deny", "ask") if decision != "allow" else ("allow",):
        for cmd in commands:
            if RANK[cmd.decision] >= RANK[level] and (level != "ask" or cmd.decision == "ask"):
                reasons += [r for r in cmd.reasons if r not in reasons]
    return Verdict(decision, reasons or ["nothing to run"], commands, any(o for *_, o in found))


def _payload(text: str, depth: int) -> Judgement:
    """The rules' view of a nested command string (`bash -c PAYLOAD`, `eval ...`)."""
    verdict = _classify(text, depth)
    j = Judgement(opaque=verdict.opaque)
    for cmd in verdict.commands:
        for reason in cmd.reasons:
            j.add(cmd.decision, reason)
    return j


_OPAQUE = "cannot be analysed statically (opaque)"
# Nodes whose named children are walked as they are.
_CONTAINERS = frozenset(
    """program list subshell compound_statement do_group if_statement elif_clause else_clause
    while_statement for_statement c_style_for_statement case_statement case_item negated_command
    concatenation array subscript arithmetic_expansion binary_expression unary_expression
    ternary_expression postfix_expression parenthesized_expression variable_assignments
    translated_string brace_expression command_name herestring_redirect string ERROR""".split()  # noqa: SIM905
)
# Nodes that hold no command.
_LEAVES = frozenset(
    """word raw_string ansi_c_string number string_content variable_name special_variable_name
    simple_expansion file_descriptor heredoc_start heredoc_end heredoc_content test_operator regex
    extglob_pattern comment""".split()  # noqa: SIM905
)
_TEXT_CHECKED = frozenset({"word", "raw_string", "string_content", "regex", "extglob_pattern"})
_SUBSCRIPT_RE = re.compile(r"\[[^\]]*(\$\(|`)")
_ARITH_RE = re.compile(r"\(\(|\[\[.*\s-(eq|ne|lt|le|gt|ge)\s", re.S)
_INPUT = "\x00input:"  # marks an Effect that records a file read, not a judgement
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})


class _Walker:
    def __init__(self, src: bytes, depth: int) -> None:
        self.src = src
        self.ctx = Ctx(depth, _payload)
        self.found: list[tuple[int, SimpleCommand, bool]] = []  # (start byte, command, opaque)
        self.arithmetic = False  # saw $((..)), ((..)), let or [[ -eq ]]
        self.runtime_data = False  # saw a value computed at run time (read, x=$(..), for .. in)
        # Variables the line sets, with every value they may hold (None: only known at run time).
        self.vars: dict[str, tuple[str, ...] | None] = {}

    def computed(self, raw: str) -> bool:
        """The word holds a substitution or a variable the line set from run-time data."""
        if _count_unescaped(raw, "$(") or _count_unescaped(raw, "`"):
            return True
        names = re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", raw)
        return any(n in self.vars and self.vars[n] is None for n in names)

    def bind(self, name: str, values: tuple[str, ...] | None) -> None:
        if name in self.vars:
            before = self.vars[name]
            values = None if before is None or values is None else before + values
        self.vars[name] = values

    def text(self, node: Node, end: int | None = None) -> str:
        return self.src[node.start_byte : max(node.end_byte, end or 0)].decode("utf-8", "replace")

    def record(
        self,
        node: Node,
        text: str,
        name: str,
        argv: tuple[str, ...],
        j: Judgement,
        expanded: tuple[tuple[str, ...] | None, ...] = (),
        reads: tuple[str, ...] = (),
    ) -> None:
        inputs = tuple((raw, expand_word(raw, self.vars)) for raw in reads)
        cmd = SimpleCommand(text, name, argv, j.decision, tuple(j.reasons), expanded, inputs)
        self.found.append((node.start_byte, cmd, j.opaque))

    def pseudo(
        self, node: Node, j: Judgement, text: str | None = None, reads: tuple[str, ...] = ()
    ) -> None:
        """A finding on a construct that is not a simple command (name "", no argv)."""
        self.record(node, text or self.text(node), "", (), j, reads=reads)

    def flag(self, node: Node, why: str, decision: Decision = "ask", text: str = "") -> None:
        self.pseudo(node, Judgement().add(decision, why, decision == "ask"), text or None)

    # ------------------------------------------------------------------ words

    def static(self, node: Node) -> str | None:
        """The word's value when no expansion or substitution takes part in it."""
        t, raw = node.type, self.text(node)
        if t == "word":
            return re.sub(r"\\(.)", _unescape, raw, flags=re.S)
        if t == "number":
            return raw
        if t == "raw_string":
            return raw[1:-1]
        if t == "string":  # a lone `$` in a string is literal
            if all(c.type in ('"', "string_content", "$") for c in node.children):
                return re.sub(r'\\([$`"\\\n])', _unescape, raw[1:-1])
            return None
        if t == "concatenation":
            parts = [self.static(c) if c.is_named else None for c in node.children]
            return None if None in parts else "".join(p or "" for p in parts)
        return None

    def word(self, node: Node) -> Word:
        raw = self.text(node)
        first = node.children[0] if node.type == "concatenation" and node.children else node
        head = self.text(first)[:1]
        # `*.txt` can expand to `-i.txt`; `src/*.txt` never starts with a dash
        glob = first.type == "word" and (
            head in ("*", "?", "[")
            or (head in ("{", "-") and bool(re.search(r"(?<!\\)[*?\[]|\{[^}]*(,|\.\.)", raw)))
        )
        return Word(raw, self.static(node), glob)

    def command_name(self, node: Node) -> tuple[Word, str | None]:
        kinds: set[str] = set()
        words: list[str] = []
        stack = [node]
        while stack:
            n = stack.pop()
            kinds.add(n.type)
            words += [self.text(n)] if n.type == "word" else []
            stack.extend(n.children)
        w = self.word(node.named_children[0] if node.named_children else node)
        if kinds & {"command_substitution", "process_substitution"}:
            return w, f"command substitution used as the command name {w.brief}"
        if "ansi_c_string" in kinds:
            return w, f"ANSI-C quoting in the command name {w.brief}"
        if kinds & {"simple_expansion", "expansion", "arithmetic_expansion"}:
            return w, f"a variable or expansion in command position ({w.brief})"
        if w.value is None:
            return w, f"the command name {w.brief} cannot be determined statically"
        if any(re.search(r"(?<!\\)[*?\[]|\{.*(,|\.\.)", x) for x in words):
            return w, f"a glob or brace pattern in the command name {w.brief}"
        return (w, None) if w.value else (w, "an empty command name")

    # ------------------------------------------------------------------ the walk

    def walk(self, node: Node, inherited: tuple[Effect, ...]) -> None:
        t = node.type
        if t in _TEXT_CHECKED:
            self.check_text(node, t)
        if t in ("arithmetic_expansion", "c_style_for_statement") or (
            t in ("compound_statement", "test_command") and _ARITH_RE.match(self.text(node))
        ):
            self.arithmetic = True
        if t == "for_statement" and node.child_by_field_name("value") is not None:
            self.runtime_data = True
        if t in ("for_statement", "select_statement"):
            var = node.child_by_field_name("variable")
            items = node.children_by_field_name("value")
            values: list[str] | None = [] if items else None
            for item in items:
                expanded = expand_word(self.text(item), self.vars)
                values = None if values is None or expanded is None else values + list(expanded)
            if var is not None:
                self.bind(self.text(var), tuple(values) if values is not None else None)
            why = sensitive_env(self.text(var), None) if var is not None else None
            if var is not None and why is not None:
                j = Judgement().add("ask", f"the loop {why}")
                self.pseudo(var, j, f"for {self.text(var)} in ...")
        if t == "command":
            self.simple(node, inherited, None)
        elif t == "redirected_statement":
            self.redirected(node, inherited)
        elif t == "pipeline":
            self.pipeline(node, inherited)
        elif t == "function_definition":
            self.function(node, inherited)
        elif t in ("variable_assignment", "file_redirect"):  # bare `X=..`, `$(< file)`
            effects = (
                self.assignment(node) if t == "variable_assignment" else self.redirect(node)[0]
            )
            if effects:
                self.pseudo(node, _judgement(effects), reads=_reads(effects))
        elif t == "declaration_command":
            self.declaration(node, inherited)
        elif t in ("unset_command", "test_command"):
            for c in node.named_children:
                self.walk(c, ())
            why = "unset only removes variables" if t == "unset_command" else "a test is read-only"
            argv = tuple(self.word(c).shown for c in node.children)
            j = _judgement(inherited, why)
            self.record(node, self.text(node), argv[0], argv, j, reads=_reads(inherited))
        elif t in ("command_substitution", "process_substitution"):
            for c in node.named_children:
                self.walk(c, ())
        elif t == "expansion":
            kids = [c.type for c in node.children]
            if "@" in kids and "P" in kids[kids.index("@") :]:
                self.flag(node, "${var@P} prompt expansion runs substitutions hidden in a value")
            for c in node.named_children:
                self.walk(c, ())
        elif t in _CONTAINERS:
            for c in node.named_children:
                self.walk(c, inherited)
        elif t not in _LEAVES:
            self.flag(node, f"unexpected shell construct {t}")

    def check_text(self, node: Node, t: str) -> None:
        text = self.text(node)
        if t != "raw_string" and (_count_unescaped(text, "$(") or _count_unescaped(text, "`")):
            self.flag(node, f"the parser left a substitution unparsed in {text}")
        if t in ("word", "raw_string", "string_content") and _SUBSCRIPT_RE.search(text):
            self.flag(node, f"{text} may be evaluated as an array subscript that runs a command")

    def simple(self, node: Node, inherited: tuple[Effect, ...], own_end: int | None) -> None:
        effects = list(inherited)
        for c in node.named_children:
            effects += self.assignment(c) if c.type == "variable_assignment" else []
        for r in node.children_by_field_name("redirect"):
            effects += self.redirect(r)[0]
        args = node.children_by_field_name("argument")
        for a in args:
            self.walk(a, ())
        name_node = node.child_by_field_name("name")
        if name_node is None:
            j = _judgement(effects).add("ask", "a command without a name", True)
            self.pseudo(node, j, reads=_reads(effects))
            return
        self.walk(name_node, ())
        head, problem = self.command_name(name_node)
        self.arithmetic = self.arithmetic or head.value == "let"
        self.runtime_data = self.runtime_data or head.value in ("read", "mapfile", "readarray")
        words = [head, *(self.word(a) for a in args)]
        expanded = [expand_word(w.raw, self.vars) for w in words]
        inner = None if problem else transparent_script(words)
        if inner is not None and self.ctx.depth < 8:
            index = inner[0]
            expanded[index] = ()  # the script is judged as commands below, not as a path
            j = judge(words, self.ctx.spliced())
        else:
            inner = None
            j = Judgement().add("ask", problem, True) if problem else judge(words, self.ctx)
        for e in effects:
            if not e[1].startswith(_INPUT):
                j.add(*e)
        name = "" if problem else head.value or ""
        argv = tuple(w.shown for w in words)
        text = self.text(node, own_end)
        self.record(node, text, name, argv, j, tuple(expanded), _reads(effects))
        computed = tuple(i for i, w in enumerate(words) if self.computed(w.raw))
        if computed:
            start, cmd, opaque = self.found[-1]
            self.found[-1] = (start, dataclasses.replace(cmd, computed=computed), opaque)
        if head.value in ("read", "mapfile", "readarray"):
            for w in words[1:]:
                if w.value and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w.value):
                    self.bind(w.value, None)  # set from the input: data
        if inner is not None:
            verdict = _classify(inner[1], self.ctx.depth + 1)
            for cmd in verdict.commands:
                self.found.append((node.start_byte, cmd, verdict.opaque))
            if not verdict.commands and verdict.opaque:
                self.flag(node, "; ".join(verdict.reasons))

    def assignment(self, node: Node) -> list[Effect]:
        name_node, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        name = self.text(name_node) if name_node is not None else ""
        name = name.split("[", 1)[0]  # BASH_CMDS[ls]=./ls
        if value is None:
            return []
        self.walk(value, ())
        v = self.word(value).value
        self.runtime_data = self.runtime_data or v is None
        if name_node is not None and name_node.type == "variable_name":
            self.bind(name, assigned_value(self.text(value), self.vars))
        effects: list[Effect] = []
        if (why := sensitive_env(name, v)) is not None:
            effects.append(("ask", why, False))
        if v is not None and ("$(" in v or "`" in v):
            effects.append(
                ("ask", f"{name} gets text with a substitution that may run later", True)
            )
        return effects

    def declaration(self, node: Node, inherited: tuple[Effect, ...]) -> None:
        keyword = node.children[0].type if node.children else "declare"
        effects, argv = list(inherited), [keyword]
        nameref = False
        for c in node.named_children:
            if c.type == "variable_assignment":
                effects += self.assignment(c)
                argv.append(self.text(c))
                if nameref:
                    effects += self.nameref(c)
                continue
            self.walk(c, ())
            argv.append(self.word(c).shown)
            flag = self.word(c).known or ""
            if keyword == "export" and flag == "-f":
                effects.append(("ask", "export -f passes shell functions to child shells", True))
            if keyword != "export" and re.fullmatch(r"-[a-zA-Z]*n[a-zA-Z]*", flag):
                nameref = True
            elif nameref and c.type in ("variable_name", "word") and not flag.startswith("-"):
                why = f"{keyword} -n makes {self.text(c)} a reference to a variable named later"
                effects.append(("ask", f"{why} (PATH, IFS, ...: it can change what runs)", False))
        j = _judgement(effects, f"{keyword} only sets shell variables")
        self.record(node, self.text(node), keyword, tuple(argv), j, reads=_reads(effects))

    def nameref(self, node: Node) -> list[Effect]:
        """`declare -n p=PATH`: assigning p later assigns PATH."""
        name_node, value = node.child_by_field_name("name"), node.child_by_field_name("value")
        name = self.text(name_node) if name_node is not None else "?"
        target = self.word(value).known if value is not None else None
        if target is None:
            return [
                ("ask", f"{name} becomes a reference to a variable only known at run time", True)
            ]
        if sensitive_env(target.split("[", 1)[0], None) is not None:
            why = f"makes {name} a reference to {target}, which changes what programs run or how"
            return [("ask", why, False)]
        return []

    def redirected(self, node: Node, inherited: tuple[Effect, ...]) -> None:
        body = node.child_by_field_name("body")
        effects: list[Effect] = []
        own_end = body.end_byte if body is not None else node.start_byte
        for r in node.children_by_field_name("redirect"):
            found, end = self.redirect(r)
            effects, own_end = effects + found, max(own_end, end)
        if body is None:
            j = _judgement(effects, "a redirection without a command")
            self.pseudo(node, j, reads=_reads(effects))
        elif body.type == "command":
            self.simple(body, inherited + tuple(effects), own_end)
        elif body.type == "pipeline":  # bash applies the redirection to the last stage only
            self.pipeline(body, inherited, tuple(effects), own_end)
        else:
            self.walk(body, inherited + tuple(effects))

    def redirect(self, r: Node) -> tuple[list[Effect], int]:
        """What one redirection does to its command, and where its own text ends."""
        if r.type == "heredoc_redirect":
            return self.heredoc(r)
        dest = r.child_by_field_name("destination")
        for c in r.named_children:
            self.walk(c, ())
        if r.type != "file_redirect" or dest is None or dest.type == "process_substitution":
            return [], r.end_byte
        op = next((c.type for c in r.children if not c.is_named), "")
        w = self.word(dest)
        target = w.value
        if target is not None and target.startswith(("/dev/tcp/", "/dev/udp/")):
            return [
                ("ask", f"the redirection opens a network connection ({target})", False)
            ], r.end_byte
        if op == "<":  # a file read: recorded for the policy's path checks
            return [("allow", _INPUT + w.raw, False)], r.end_byte
        if op not in _WRITE_OPS or target in _HARMLESS_TARGETS or (target or "x").isdigit():
            return [], r.end_byte
        verb = "appends output to" if op in (">>", "&>>") else "redirects output to"
        if target is None:
            return [("ask", f"{verb} {w.brief}, a file named by an expansion", False)], r.end_byte
        if DISK_RE.match(target):
            why = f"a redirection writes directly to the disk device {target} (destroys its data)"
            return [("deny", why, False)], r.end_byte
        return [("ask", f"{verb} {target}", False)], r.end_byte

    def heredoc(self, r: Node) -> tuple[list[Effect], int]:
        effects: list[Effect] = []
        end, quoted = r.start_byte, False
        for c in r.named_children:
            if c.type == "heredoc_start":
                quoted, end = any(q in self.text(c) for q in "'\"\\"), c.end_byte
            elif c.type == "heredoc_body" and not quoted:
                self.heredoc_body(c)
            elif c.type == "file_redirect":  # `cat <<EOF > file`
                found, rend = self.redirect(c)
                effects, end = effects + found, max(end, rend)
            elif c.type not in ("heredoc_body", "heredoc_end"):
                self.walk(c, ())  # `cat <<EOF | sh`, `cat <<EOF && rm x`: the rest of the line
        return effects, end

    def heredoc_body(self, body: Node) -> None:
        """An unquoted here-doc body expands; tree-sitter parses `$(..)` there but not backticks."""
        for c in body.named_children:
            self.walk(c, ())
        text = re.sub(r"(?<!\\)\\\n", "", self.text(body))
        kinds = [c.type for c in body.named_children]
        parsed = kinds.count("command_substitution") + kinds.count("arithmetic_expansion")
        if _count_unescaped(text, "`") or _count_unescaped(text, "$(") > parsed:
            self.flag(body, "the here-doc body has a command substitution the parser did not see")

    def pipeline(
        self,
        node: Node,
        inherited: tuple[Effect, ...],
        last: tuple[Effect, ...] = (),
        last_end: int | None = None,
    ) -> None:
        decoded = False  # an earlier stage decodes data (base64 -d, xxd -r, gunzip, ...)
        stages = node.named_children
        for index, stage in enumerate(stages):
            before = len(self.found)
            if index == len(stages) - 1 and last and stage.type == "command":
                self.simple(stage, inherited + last, last_end)
            else:
                self.walk(stage, inherited + (last if index == len(stages) - 1 else ()))
            for k in range(before, len(self.found)):
                start, cmd, _ = self.found[k]
                base = cmd.name.rpartition("/")[2]
                if decoded and (base in SHELLS or interpreter_family(base)):
                    why = f"decoded data is piped into {base}"
                    cmd = SimpleCommand(cmd.text, cmd.name, cmd.argv, "ask", (*cmd.reasons, why))
                    self.found[k] = (start, cmd, True)
                decoding = {"-d", "--decode", "-D", "-r", "enc"} & set(cmd.argv[1:])
                decoded = decoded or (base in DECODERS and bool(decoding))
                decoded = decoded or base in ("gunzip", "zcat", "uudecode")

    def function(self, node: Node, inherited: tuple[Effect, ...]) -> None:
        name_node, body = node.child_by_field_name("name"), node.child_by_field_name("body")
        name = self.text(name_node) if name_node is not None else ""
        before = len(self.found)
        if body is not None:
            self.walk(body, inherited)
        called = {cmd.name for _, cmd, _ in self.found[before:]}
        body_text = self.text(body) if body is not None else ""
        header = self.text(node).split("{")[0].strip() or name
        if name in called and ("|" in body_text or "&" in body_text):
            self.flag(
                node, f"fork bomb: {name} recursively spawns copies of itself", "deny", header
            )
        elif is_known_command(name):
            self.flag(
                node, f"defines a function {name} that shadows the command {name}", text=header
            )


def _judgement(effects: list[Effect] | tuple[Effect, ...], allow: str = "") -> Judgement:
    j = Judgement()
    for e in effects:
        if not e[1].startswith(_INPUT):
            j.add(*e)
    if allow and j.decision == "allow":
        j.add("allow", allow)
    return j


def _reads(effects: list[Effect] | tuple[Effect, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(e[1][len(_INPUT) :] for e in effects if e[1].startswith(_INPUT)))


def _unescape(m: re.Match[str]) -> str:
    return "" if m.group(1) == "\n" else m.group(1)  # backslash-newline joins lines


def _kept_continuations(root: Node) -> list[tuple[int, int]]:
    """Where bash keeps a backslash-newline as it is: single quotes, `$'...'`, comments and
    the bodies of quoted here-documents."""
    kept: list[tuple[int, int]] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type in ("raw_string", "ansi_c_string", "comment"):
            kept.append((n.start_byte, n.end_byte))
            continue
        if n.type == "heredoc_redirect":
            start = next((c for c in n.children if c.type == "heredoc_start"), None)
            quoted = start is not None and any(q in (start.text or b"") for q in b"'\"\\")
            if quoted:
                kept += [(c.start_byte, c.end_byte) for c in n.children if c.type == "heredoc_body"]
        stack.extend(n.children)
    return kept


def _first_error(node: Node) -> Node | None:
    if node.type == "ERROR" or node.is_missing:
        return node
    for c in node.children:
        if c.has_error or c.is_missing:
            found = _first_error(c)
            if found is not None:
                return found
    return None


def _unescaped(text: str, i: int) -> bool:
    """True when text[i] is not escaped by an odd run of backslashes."""
    n = 0
    while i - n - 1 >= 0 and text[i - n - 1] == "\\":
        n += 1
    return n % 2 == 0


def _count_unescaped(text: str, token: str) -> int:
    if token not in text:
        return 0
    return sum(1 for m in re.finditer(re.escape(token), text) if _unescaped(text, m.start()))


def _hidden_continuation(s: str) -> bool:
    """`"$\\<newline>(cmd)"`: bash joins the lines into `$(cmd)`; tree-sitter does not."""
    if "$\\\n" not in s:
        return False
    i, single, double = 0, False, False
    while i < len(s):
        c = s[i]
        if single:
            single = c != "'"
        elif c == "\\":
            i += 1
        elif c == "'" and not double:
            single = True
        elif c == '"':
            double = not double
        elif c == "$" and s.startswith("$", i + 1):
            i += 1  # `$$` is the PID
        elif c == "$" and s.startswith("\\\n", i + 1):
            return True
        i += 1
    return False
