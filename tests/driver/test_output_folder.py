"""Every way `-o` can fail is one line naming the folder, exit 2, before anything is sent; a
failed write leaves no temporary file behind."""

import contextlib
import os
import subprocess

import pytest

from harness.atomic import replacing, write_atomic
from tests.driver.helpers import sess
from tests.driver.test_endings import _harness, _one_error_line, _trace

NOWHERE = "http://127.0.0.1:9/v1"  # never reached: the folder is refused first


async def _replay_into(tmp_path, out):
    path = _trace(tmp_path, [sess("a", [(8, 3, 0)])])
    return await _harness(
        "replay", path, "--endpoint", NOWHERE, "--model", "m", "-o", out, "--quiet"
    )


@contextlib.contextmanager
def _mounted(where, options):
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)]).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)])


@contextlib.contextmanager
def _immutable(where):
    """A folder nothing can be created in, even by root (ext4's immutable flag)."""
    where.mkdir()
    if subprocess.run(["chattr", "+i", str(where)], capture_output=True).returncode:
        pytest.skip("chattr +i is not supported on this file system")
    try:
        yield where
    finally:
        subprocess.run(["chattr", "-i", str(where)])


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("a file in the way", "names a file, not a run folder"),
        ("under a file", "Not a directory"),
        ("a dangling parent", "dangling is in the way: not a folder"),
        ("no such parent", "No such file or directory"),
    ],
)
@pytest.mark.slow
async def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path, case, reason):
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "at-all")
    out = {
        "a file in the way": tmp_path / "a-file",
        "under a file": tmp_path / "a-file" / "run",
        "a dangling parent": tmp_path / "dangling" / "run",
        "no such parent": "/proc/no-such-dir/run",  # /proc takes no new folders
    }[case]
    code, _, err = await _replay_into(tmp_path, out)
    line = _one_error_line(err)
    assert code == 2 and reason in line and str(out) in line, err


@pytest.mark.skipif(os.geteuid() != 0, reason="an immutable folder needs root to make")
@pytest.mark.slow
async def test_no_permission_is_one_line(tmp_path):
    """As root, permission bits do not stop a write: the immutable flag stands in for them."""
    with _immutable(tmp_path / "locked") as locked:
        code, _, err = await _replay_into(tmp_path, locked / "run")
    assert code == 2 and "Operation not permitted" in _one_error_line(err), err


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
@pytest.mark.parametrize("inside", [False, True], ids=["the folder itself", "a new sub-folder"])
@pytest.mark.slow
async def test_a_read_only_file_system_is_one_line(tmp_path, inside):
    with _mounted(tmp_path / "ro", "ro,size=64k") as ro:
        out = ro / "run" if inside else ro
        code, _, err = await _replay_into(tmp_path, out)
        assert code == 2 and "Read-only file system" in _one_error_line(err), err
        assert not list(ro.iterdir())


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = write_atomic(tmp_path / "summary.json", "old\n")
    with pytest.raises(KeyboardInterrupt), replacing(path) as tmp:
        tmp.write_text("half")
        raise KeyboardInterrupt
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_write_on_a_full_disk_leaves_no_temporary(tmp_path):
    with _mounted(tmp_path / "full", "size=64k") as full:
        with pytest.raises(OSError, match="No space left"):
            write_atomic(full / "summary.json", b"x" * 200_000)
        assert list(full.iterdir()) == []
