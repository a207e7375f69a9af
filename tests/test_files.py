"""The one atomic-write helper (owrl_sdk.support.files): whole files or none, no shared temporaries,
permissions exact when asked for and the umask's otherwise. The one folder lock (try_lock), and
the user's folders (owrl_sdk.support.dirs)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from owrl_sdk.support.files import try_lock, write_atomic


def test_a_file_is_replaced_whole_and_no_temporary_is_left(tmp_path):
    target = tmp_path / "deep" / "result.json"
    write_atomic(target, "first")
    write_atomic(target, b"second")
    assert target.read_text() == "second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["result.json"]


def test_writers_of_the_same_file_never_share_a_temporary(tmp_path):
    target = tmp_path / "batch.json"
    texts = [f"writer {i} " * 2000 for i in range(16)]
    threads = [threading.Thread(target=write_atomic, args=(target, text)) for text in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert target.read_text() in texts  # one writer's whole file, never a mix
    assert [p.name for p in tmp_path.iterdir()] == ["batch.json"]


def test_permissions_are_exact_when_asked_and_the_umasks_otherwise(tmp_path):
    old = os.umask(0o077)
    try:
        plain = write_atomic(tmp_path / "plain.txt", "x")
        secret = write_atomic(tmp_path / "state.json", "{}", mode=0o600)
        shared = write_atomic(tmp_path / "manifest.json", "{}", mode=0o644)  # wider than the umask: as asked
    finally:
        os.umask(old)
    assert stat.S_IMODE(plain.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "trajectory.json"
    write_atomic(target, "old")

    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["trajectory.json"]


def test_a_lock_is_one_holders_and_a_dead_holders_lock_is_free(tmp_path):
    """Another process, and another lock object in this one, are refused while it is held; the
    system frees it when its holder dies without releasing it."""
    path = tmp_path / "folder" / ".held"
    holder = subprocess.Popen([sys.executable, "-c", "import sys; from owrl_sdk.support.files import try_lock; "
                               f"held = try_lock({str(path)!r}); print(held is not None, flush=True); "
                               "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "True"
        assert try_lock(path) is None
    finally:
        holder.kill()
        holder.wait()
    mine = try_lock(path)
    assert mine is not None and try_lock(path) is None  # a second object in the same process
    mine.release()
    again = try_lock(path)
    assert again is not None and path.exists()  # the file stays: no holder locks an unlinked name
    again.release()


def test_the_users_folders_follow_the_platform_and_owrls_variables_win(monkeypatch, tmp_path):
    from owrl_sdk.support import dirs
    from owrl_sdk.safety.blocklist import default_path
    from owrl_sdk.config import _config_files

    for name in ("OWRL_CACHE_DIR", "OWRL_STATE_DIR", "OWRL_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    if sys.platform.startswith("linux"):  # platformdirs reads the XDG variables on Linux
        assert dirs.config_dir() == tmp_path / "cfg" / "owrl"
        assert dirs.cache_dir() == tmp_path / "cache" / "owrl"
        assert default_path() == tmp_path / "state" / "owrl" / "blocklist.sqlite"
    (dirs.config_dir()).mkdir(parents=True)
    (dirs.config_dir() / "owrl.toml").write_text("max_steps = 3\n")
    assert _config_files(tmp_path / "work") == [dirs.config_dir() / "owrl.toml"]
    monkeypatch.setenv("OWRL_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.setenv("OWRL_STATE_DIR", str(tmp_path / "st"))
    assert dirs.cache_dir() == tmp_path / "mine"
    assert default_path() == tmp_path / "st" / "blocklist.sqlite"
