"""The one atomic-write helper (owrl_sdk.files): whole files or none, no shared temporaries,
permissions exact when asked for and the umask's otherwise."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from owrl_sdk.files import write_atomic


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
