"""Bad files: binaries, BOMs, other encodings, CR line endings, very large files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_ls.edits import LineIndex, apply_hunks
from agent_ls.safety.permissions import Permissions
from agent_ls.settings import Settings
from agent_ls.tools.base import ToolContext
from agent_ls.tools.edit import EditFile, EditFileInput, WriteFile, WriteFileInput
from agent_ls.tools.files import ReadFile, ReadFileInput
from agent_ls.workspace import (
    FileProblem,
    ReadState,
    Workspace,
    decode_text,
    encode_text,
    human_size,
    read_disk,
    read_disk_text,
)
from tests.fakes import FakePort

# -- decoding -----------------------------------------------------------------------------------


def test_utf8_bom_is_stripped_and_remembered() -> None:
    disk = decode_text(b"\xef\xbb\xbfprint('hi')\n")
    assert disk.text == "print('hi')\n" and disk.bom and disk.size == 15
    assert encode_text(disk.text, disk.bom) == b"\xef\xbb\xbfprint('hi')\n"
    assert encode_text("x", bom=False) == b"x"
    assert encode_text("\ufeffx", bom=True) == b"\xef\xbb\xbfx"  # never two BOMs


def test_binary_is_refused_clearly() -> None:
    with pytest.raises(FileProblem, match=r"logo.png is a binary file \(2.0 KB, it contains NUL"):
        decode_text(b"\x89PNG\r\n\x1a\n\x00" + b"x" * 2039, "logo.png")


@pytest.mark.parametrize(
    ("data", "what"),
    [
        ("hi\n".encode("utf-16"), "UTF-16 (little-endian)"),
        (b"\xfe\xff\x00h", "UTF-16 (big-endian)"),
        ("hi".encode("utf-32"), "UTF-32 (little-endian)"),
    ],
)
def test_utf16_and_utf32_are_refused_by_name(data: bytes, what: str) -> None:
    with pytest.raises(FileProblem, match=rf"is {re.escape(what)} text .*only UTF-8"):
        decode_text(data)


def test_latin1_is_refused_with_the_place_and_a_guess() -> None:
    data = "line one\nnaïve café\n".encode("latin-1")
    with pytest.raises(FileProblem) as info:
        decode_text(data, "notes.txt")
    message = str(info.value)
    assert "notes.txt is not UTF-8 text: byte 0xEF at line 2, column 3" in message
    assert "Latin-1/Windows-1252" in message and "avoid corrupting it" in message


def test_invalid_bytes_that_are_not_cp1252_get_no_guess() -> None:
    with pytest.raises(FileProblem) as info:
        decode_text(b"ok\n\x81\x8d")
    assert "line 2, column 1" in str(info.value) and "Windows-1252" not in str(info.value)


def test_read_disk_problems(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileProblem, match="does not exist"):
        read_disk(tmp_path / "missing.txt")
    with pytest.raises(FileProblem, match="is a directory"):
        read_disk(tmp_path)
    big = tmp_path / "big.log"
    big.write_bytes(b"x" * 2048)
    monkeypatch.setattr("agent_ls.workspace.MAX_TEXT_BYTES", 1024)
    with pytest.raises(FileProblem, match=r"too large to load \(2.0 KB; the limit is 1.0 KB\)"):
        read_disk(big)
    assert human_size(10 * 1024 * 1024) == "10.0 MB" and human_size(12) == "12 bytes"


def test_workspace_view_of_a_bom_file(tmp_path: Path) -> None:
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbfx = 1\r\n")
    view = Workspace([tmp_path]).view(path)
    assert view.text == "x = 1\r\n" and view.bom and view.size == 10
    assert read_disk_text(path) == "x = 1\r\n"
    # LSP positions do not count the BOM: the editor's buffer does not hold it.
    assert LineIndex(view.text).position(4) == (0, 4)


# -- the tools on bad files ---------------------------------------------------------------------


def make_ctx(root: Path, port: FakePort | None = None) -> ToolContext:
    return ToolContext(
        workspace=Workspace([root], buffers=(port or FakePort()).open_buffer),
        port=port or FakePort(),
        read_state=ReadState(),
        permissions=Permissions(mode="bypassPermissions"),
        settings=Settings(),
        session_id="s1",
    )


async def read(ctx: ToolContext, rel: str, **extra: int) -> str:
    result = await ReadFile().run(ReadFileInput(file_path=rel, **extra), ctx)
    return result.content


async def test_read_file_never_shows_cr_and_numbers_lines_like_the_editor(tmp_path: Path) -> None:
    (tmp_path / "mixed.txt").write_bytes(b"crlf\r\nlone cr\rlf\n\xef\xbb\xbfnot a bom here\n")
    out = await read(make_ctx(tmp_path), "mixed.txt")
    assert "\r" not in out
    assert "     1\tcrlf\n     2\tlone cr\n     3\tlf\n     4\t\ufeffnot a bom here" in out


async def test_read_file_hides_the_bom(tmp_path: Path) -> None:
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbffirst\nsecond\n")
    out = await read(make_ctx(tmp_path), "bom.txt")
    assert out.endswith("     1\tfirst\n     2\tsecond") and "\ufeff" not in out


async def test_read_file_on_a_binary_says_why(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(FileProblem, match="binary file"):
        await read(make_ctx(tmp_path), "data.bin")


async def test_large_file_is_read_in_pages_with_its_size(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"línea {i}\n" for i in range(1, 5001)), "utf-8")
    ctx = make_ctx(tmp_path)
    out = await read(ctx, "big.txt")
    assert (
        out.splitlines()[0]
        == "big.txt (lines 1-2000 of 5000, 57.5 KB in all; use offset/limit for more)"
    )
    out = await read(ctx, "big.txt", offset=4999, limit=10)
    assert "lines 4999-5000 of 5000" in out and out.endswith("  5000\tlínea 5000")


async def test_edit_in_a_bom_crlf_file_keeps_both(tmp_path: Path) -> None:
    path = tmp_path / "win.py"
    path.write_bytes(encode_text("import os\r\n\r\nx = '😀'\r\ny = 2\r\n", bom=True))
    port = FakePort()
    ctx = make_ctx(tmp_path, port)
    await read(ctx, "win.py")
    result = await EditFile().run(
        EditFileInput(file_path="win.py", old_string="x = '😀'\ny = 2\n", new_string="x = 1\n"),
        ctx,
    )
    assert not result.is_error, result.content
    proposal = port.proposals[-1]
    assert proposal.old_text == "import os\r\n\r\nx = '😀'\r\ny = 2\r\n"  # no BOM, as in an editor
    assert proposal.new_text == "import os\r\n\r\nx = 1\r\n"
    assert apply_hunks(proposal.old_text, proposal.hunks) == proposal.new_text
    index = LineIndex(proposal.old_text)
    assert [index.position(h.start, "utf-16") for h in proposal.hunks] == [(2, 4)]
    # What a client writes back: the BOM again, and the CRLFs.
    assert encode_text(proposal.new_text, bom=True) == b"\xef\xbb\xbfimport os\r\n\r\nx = 1\r\n"


async def test_write_file_keeps_mixed_line_endings(tmp_path: Path) -> None:
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"keep crlf\r\nkeep lf\nchange me\r\nlast")
    port = FakePort()
    ctx = make_ctx(tmp_path, port)
    await read(ctx, "mixed.txt")
    content = "keep crlf\nkeep lf\nchanged\nadded\nlast"
    result = await WriteFile().run(WriteFileInput(file_path="mixed.txt", content=content), ctx)
    assert not result.is_error, result.content
    assert path.read_bytes() == b"keep crlf\r\nkeep lf\nchanged\r\nadded\r\nlast"
    same = await WriteFile().run(
        WriteFileInput(file_path="mixed.txt", content=content), make_ctx(tmp_path, port)
    )
    assert "read" in same.content  # a fresh session has not read it


async def test_edit_file_not_found_hint_reaches_the_model(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("def f():\n    return 1\n", "utf-8")
    ctx = make_ctx(tmp_path)
    await read(ctx, "app.py")
    result = await EditFile().run(
        EditFileInput(file_path="app.py", old_string="def f():\n  return 1", new_string="x"), ctx
    )
    assert result.is_error
    assert "differs only in indentation from the file's lines 1-2" in result.content
