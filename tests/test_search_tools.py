"""list_files and grep_search against the real rg on real temporary trees."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest

from agent_ls.ports.editor import Buffer
from agent_ls.settings import Settings
from agent_ls.tools import search
from agent_ls.tools.base import ToolContext, ToolResult
from agent_ls.tools.search import (
    GrepSearch,
    GrepSearchInput,
    ListFiles,
    ListFilesInput,
    _disk_states,
    glob_to_regex,
    rg_binary,
    run_rg,
)
from agent_ls.workspace import ReadState, Workspace

pytestmark = pytest.mark.skipif(rg_binary() is None, reason="rg is not installed")


class BufferedWorkspace(Workspace):
    """A workspace with editor buffers, as the server will give it."""

    def __init__(self, roots: list[Path], texts: dict[Path, str] | None = None) -> None:
        self.open: dict[Path, Buffer] = {}
        super().__init__(roots, buffers=lambda p: self.open.get(p))
        for path, text in (texts or {}).items():
            self.open_buffer(path, text)

    def open_buffer(self, path: Path, text: str) -> None:
        path = path.resolve()
        self.open[path] = Buffer(path, text, 1)

    def open_buffers(self) -> list[Buffer]:
        return list(self.open.values())


def make_ctx(workspace: Workspace) -> ToolContext:
    return ToolContext(
        workspace=workspace,
        port=cast(Any, object()),  # search never talks to the editor
        read_state=ReadState(),
        permissions=cast(Any, None),
        settings=Settings(),
        session_id="s1",
    )


def write(root: Path, rel: str, text: str | bytes = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


async def list_files(ws: Workspace, pattern: str, path: str | None = None) -> ToolResult:
    tool = ListFiles()
    return await tool.run(tool.parse({"pattern": pattern, "path": path}), make_ctx(ws))


async def grep(
    ws: Workspace,
    pattern: str,
    path: str | None = None,
    include: str | None = None,
    tool: GrepSearch | None = None,
) -> ToolResult:
    tool = tool or GrepSearch()
    raw = {"pattern": pattern, "path": path, "include": include}
    return await tool.run(tool.parse(raw), make_ctx(ws))


def lines(result: ToolResult) -> list[str]:
    assert not result.is_error, result.content
    return result.content.splitlines()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write(root, ".gitignore", "build/\n*.log\n")
    write(root, "src/app.py", "import os\n\ndef main():\n    return os.getcwd()\n")
    write(root, "src/util/helpers.py", "def helper():\n    return 42  # TODO tidy\n")
    write(root, "src/util/notes.md", "TODO: write notes\n")
    write(root, "README.md", "# Project\nmain entry is src/app.py\n")
    write(root, "build/gen.py", "def main():\n    pass  # generated TODO\n")
    write(root, "debug.log", "TODO in a log\n")
    write(root, ".config/settings.py", "DEBUG = True  # TODO\n")
    write(root, "pkg/.gitignore", "secret.py\n")
    write(root, "pkg/secret.py", "TODO hidden by a nested ignore\n")
    write(root, "pkg/public.py", "x = 1\n")
    return root


def git_init(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root, ".git/info/marker.py", "TODO inside .git\n")


# --------------------------------------------------------------------------- list_files


@pytest.mark.parametrize("in_git", [False, True], ids=["no-git", "git"])
async def test_list_files_honours_gitignore(tree: Path, in_git: bool) -> None:
    if in_git:
        git_init(tree)
    result = await list_files(Workspace([tree]), "**/*.py")
    assert sorted(lines(result)) == [
        ".config/settings.py",
        "pkg/public.py",
        "src/app.py",
        "src/util/helpers.py",
    ]


async def test_list_files_globs(tree: Path) -> None:
    ws = Workspace([tree])
    assert sorted(lines(await list_files(ws, "*.md"))) == ["README.md", "src/util/notes.md"]
    assert sorted(lines(await list_files(ws, "src/**"))) == [
        "src/app.py",
        "src/util/helpers.py",
        "src/util/notes.md",
    ]
    assert lines(await list_files(ws, "*.{md,log}")).count("debug.log") == 0
    # with a path, the glob is relative to it and results stay relative to the root
    assert sorted(lines(await list_files(ws, "util/*", path="src"))) == [
        "src/util/helpers.py",
        "src/util/notes.md",
    ]
    # an absolute glob inside the listed directory works too
    abs_glob = (tree / "src" / "util" / "*.md").as_posix()
    assert lines(await list_files(ws, abs_glob, path="src")) == ["src/util/notes.md"]


async def test_list_files_named_directories(tree: Path) -> None:
    ws = Workspace([tree])
    # an ignored directory named in the glob (or as path) is listed, as rg does for named paths
    assert lines(await list_files(ws, "build/**")) == ["build/gen.py"]
    assert lines(await list_files(ws, "*", path="build")) == ["build/gen.py"]
    # .git stays out even when named
    git_init(tree)
    assert (await list_files(ws, ".git/**")).content == "No files match .git/**"
    # only the ignore files decide: `*` does not let ignored files in
    assert "debug.log" not in lines(await list_files(ws, "*"))
    assert "pkg/secret.py" not in lines(await list_files(ws, "*"))


async def test_list_files_glob_spellings(tree: Path) -> None:
    ws = Workspace([tree])
    util = ["src/util/helpers.py", "src/util/notes.md"]
    assert sorted(lines(await list_files(ws, "src/util/"))) == util
    assert sorted(lines(await list_files(ws, "./src/util/*"))) == util
    assert sorted(lines(await list_files(ws, "/src/util/*"))) == util
    assert lines(await list_files(ws, "src/*/h?lpers.[pq]y")) == ["src/util/helpers.py"]


async def test_list_files_newest_first(tree: Path) -> None:
    for i, rel in enumerate(["src/util/helpers.py", "src/app.py", "pkg/public.py"]):
        os.utime(tree / rel, (1_000_000 + i, 1_000_000 + i))
    os.utime(tree / ".config/settings.py", (2_000_000, 2_000_000))
    result = await list_files(Workspace([tree]), "*.py")
    assert lines(result) == [
        ".config/settings.py",
        "pkg/public.py",
        "src/app.py",
        "src/util/helpers.py",
    ]


async def test_list_files_no_match_and_bad_paths(tree: Path, tmp_path: Path) -> None:
    ws = Workspace([tree])
    result = await list_files(ws, "**/*.rs")
    assert not result.is_error
    assert result.content == "No files match **/*.rs"

    outside = await list_files(ws, "*", path=str(tmp_path))
    assert outside.is_error and "outside the workspace" in outside.content
    missing = await list_files(ws, "*", path="nope")
    assert missing.is_error and "no such file or directory" in missing.content
    bad_glob = await list_files(ws, "[")
    assert bad_glob.is_error and "glob" in bad_glob.content


async def test_list_files_cap(tmp_path: Path) -> None:
    for i in range(1050):
        write(tmp_path, f"d{i % 7}/f{i:04}.txt", "x")
    result = await list_files(Workspace([tmp_path]), "*.txt")
    out = lines(result)
    assert len(out) == 1001
    assert out[-1] == "(50 more files not shown; narrow the pattern)"
    assert result.raw_output == {"count": 1050}


async def test_list_files_shows_unsaved_new_buffer(tree: Path) -> None:
    ws = BufferedWorkspace([tree], {tree / "src/new_mod.py": "x = 1\n"})
    assert "src/new_mod.py" in lines(await list_files(ws, "*.py"))
    assert "src/new_mod.py" not in lines(await list_files(ws, "*.md"))


# --------------------------------------------------------------------------- grep_search


@pytest.mark.parametrize("in_git", [False, True], ids=["no-git", "git"])
async def test_grep_honours_gitignore(tree: Path, in_git: bool) -> None:
    if in_git:
        git_init(tree)
    result = await grep(Workspace([tree]), "TODO")
    assert lines(result) == [
        ".config/settings.py:1: DEBUG = True  # TODO",
        "src/util/helpers.py:2:     return 42  # TODO tidy",
        "src/util/notes.md:1: TODO: write notes",
    ]
    assert result.raw_output == {"matches": 3, "files": 3}


async def test_grep_regex_include_and_path(tree: Path) -> None:
    ws = Workspace([tree])
    assert lines(await grep(ws, r"^def \w+\(\):")) == [
        "src/app.py:3: def main():",
        "src/util/helpers.py:1: def helper():",
    ]
    assert lines(await grep(ws, "TODO", include="*.md")) == [
        "src/util/notes.md:1: TODO: write notes"
    ]
    assert lines(await grep(ws, "TODO", path="src/util", include="*.py")) == [
        "src/util/helpers.py:2:     return 42  # TODO tidy"
    ]
    # a named file is searched even when ignored, like rg does
    assert lines(await grep(ws, "TODO", path="build/gen.py")) == [
        "build/gen.py:2:     pass  # generated TODO"
    ]
    assert lines(await grep(ws, "(?i)project")) == ["README.md:1: # Project"]


async def test_grep_include_with_directories(tree: Path) -> None:
    ws = Workspace([tree])
    assert lines(await grep(ws, "TODO", include="src/**/*.py")) == [
        "src/util/helpers.py:2:     return 42  # TODO tidy"
    ]
    assert (await grep(ws, "TODO", include="src/*.md")).content == "No matches for TODO"
    assert lines(await grep(ws, "TODO", include="!*.py")) == [
        "src/util/notes.md:1: TODO: write notes"
    ]
    # a negated glob with a directory part only drops that directory's files
    assert lines(await grep(ws, "TODO", include="!src/util/*.md")) == [
        ".config/settings.py:1: DEBUG = True  # TODO",
        "src/util/helpers.py:2:     return 42  # TODO tidy",
    ]
    assert lines(await grep(ws, "TODO", include="{src/util/*.md,.config/*}")) == [
        ".config/settings.py:1: DEBUG = True  # TODO",
        "src/util/notes.md:1: TODO: write notes",
    ]


async def test_grep_no_match(tree: Path) -> None:
    result = await grep(Workspace([tree]), "no_such_symbol_anywhere")
    assert not result.is_error
    assert result.content == "No matches for no_such_symbol_anywhere"


async def test_grep_regex_error_is_cleaned_up(tree: Path) -> None:
    result = await grep(Workspace([tree]), "foo(")
    assert result.is_error
    assert "invalid regex 'foo('" in result.content
    assert "unclosed group" in result.content
    assert "(?:" not in result.content and "rg:" not in result.content

    lookaround = await grep(Workspace([tree]), "x(?<=a)b")
    assert lookaround.is_error and "look-around" in lookaround.content
    # the carets still point at the offending part of the model's pattern
    pattern_line, caret_line = lookaround.content.splitlines()[1:3]
    assert pattern_line.strip() == "x(?<=a)b"
    assert caret_line.index("^") == pattern_line.index("(")

    newline = await grep(Workspace([tree]), "a\nb")
    assert newline.is_error and "one line at a time" in newline.content


async def test_grep_bad_include_glob(tree: Path) -> None:
    result = await grep(Workspace([tree]), "TODO", include="a{b")
    assert result.is_error and "glob" in result.content


async def test_grep_caps_matches_with_note(tmp_path: Path) -> None:
    for i in range(3):
        write(tmp_path, f"f{i}.txt", "".join(f"hit {n}\n" for n in range(100)))
    result = await grep(Workspace([tmp_path]), "hit")
    out = lines(result)
    assert len([line for line in out if ": hit " in line]) == 200
    assert out[0] == "f0.txt:1: hit 0"
    assert out[-1] == (
        "(100 more matches not shown, 300 in 3 files; narrow the pattern, path or include glob)"
    )


async def test_grep_caps_characters(tmp_path: Path) -> None:
    write(tmp_path, "wide.txt", "".join(f"hit {n} " + "w" * 280 + "\n" for n in range(150)))
    result = await grep(Workspace([tmp_path]), "hit")
    assert len(result.content) <= 30_000
    assert "more matches not shown, 150 in 1 file;" in result.content


async def test_grep_long_line_is_clipped_around_the_match(tmp_path: Path) -> None:
    write(tmp_path, "min.js", "a" * 5000 + "NEEDLE" + "b" * 5000 + "\n")
    out = lines(await grep(Workspace([tmp_path]), "NEEDLE"))
    assert len(out) == 1
    assert "NEEDLE" in out[0]
    assert len(out[0]) < 400
    assert out[0].endswith("[line of 10,006 chars]")


async def test_grep_non_utf8_content(tmp_path: Path) -> None:
    write(tmp_path, "latin1.txt", "café = 'needle'\n".encode("latin-1"))
    out = lines(await grep(Workspace([tmp_path]), "needle"))
    assert out == ["latin1.txt:1: caf\ufffd = 'needle'"]


async def test_grep_says_a_binary_file_named_as_the_path_matches(tmp_path: Path) -> None:
    # rg shows no lines of a binary file it was named; the answer says what rg says, not
    # "No matches", and a binary file met while walking a folder shows the lines before
    # its first NUL (as rg does).
    write(tmp_path, "logo.bin", b"needle\0\x89PNG needle\n")
    write(tmp_path, "late.txt", b"needle 1\n" + b"z" * 70_000 + b"\nneedle\0\n")
    result = await grep(Workspace([tmp_path]), "needle", path="logo.bin")
    assert lines(result) == ['logo.bin: binary file matches (found "\\0" byte around offset 6)']
    assert result.raw_output == {"matches": 0}
    result = await grep(Workspace([tmp_path]), "needle")
    assert lines(result) == ["late.txt:1: needle 1"]
    assert result.raw_output == {"matches": 1, "files": 1}
    result = await grep(Workspace([tmp_path]), "absent", path="logo.bin")
    assert lines(result) == ["No matches for absent"]


async def test_a_file_rg_cannot_read_does_not_fail_the_search(tmp_path: Path) -> None:
    # rg says "rg: PATH: ..." about a file it could not read (exit 2) and searches on; only
    # an error before the search (a bad pattern) fails it.
    missing = str(tmp_path / "gone")
    run = await run_rg(["-e", "x", "--", missing], tmp_path, lambda _b: True, time_limit=10)
    assert run.returncode == 2 and run.stderr.startswith(f"rg: {missing}: ")
    assert not run.fatal
    run = await run_rg(["-e", "x(", "--", missing], tmp_path, lambda _b: True, time_limit=10)
    assert run.returncode == 2 and run.fatal


async def test_grep_open_buffer_wins_over_disk(tree: Path) -> None:
    app = tree / "src/app.py"
    ws = BufferedWorkspace(
        [tree], {app: "import os\n\ndef start():\n    return os.getcwd()  # TODO unsaved\n"}
    )
    # the disk copy's `main` is gone from the editor's view; the buffer's `start` is found
    assert lines(await grep(ws, r"def \w+\(")) == [
        "src/app.py:3: def start():",
        "src/util/helpers.py:1: def helper():",
    ]
    todo = lines(await grep(ws, "TODO", path="src"))
    assert "src/app.py:4:     return os.getcwd()  # TODO unsaved" in todo
    assert len(todo) == 3
    # the include glob and the path still apply to buffers
    assert lines(await grep(ws, "TODO", include="*.md")) == [
        "src/util/notes.md:1: TODO: write notes"
    ]
    assert "src/app.py" not in (await grep(ws, "unsaved", path="pkg")).content
    # a file given as the path is searched in its buffer
    assert lines(await grep(ws, "unsaved", path="src/app.py")) == [
        "src/app.py:4:     return os.getcwd()  # TODO unsaved"
    ]


async def test_grep_buffer_of_ignored_file_stays_ignored(tree: Path) -> None:
    ws = BufferedWorkspace([tree], {tree / "build/gen.py": "UNSAVED_MARKER\n"})
    result = await grep(ws, "UNSAVED_MARKER")
    assert result.content == "No matches for UNSAVED_MARKER"
    ws.open_buffer(tree / "pkg/secret.py", "UNSAVED_MARKER\n")
    assert (await grep(ws, "UNSAVED_MARKER")).content == "No matches for UNSAVED_MARKER"


async def test_grep_unchanged_buffer_is_left_to_rg(tree: Path) -> None:
    app = tree / "src/app.py"
    ws = BufferedWorkspace([tree], {app: app.read_text()})
    assert lines(await grep(ws, "getcwd")) == ["src/app.py:4:     return os.getcwd()"]


async def test_grep_buffer_of_a_bom_file_is_not_dirty(tree: Path) -> None:
    path = write(tree, "bom.py", b"\xef\xbb\xbfBOM_MARK = 1\n")
    ws = BufferedWorkspace([tree], {path: "BOM_MARK = 1\n"})
    # editors hide the BOM: the buffer holds what the disk holds, so rg's result stands
    assert _disk_states(ws.open_buffers()) == ["same"]
    assert lines(await grep(ws, "^BOM_MARK")) == ["bom.py:1: BOM_MARK = 1"]


async def test_grep_unsaved_new_buffer(tree: Path) -> None:
    ws = BufferedWorkspace([tree], {tree / "src/fresh.py": "FRESH = 1\n"})
    assert lines(await grep(ws, "FRESH")) == ["src/fresh.py:1: FRESH = 1"]
    assert (await grep(ws, "FRESH", include="*.md")).content == "No matches for FRESH"


async def test_grep_buffer_with_rg_only_syntax(tree: Path) -> None:
    # \p{Lu} is not Python syntax: the buffer is searched by rg itself
    ws = BufferedWorkspace([tree], {tree / "src/app.py": "x = 1\nÉtat = 2\n"})
    assert lines(await grep(ws, r"^\p{Lu}\w+ =", path="src")) == ["src/app.py:2: État = 2"]


async def test_multi_root_workspace(tmp_path: Path) -> None:
    front, back = tmp_path / "front", tmp_path / "back"
    write(front, "app.ts", "const NEEDLE = 1\n")
    write(back, "srv.py", "NEEDLE = 2\n")
    ws = Workspace([front, back])
    assert sorted(lines(await grep(ws, "NEEDLE"))) == [
        "app.ts:1: const NEEDLE = 1",
        "srv.py:1: NEEDLE = 2",
    ]
    assert sorted(lines(await list_files(ws, "*"))) == ["app.ts", "srv.py"]


async def test_grep_bad_regex_on_a_buffer_only_file(tree: Path) -> None:
    ws = BufferedWorkspace([tree], {tree / "draft.py": "x = 1\n"})
    result = await grep(ws, r"\p{Lu", path="draft.py")
    assert result.is_error and "invalid regex" in result.content


# --------------------------------------------------------------------------- cancellation


def rg_children() -> list[int]:
    """Live or unreaped rg processes whose parent is this test process."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == me and comm == "rg":
            found.append(int(entry))
    return found


async def wait_for_rg_child() -> None:
    async with asyncio.timeout(5):
        for _ in range(100_000):
            if rg_children():
                return
            await asyncio.sleep(0.005)


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@needs_proc
async def test_cancel_kills_rg(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # rg blocks opening a named FIFO nobody writes to
    task = asyncio.create_task(grep(Workspace([tmp_path]), "x", path="pipe"))
    await wait_for_rg_child()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rg_children() == []


@needs_proc
async def test_timeout_kills_rg(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = await grep(Workspace([tmp_path]), "x", path="pipe", tool=GrepSearch(timeout=0.3))
    assert result.is_error and "timed out after 0.3 s" in result.content
    assert rg_children() == []


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big")
    body = "".join(f"line {n} with some words in it\n" for n in range(400))
    for i in range(600):
        write(root, f"d{i % 20}/f{i}.txt", body)
    return root


@needs_proc
async def test_cancel_on_a_larger_tree(big_tree: Path) -> None:
    # Cancelling at any moment (spawning, streaming, parsing) must kill and reap rg promptly.
    # With rg's output unread, Python 3.11's Process.wait() used to hang here.
    delays = [0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05] * 3
    for delay in delays:
        task = asyncio.create_task(grep(Workspace([big_tree]), r"words \w+"))
        await asyncio.sleep(delay)
        task.cancel()
        await asyncio.wait([task], timeout=10)
        assert task.done(), f"cancellation after {delay} s did not finish"
        assert task.cancelled() or not task.result().is_error
        assert rg_children() == []


@needs_proc
async def test_stopping_early_kills_and_reaps_rg(big_tree: Path) -> None:
    for _ in range(5):
        seen: list[bytes] = []

        def first_only(block: bytes, seen: list[bytes] = seen) -> bool:
            seen.append(block)
            return False

        args = ["--no-config", "-e", "words", "--", str(big_tree)]
        run = await asyncio.wait_for(run_rg(args, big_tree, first_only, time_limit=10), 10)
        assert run.stopped and not run.timed_out and len(seen) == 1
        assert rg_children() == []


@needs_proc
async def test_big_result_is_capped_and_counted(big_tree: Path) -> None:
    result = await grep(Workspace([big_tree]), "words")
    out = lines(result)
    assert len(out) == 202  # 200 matches, a blank line, the note
    limit = search.MATCH_COUNT_LIMIT
    assert out[-1].startswith(
        f"(more than {limit - 200:,} more matches not shown, more than {limit:,} in"
    )
    assert rg_children() == []


# --------------------------------------------------------------------------- tool surface


def test_spec_titles_and_locations(tree: Path) -> None:
    grep_tool, list_tool = GrepSearch(), ListFiles()
    for tool in (grep_tool, list_tool):
        spec = tool.spec()
        assert spec.description
        assert all(p.get("description") for p in spec.input_schema["properties"].values())
        assert tool.read_only and tool.concurrency_safe and tool.kind == "search"
    assert grep_tool.title(GrepSearchInput(pattern="foo", path="src")) == "grep 'foo' in src"
    assert list_tool.title(ListFilesInput(pattern="*.py")) == "list *.py"
    ctx = make_ctx(Workspace([tree]))
    assert grep_tool.locations(GrepSearchInput(pattern="x", path="src"), ctx) == [
        {"path": str(tree / "src")}
    ]
    assert list_tool.locations(ListFilesInput(pattern="x"), ctx) == [{"path": str(tree)}]


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("*.py", "a/b/c.py", True),
        ("*.py", "c.pyc", False),
        ("src/**", "src/x/y.txt", True),
        ("src/**", "lib/src/y.txt", False),
        ("**/test_*.py", "tests/unit/test_a.py", True),
        ("*.{ts,tsx}", "web/App.tsx", True),
        ("!*.md", "README.md", False),
        ("!*.md", "main.py", True),
        ("file?.[ch]", "x/file1.c", True),
    ],
)
def test_glob_approximation(glob: str, path: str, expected: bool) -> None:
    regex = glob_to_regex(glob)
    assert regex is not None
    assert bool(regex.match(path)) is expected


# --------------------------------------------------------------------------- streaming and caps


def json_argv(pattern: str, root: Path) -> list[str]:
    """rg's JSON for what grep_search searches (written out here, not taken from the
    product), in path order: the independent reading the tool's must agree with."""
    return [
        *("--json", "--sort", "path", "--no-config", "--no-require-git", "--hidden"),
        *("--glob", "!.git", "--max-filesize", "10M", "-e", pattern, "--", str(root)),
    ]


def tool_output(pattern: str, root: Path) -> bytes:
    """rg's output for grep_search's own argv, in path order as ``json_argv``'s."""
    argv = ["--sort", "path", *search.grep_argv(pattern, search.plan_filter(None, root))]
    return subprocess.run([cast(str, rg_binary()), *argv], capture_output=True).stdout


def json_match(path: str, data: dict[str, Any]) -> search.Match:
    """A match as rg's JSON tells it: the line (base64 when not UTF-8) and the byte offset
    of its first submatch, turned into characters."""
    lines_ = data["lines"]
    raw = lines_["text"].encode() if "text" in lines_ else base64.b64decode(lines_["bytes"])
    offset = data["submatches"][0]["start"] if data["submatches"] else 0
    start = len(raw[:offset].decode("utf-8", "replace"))
    return search.Match.of(path, data["line_number"], raw.decode("utf-8", "replace"), start)


def json_path(obj: dict[str, Any]) -> str:
    if "text" in obj:
        return str(obj["text"])
    return os.fsdecode(base64.b64decode(obj["bytes"]))


def reference_collect(
    output: bytes, accepts: Any, store_limit: int, count_limit: int
) -> tuple[list[tuple[str, int, str]], set[str], int, bool]:
    """What grep_search keeps and counts, read from rg's JSON with one json.loads per
    record (the plain reading the tool's block parser must agree with)."""
    kept: list[tuple[str, int, str]] = []
    files: set[str] = set()
    total, more, current, skip = 0, False, "", False
    for record in output.split(b"\n"):
        if not record:
            continue
        obj = json.loads(record)
        if obj["type"] == "begin":
            current = json_path(obj["data"]["path"])
            skip = not accepts(current)
        elif obj["type"] == "match" and not skip:
            if total >= count_limit:
                more = True
                break
            if len(kept) < store_limit:
                m = json_match(current, obj["data"])
                kept.append((m.path, m.line, m.text))
            files.add(current)
            total += 1
    return kept, files, total, more


@pytest.fixture(scope="module")
def odd_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files rg reports in every form: escaped and non-UTF-8 names, names with a line break,
    a colon or digits, non-UTF-8 and long lines, many matches per file and one, a binary file
    whose NUL comes after matches."""
    root = tmp_path_factory.mktemp("odd")
    for i in range(40):
        body = "".join(f"{i} needle {n} {'é' * (n % 3)}\n" for n in range(i * 3 + 1))
        write(root, f"d{i % 4}/f{i}.txt", body)
    write(root, 'quote"and\\slash.txt', "needle in an odd name\n")
    write(root, "tab\tname.txt", "needle\n")
    write(root, "line\nbreak.txt", "needle after a line break in the name\n")
    write(root, "12:3:colon.txt", "needle\n2 needle\n")
    write(root, "long.txt", "x" * 900 + " needle " + "y" * 900 + "\n")
    write(root, "bytes.txt", b"caf\xe9 needle \xff\n")
    write(root, "late-binary.txt", b"needle 1\nneedle 2\n" + b"z" * 70_000 + b"\nneedle\0\n")
    (root / os.fsdecode(b"name\xff.txt")).write_bytes(b"needle in a non-UTF-8 name\n")
    return root


@pytest.fixture(scope="module")
def utf8_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Names in UTF-8 only, with characters whose bytes and code points could sort apart."""
    root = tmp_path_factory.mktemp("utf8")
    for i, name in enumerate(["é", "z", "Z", "ǅ", "😀", "\ue000", "a b", "日本", "ａ", "e\u0301"]):
        body = "".join(f"needle {n}\n" for n in range(i * 7 + 1))
        write(root, f"{name}.txt", body)
        write(root, f"{name}/inner.txt", "needle\n")
    return root


@pytest.mark.parametrize("chunk", [1, 7, 64, 700, 4096, 1 << 16])
@pytest.mark.parametrize(
    ("store_limit", "count_limit"), [(2000, 5000), (5, 12), (30, 100), (3, 900), (1, 1)]
)
@pytest.mark.parametrize(
    ("reject", "walk", "names"),
    [
        (True, None, "odd"),
        (False, None, "odd"),
        (False, "tree", "odd"),
        (False, "/x", "odd"),
        (False, "tree", "utf8"),
        (True, "tree", "utf8"),
    ],
)
def test_block_reading_matches_a_plain_json_reading(
    request: pytest.FixtureRequest,
    names: str,
    chunk: int,
    store_limit: int,
    count_limit: int,
    reject: bool,
    walk: str | None,
    monkeypatch: Any,
) -> None:
    # walk: the searched path the whole-block reader finds files by ("/x": not the one rg
    # printed, so it must fall back to the empty lines alone)
    odd_tree = cast(Path, request.getfixturevalue(f"{names}_tree"))
    monkeypatch.setattr(search, "MATCH_STORE_LIMIT", store_limit)
    monkeypatch.setattr(search, "MATCH_COUNT_LIMIT", count_limit)
    output = tool_output("needle", odd_tree)
    reference = subprocess.run(
        [cast(str, rg_binary()), *json_argv("needle", odd_tree)], capture_output=True
    ).stdout

    def accepts(path: str) -> bool:
        return "d1" not in path or not reject  # a rejected file's matches are not counted

    # without a filter the collector may count whole blocks at once (past the kept ones)
    root = str(odd_tree) if walk == "tree" else walk
    collector = search._MatchCollector(accepts if reject else None, walk=root)
    blocks = search._Blocks(b"\n", collector.feed(), search.RgRun(None, ""))
    for at in range(0, len(output), chunk):  # rg's output cut at arbitrary places
        if not blocks.feed(output[at : at + chunk]):
            break
    else:
        blocks.end()
    kept, files, total, more = reference_collect(reference, accepts, store_limit, count_limit)
    assert total >= min(count_limit, 300)  # enough matches to cut and count
    if count_limit == 5000 and names == "odd":  # every file: the odd names among them
        assert {"line\nbreak.txt", "late-binary.txt"} <= {Path(f).name for f in files}
    # the answer lists them by path and line: a stable sort of the first ones kept
    in_order = sorted(kept, key=lambda m: (m[0], m[1]))
    assert [(m.path, m.line, m.text) for m in collector.ordered()] == in_order
    assert (collector.file_count, collector.total, collector.more) == (len(files), total, more)
    assert collector.files <= files  # those told by path (all of them with a file filter)
    assert collector.notices() == []


@pytest.mark.parametrize("pattern", ["needle", "", r"\bn\w+e\b", "é|needle", "✓"])
def test_match_lines_read_as_a_json_parse_reads_them(tmp_path: Path, pattern: str) -> None:
    # Lines with what could mislead a reader of rg's lines: field separators, JSON and
    # digits in the text, characters before the match (a byte offset), no UTF-8, a long
    # line clipped around its match, a carriage return; each in ASCII-only files too.
    write(tmp_path, "a.txt", '"},"lines":{"text":"needle\\"x\t\\u00e9 needle\n')
    write(tmp_path, "b.txt", "ééé needle ✓ needle\r\nline_number 3:4: needle\n")
    write(tmp_path, "crlf.txt", "a needle\r\n\r\nneedle 2:3: x\r\n")
    write(tmp_path, "wide.txt", "w" * 400 + " needle " + "v" * 700 + "\nneedle\n")
    write(tmp_path, 'q"uote.txt', "é" * 400 + "needle" + "x" * 700 + "\n")
    write(tmp_path, "bytes.txt", b"caf\xe9 needle \xff\n")
    reference = subprocess.run(
        [cast(str, rg_binary()), *json_argv(pattern, tmp_path)], capture_output=True
    ).stdout
    expected = []
    for record in reference.splitlines():
        obj = json.loads(record)
        if obj["type"] == "match":
            expected.append(json_match(json_path(obj["data"]["path"]), obj["data"]))
    collector = search._MatchCollector(None)
    collector.feed()(tool_output(pattern, tmp_path))
    in_order = sorted(expected, key=lambda m: (m.path, m.line))
    assert list(collector.ordered()) == in_order
    # what the answer is made of: per file, each line's number and text
    by_file = [(p, n, t) for p, lines in collector.by_file() for n, t in lines]
    assert by_file == [(m.path, str(m.line), m.text) for m in in_order]
    assert len(expected) >= (1 if pattern == "✓" else 4)


@needs_proc
async def test_grep_stops_rg_at_the_count_cap(big_tree: Path) -> None:
    # 240,000 matching lines: rg is killed at the first match past the cap, not run to its end
    collector = search._MatchCollector(lambda _p: True)
    argv = search.grep_argv("words", search.plan_filter(None, big_tree))
    run = await run_rg(argv, big_tree, collector.feed(), time_limit=30)
    assert run.stopped and run.returncode == -9
    assert collector.total == search.MATCH_COUNT_LIMIT and collector.more
    assert len(list(collector.ordered())) == search.MATCH_STORE_LIMIT
    assert rg_children() == []


@needs_proc
async def test_list_files_stops_rg_at_the_collect_cap(big_tree: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(search, "LIST_COLLECT_LIMIT", 50)
    monkeypatch.setattr(search, "MAX_LISTED_FILES", 20)
    result = await list_files(Workspace([big_tree]), "**/*.txt")
    out = lines(result)
    assert len(out) == 21 and out[-1] == "(more than 30 more files not shown; narrow the pattern)"
    assert result.raw_output == {"count": 50}
    found, runs, more = await search.collect_files(
        [search.plan_filter("**/*.txt", big_tree)], time_limit=30, limit=50
    )
    assert len(found) == 50 and more and runs[0].stopped
    assert rg_children() == []


async def test_list_files_newest_first_past_the_shown_cap(tmp_path: Path, monkeypatch: Any) -> None:
    # Ties in time are ordered by path, also across the cut between shown and not shown.
    monkeypatch.setattr(search, "MAX_LISTED_FILES", 4)
    times = {"a.py": 5, "b.py": 9, "c.py": 7, "d.py": 7, "e.py": 7, "f.py": 1, "g/h.py": 9}
    for rel, t in times.items():
        os.utime(write(tmp_path, rel, "x"), (1_000_000 + t, 1_000_000 + t))
    result = await list_files(Workspace([tmp_path]), "**/*.py")
    assert lines(result) == [
        "b.py",
        "g/h.py",
        "c.py",
        "d.py",
        "(3 more files not shown; narrow the pattern)",
    ]
    assert result.raw_output == {"count": 7}


async def test_each_root_keeps_its_own_current_file(tmp_path: Path) -> None:
    # Two roots are searched by two rg runs at once, into one collector: every match must be
    # told under the file rg named for that run. Long lines make each run's output span
    # many reads, so the two runs interleave.
    roots = [tmp_path / "front", tmp_path / "back"]
    for root in roots:
        for i in range(150):
            name = f"{root.name}-{i:03}.txt"
            write(root, name, f"{name} words {'x' * 20_000}\n")
    tool = GrepSearch()
    for _ in range(3):
        result = await grep(Workspace(roots), "words", tool=tool)
        shown = [line for line in lines(result) if " words " in line]
        assert len(shown) > 50  # as many as the character cap lets through
        for line in shown:
            path, _, text = line.partition(": ")
            assert text.startswith(path.removesuffix(":1") + " words"), line[:80]
        assert result.raw_output == {"matches": 300, "files": 300}


async def test_grep_big_buffer_through_rg_stdin(tree: Path) -> None:
    # rg-only syntax: the buffer goes to rg on stdin while its output is read (4 MB each
    # way, more than any pipe holds)
    text = "".join(f"Élan {n} {'z' * 30}\n" for n in range(100_000))
    ws = BufferedWorkspace([tree], {tree / "src/app.py": text})
    result = await grep(ws, r"^\p{Lu}lan 9999\b", path="src")
    assert lines(result) == [f"src/app.py:10000: Élan 9999 {'z' * 30}"]
    result = await grep(ws, r"^\p{Lu}lan", path="src")
    assert result.raw_output == {"matches": search.MATCH_STORE_LIMIT, "files": 1}  # kept ones


@pytest.mark.parametrize("glob", ["*.py", "**/*.py", "**/*", "*", "?.txt", "*.PY", "**/.*", "*é*"])
async def test_exact_file_types_list_what_the_glob_selects(tmp_path: Path, glob: str) -> None:
    # When rg's file type stands for the glob, its listing is taken as is: it must be
    # what the glob's own regex keeps.
    for rel in ["a.py", "B.PY", "c.Py", ".hidden.py", "d/.e.py", "d/f/g.txt", "h.txt", "é.py"]:
        write(tmp_path, rel, "x")
    file_filter = search.plan_filter(glob, tmp_path)
    assert file_filter.rg_exact
    found, _runs, _more = await search.collect_files([file_filter], time_limit=30)
    checked = search.FileFilter(tmp_path, tmp_path, [], file_filter.regex)
    everything, _runs, _more = await search.collect_files([checked], time_limit=30)
    assert sorted(found) == sorted(everything)


async def test_grep_parses_and_formats_the_shown_matches_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Parsing and formatting a capped answer takes 1-2 ms: on the loop it would hold
    # agent.status and agent.cancel behind it.
    write(tmp_path, "many.txt", "".join(f"hit {n}\n" for n in range(1000)))
    threads: list[int] = []
    real = search._format_matches

    def spy(*args: Any) -> str:
        threads.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(search, "_format_matches", spy)
    out = lines(await grep(Workspace([tmp_path]), "hit"))
    assert out[0] == "many.txt:1: hit 0"
    assert threads and threading.get_ident() not in threads


def _thread_nice_values(pid: int) -> list[int]:
    values = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            values.append(int(f.read().rsplit(")", 1)[1].split()[16]))  # field 19: nice
    return sorted(values)


def _thread_policies(pid: int) -> list[int]:
    return sorted(os.sched_getscheduler(int(tid)) for tid in os.listdir(f"/proc/{pid}/task"))


THREADS_BEFORE_AND_AFTER = (
    "import sys, threading\n"
    "stop = threading.Event()\n"
    "for _ in range(2): threading.Thread(target=stop.wait, daemon=True).start()\n"
    "print('started', flush=True); sys.stdin.readline()\n"
    "threading.Thread(target=stop.wait, daemon=True).start()\n"
    "print('more', flush=True); sys.stdin.readline()\n"
)


def _lowered(read: Callable[[int], list[int]]) -> tuple[list[int], list[int]]:
    """What ``read`` says of a child's threads before ``lower_priority``, and after it once
    the child started one more thread."""
    child = subprocess.Popen(
        [sys.executable, "-c", THREADS_BEFORE_AND_AFTER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == "started\n"
        before = read(child.pid)
        search.lower_priority(child.pid)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline() == "more\n"
        return before, read(child.pid)
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux: the idle scheduling class")
def test_rg_runs_in_the_idle_class_with_every_thread_it_started_before_or_after() -> None:
    # rg starts its search threads right after exec; whether or not they exist yet when the
    # priority is lowered, every one of them must yield a core to a woken editor or server
    # thread at once (at nice 4 one waited for rg's slice to end: agent.status p99 5 ms).
    ours = os.sched_getscheduler(0)
    if ours == os.SCHED_IDLE:
        pytest.skip("this test runs in the idle class already")
    before, after = _lowered(_thread_policies)
    assert before == [ours] * 3
    assert after == [os.SCHED_IDLE] * 4


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux: nice is per thread")
def test_without_the_idle_class_rg_runs_at_a_higher_nice_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delattr(os, "SCHED_IDLE", raising=False)  # as on a system without it
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    if ours >= search.RG_NICENESS:
        pytest.skip("this test runs at or below rg's priority already")
    before, after = _lowered(_thread_nice_values)
    assert before == [ours] * 3
    assert after == [search.RG_NICENESS] * 4


@pytest.mark.parametrize("include", [None, "*.txt"], ids=["every-file", "include-glob"])
async def test_past_the_kept_matches_the_answer_shows_the_first_by_path_and_counts_all(
    tmp_path: Path, include: str | None
) -> None:
    # Past MATCH_STORE_LIMIT rg's matches are only counted: the shown lines must still be
    # the first kept ones by path and line, and the counts must reach the end of rg's output.
    per_file = 1_500
    for name in ("b.txt", "a.txt", "c.txt"):
        write(tmp_path, name, "".join(f"hit {n}\n" for n in range(per_file)))
    out = lines(await grep(Workspace([tmp_path]), "hit", include=include))
    # rg's order of the files varies; whichever two it read first, a.txt's first lines (or
    # b.txt's, if a.txt came last) lead the answer, in line order.
    first = out[0].split(":")[0]
    assert first in ("a.txt", "b.txt")
    assert out[:200] == [f"{first}:{n + 1}: hit {n}" for n in range(200)]
    total = 3 * per_file
    assert out[-1] == (
        f"({total - 200:,} more matches not shown, {total:,} in 3 files; "
        "narrow the pattern, path or include glob)"
    )


def test_the_nth_separator_is_where_a_find_loop_finds_it() -> None:
    def find_loop(data: bytes, n: int, start: int, end: int) -> int:
        at = start - 1
        for _ in range(n):
            at = data.find(b"\0", at + 1, end)
            if at < 0:
                break
        return at

    # rg's lines: matches with separators, long lines, empty lines and paths without
    kinds = [b"7\x003\x00abc", b"12\x001\x00" + b"x" * 300, b"", b"/a/path", b"9\x001\x00"]
    rng = random.Random(19)
    for _ in range(400):
        data = b"\n".join(rng.choice(kinds) for _ in range(rng.choice([1, 50, 3000])))
        start = rng.randrange(len(data) + 1) if rng.random() < 0.5 else 0
        end = rng.randrange(start, len(data) + 1)
        total = data.count(b"\0", start, end)
        for n in {1, max(1, total // 2), max(1, total), total + 1, rng.randint(1, total + 1)}:
            expected = find_loop(data, n, start, end)
            assert search._nth(data, n, start, end) == expected
            assert search._nth(data, n, start, end, total=total) == expected
