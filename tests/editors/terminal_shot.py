"""Screenshots of terminal editors: run them in a private tmux server, capture the screen with
its colours (``capture-pane -e``), turn the ANSI text into HTML and let headless Chromium take
the picture. Used by test_screenshots.py (the slow tier, which has Chromium)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

# xterm's 16 colours, and the background/foreground of Neovim's default dark scheme
BASE16 = [
    "#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
    "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
]  # fmt: skip
DEFAULT_FG, DEFAULT_BG = "#e0e2ea", "#14161b"


def _color256(n: int) -> str:
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        levels = [0, 95, 135, 175, 215, 255]
        return f"#{levels[n // 36]:02x}{levels[(n // 6) % 6]:02x}{levels[n % 6]:02x}"
    g = 8 + (n - 232) * 10
    return f"#{g:02x}{g:02x}{g:02x}"


SGR = re.compile(r"\x1b\[([0-9;:]*)m")


def _cells(text: str) -> str:
    """``text`` as HTML whose characters keep the terminal's grid: a wide character (CJK, most
    emoji) takes two cells in tmux, and the browser's fallback font would give it some other
    width, shifting the rest of the row (and the window borders in it)."""
    out = []
    for ch in text:
        if unicodedata.east_asian_width(ch) in ("W", "F"):
            out.append(f'<span class="w">{html.escape(ch)}</span>')
        else:
            out.append(html.escape(ch))
    return "".join(out)


def ansi_to_html(text: str, title: str) -> str:
    """The captured screen as one HTML page (a <pre> of styled spans)."""
    state: dict[str, object] = {}
    out: list[str] = []

    def span(chunk: str) -> str:
        if not chunk:
            return ""
        fg = state.get("fg", DEFAULT_FG)
        bg = state.get("bg")
        if state.get("reverse"):
            fg, bg = (bg or DEFAULT_BG), fg
        style = [f"color:{fg}"]
        if bg:
            style.append(f"background:{bg}")
        if state.get("bold"):
            style.append("font-weight:bold")
        if state.get("italic"):
            style.append("font-style:italic")
        if state.get("underline"):
            style.append("text-decoration:underline")
        if state.get("strike"):
            style.append("text-decoration:line-through")
        return f'<span style="{";".join(style)}">{_cells(chunk)}</span>'

    def apply(codes: list[int]) -> None:
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                state.clear()
            elif c == 1:
                state["bold"] = True
            elif c == 3:
                state["italic"] = True
            elif c in (4, 21):
                state["underline"] = True
            elif c == 7:
                state["reverse"] = True
            elif c == 9:
                state["strike"] = True
            elif c == 22:
                state.pop("bold", None)
            elif c == 23:
                state.pop("italic", None)
            elif c == 24:
                state.pop("underline", None)
            elif c == 27:
                state.pop("reverse", None)
            elif c == 29:
                state.pop("strike", None)
            elif 30 <= c <= 37:
                state["fg"] = BASE16[c - 30]
            elif 90 <= c <= 97:
                state["fg"] = BASE16[c - 90 + 8]
            elif 40 <= c <= 47:
                state["bg"] = BASE16[c - 40]
            elif 100 <= c <= 107:
                state["bg"] = BASE16[c - 100 + 8]
            elif c == 39:
                state.pop("fg", None)
            elif c == 49:
                state.pop("bg", None)
            elif c in (38, 48) and i + 1 < len(codes):
                key = "fg" if c == 38 else "bg"
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    state[key] = _color256(codes[i + 2])
                    i += 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    r, g, b = codes[i + 2 : i + 5]
                    state[key] = f"#{r:02x}{g:02x}{b:02x}"
                    i += 4
            i += 1

    for line in text.rstrip("\n").split("\n"):
        pos = 0
        for m in SGR.finditer(line):
            out.append(span(line[pos : m.start()]))
            raw = m.group(1).replace(":", ";")
            apply([int(x) if x else 0 for x in raw.split(";")] if raw else [0])
            pos = m.end()
        out.append(span(line[pos:]))
        out.append("\n")
    body = "".join(out)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>"
        + html.escape(title)
        + "</title><style>html,body{margin:0;background:"
        + DEFAULT_BG
        + "}pre{margin:0;padding:8px;font:13px/16px 'DejaVu Sans Mono',monospace;color:"
        + DEFAULT_FG
        + "}.w{display:inline-block;width:2ch;height:16px;overflow:hidden;text-align:center;"
        + "vertical-align:top}</style></head><body><pre>"
        + body
        + "</pre></body></html>"
    )


class Tmux:
    """A private tmux server (own socket) running one program in a fixed-size window."""

    def __init__(self, socket: Path, cols: int = 150, rows: int = 42):
        self.socket = str(socket)
        self.cols, self.rows = cols, rows

    def _run(self, *args: str, env: dict[str, str] | None = None) -> str:
        return subprocess.run(
            ["tmux", "-S", self.socket, *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=20,
            env=env,
        ).stdout

    def start(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        shell_cmd = " ".join(_quote(c) for c in command)
        subprocess.run(
            [
                "tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d", "-s", "shot",
                "-x", str(self.cols), "-y", str(self.rows), "-c", str(cwd), shell_cmd,
            ],
            check=True,
            timeout=20,
            env=dict(env, TERM="xterm-256color"),
        )  # fmt: skip
        self._run("set-option", "-t", "shot", "status", "off")

    def send_keys(self, *keys: str) -> None:
        """Type into the program (tmux key names: ``Enter``, ``C-c``; other strings literally)."""
        self._run("send-keys", "-t", "shot", *keys)

    def capture(self) -> str:
        return self._run("capture-pane", "-e", "-p", "-t", "shot")

    def kill(self) -> None:
        subprocess.run(
            ["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=20, check=False
        )


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def render_png(ansi: str, title: str, out: Path, chromium: str, cols: int, rows: int) -> None:
    """Write the screen as ``out`` (PNG) through headless Chromium."""
    import tempfile

    page = out.with_suffix(".html")
    profile = tempfile.mkdtemp(prefix="agent-ls-shot-")
    page.write_text(ansi_to_html(ansi, title), encoding="utf-8")
    width = int(cols * 7.83) + 16
    height = rows * 16 + 16
    subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--disable-background-networking", "--disable-component-update", "--no-first-run",
            f"--user-data-dir={profile}",
            f"--screenshot={out}", f"--window-size={width},{height}", page.as_uri(),
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )  # fmt: skip
    shutil.rmtree(profile, ignore_errors=True)
