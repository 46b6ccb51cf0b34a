"""Task archives: deterministic bytes, verified unpacking, hostile archives refused, the cache."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import threading
import time
from pathlib import Path

import pytest

from ledger.errors import MalformedInput, TaskError, VerificationError
from ledger.run.archive import (
    archive_digest,
    check_sha256,
    materialize,
    pack_task,
    unpack_archive,
    verify_archive,
)
from ledger.tasks.loader import load_task, task_hash
from tests.run.minitasks import write_fix_add


@pytest.fixture()
def task_dir(tmp_path: Path) -> Path:
    root = write_fix_add(tmp_path / "src" / "mini")
    script = root / "repo" / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    return root


def _files(folder: Path) -> dict[str, tuple[bytes, bool]]:
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), os.access(p, os.X_OK))
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _tar(members: list[tuple[str, bytes, bytes]]) -> bytes:
    """A hand-made archive: (name, type, data) members, for the hostile cases."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            info.type = kind
            info.mode = 0o644
            if kind == tarfile.SYMTYPE or kind == tarfile.LNKTYPE:
                info.linkname = data.decode()
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# --------------------------------------------------------------------------- packing


def test_same_content_gives_same_bytes_whatever_the_mtimes_and_creation_order(tmp_path: Path) -> None:
    """Two folders with equal files, made in a different order at different times, pack alike."""
    a = write_fix_add(tmp_path / "a" / "mini")
    time.sleep(0.01)
    b = tmp_path / "b" / "mini" / "fix-add"
    for rel, _ in sorted(_files(a).items(), reverse=True):
        target = b / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((a / rel).read_bytes())
        os.utime(target, (1_000_000, 1_000_000))
    one, two = pack_task(a), pack_task(b)
    assert one.data == two.data and one.sha256 == two.sha256
    assert one.sha256 == hashlib.sha256(one.data).hexdigest()
    assert archive_digest(a) == one.sha256


def test_content_name_and_executable_bit_all_change_the_hash(task_dir: Path) -> None:
    """A changed byte, a renamed file or a flipped executable bit gives another archive name."""
    base = pack_task(task_dir).sha256
    (task_dir / "repo" / "run.sh").chmod(0o644)
    assert archive_digest(task_dir) != base
    (task_dir / "repo" / "run.sh").chmod(0o755)
    assert archive_digest(task_dir) == base
    calc = task_dir / "repo" / "calc.py"
    calc.write_text(calc.read_text() + "#")
    assert archive_digest(task_dir) != base


def test_archive_covers_what_the_task_hash_covers(task_dir: Path) -> None:
    """Caches are left out (as in the task hash), and the unpacked folder has the same task hash."""
    cache = task_dir / "repo" / "__pycache__"
    cache.mkdir()
    (cache / "calc.cpython-311.pyc").write_bytes(b"\x00junk")
    archive = pack_task(task_dir)
    folder = unpack_archive(archive.data, archive.sha256, task_dir.parent.parent / "out")
    assert folder.name == "fix-add"
    assert not (folder / "repo" / "__pycache__").exists()
    assert task_hash(folder) == task_hash(task_dir)
    assert load_task(folder).hash == load_task(task_dir).hash


def test_a_symlink_in_the_task_folder_is_refused(task_dir: Path) -> None:
    """A task folder must be self-contained: packing one with a symlink is a TaskError."""
    (task_dir / "repo" / "link.py").symlink_to("/etc/hostname")
    with pytest.raises(TaskError, match="symlink"):
        pack_task(task_dir)


# --------------------------------------------------------------------------- unpacking


def test_unpack_round_trips_files_and_executable_bits(task_dir: Path, tmp_path: Path) -> None:
    """Unpacked files equal the originals byte for byte, executable bit included."""
    archive = pack_task(task_dir)
    folder = unpack_archive(archive.data, archive.sha256, tmp_path / "dest")
    assert _files(folder) == _files(task_dir)
    assert os.access(folder / "repo" / "run.sh", os.X_OK)
    assert not os.access(folder / "repo" / "calc.py", os.X_OK)


def test_tampered_bytes_fail_verification_before_anything_is_written(task_dir: Path, tmp_path: Path) -> None:
    """One flipped byte: VerificationError 'task-archive' naming both hashes; nothing unpacked."""
    archive = pack_task(task_dir)
    bad = bytearray(archive.data)
    bad[600] ^= 0x01
    dest = tmp_path / "dest"
    with pytest.raises(VerificationError) as err:
        unpack_archive(bytes(bad), archive.sha256, dest)
    assert err.value.check == "task-archive"
    assert err.value.expected == archive.sha256
    assert err.value.computed == hashlib.sha256(bytes(bad)).hexdigest()
    assert not dest.exists()


@pytest.mark.parametrize("name, members, message", [
    ("dot-dot-escape", [("t/ok.txt", tarfile.REGTYPE, b"x"), ("t/../../evil.txt", tarfile.REGTYPE, b"x")],
     "clean relative path"),
    ("absolute-path", [("/tmp/evil.txt", tarfile.REGTYPE, b"x")], "clean relative path"),
    ("symlink-member", [("t/a.txt", tarfile.REGTYPE, b"x"), ("t/link", tarfile.SYMTYPE, b"/etc/passwd")],
     "only regular files"),
    ("hardlink-member", [("t/a.txt", tarfile.REGTYPE, b"x"), ("t/hard", tarfile.LNKTYPE, b"t/a.txt")],
     "only regular files"),
    ("device-member", [("t/dev", tarfile.CHRTYPE, b"")], "only regular files"),
    ("two-top-folders", [("t/a.txt", tarfile.REGTYPE, b"x"), ("u/b.txt", tarfile.REGTYPE, b"x")],
     "outside the top folder"),
    ("duplicate-member", [("t/a.txt", tarfile.REGTYPE, b"x"), ("t/a.txt", tarfile.REGTYPE, b"y")],
     "appears twice"),
    ("file-at-top-level", [("a.txt", tarfile.REGTYPE, b"x")], "clean relative path"),
    ("file-then-folder-same-name", [("t/a", tarfile.REGTYPE, b"x"), ("t/a/b", tarfile.REGTYPE, b"y")],
     "collides"),
])
def test_hostile_archive_is_refused_even_when_its_hash_matches(
        tmp_path: Path, name: str, members: list[tuple[str, bytes, bytes]], message: str) -> None:
    """Archives we never make are refused member by member; nothing lands outside ``dest``."""
    data = _tar(members)
    dest = tmp_path / "dest"
    with pytest.raises(MalformedInput, match=message):
        unpack_archive(data, hashlib.sha256(data).hexdigest(), dest)
    assert not (tmp_path / "evil.txt").exists()
    assert not Path("/tmp/evil.txt").exists() or name != "absolute-path"


def test_non_canonical_archive_is_refused(tmp_path: Path) -> None:
    """A well-formed archive whose members are out of canonical order does not re-pack to its name."""
    data = _tar([("t/b.txt", tarfile.REGTYPE, b"b"), ("t/a.txt", tarfile.REGTYPE, b"a")])
    with pytest.raises(VerificationError, match="re-pack"):
        unpack_archive(data, hashlib.sha256(data).hexdigest(), tmp_path / "dest")


def test_garbage_and_empty_archives_are_malformed(tmp_path: Path) -> None:
    """Bytes that are not a tar, and a tar with no member, are MalformedInput."""
    junk = b"not a tar file at all" * 100
    with pytest.raises(MalformedInput):
        unpack_archive(junk, hashlib.sha256(junk).hexdigest(), tmp_path / "a")
    empty = _tar([])
    with pytest.raises(MalformedInput, match="empty"):
        unpack_archive(empty, hashlib.sha256(empty).hexdigest(), tmp_path / "b")


def test_archive_names_must_be_sha256_hex() -> None:
    """A cache key that is not 64 lowercase hex digits (e.g. a path) is refused."""
    for bad in ("../x", "A" * 64, "a" * 63, ""):
        with pytest.raises(MalformedInput):
            check_sha256(bad)
    with pytest.raises(MalformedInput):
        verify_archive(b"", "../../etc")


# --------------------------------------------------------------------------- the cache


def test_materialize_fetches_once_then_serves_the_verified_cache(task_dir: Path, tmp_path: Path) -> None:
    """The first call unpacks fetched bytes; the second finds the cache and never fetches."""
    archive = pack_task(task_dir)
    calls: list[int] = []

    def fetch() -> bytes:
        calls.append(1)
        return archive.data

    cache = tmp_path / "cache"
    first = materialize(cache, archive.sha256, fetch)
    second = materialize(cache, archive.sha256, fetch)
    assert first == second == cache / archive.sha256 / "fix-add"
    assert len(calls) == 1
    assert archive_digest(first) == archive.sha256


def test_a_tampered_cache_copy_is_replaced_by_a_fresh_verified_one(task_dir: Path, tmp_path: Path) -> None:
    """An edited cached file (or an added one) is noticed before use, and the task re-fetched."""
    archive = pack_task(task_dir)
    calls: list[int] = []

    def fetch() -> bytes:
        calls.append(1)
        return archive.data

    cache = tmp_path / "cache"
    folder = materialize(cache, archive.sha256, fetch)
    (folder / "tests" / "test_add_hidden.py").write_text("def test_x():\n    pass\n")
    again = materialize(cache, archive.sha256, fetch)
    assert len(calls) == 2
    assert _files(again) == _files(task_dir)
    (again / "repo" / "extra.py").write_text("planted = True\n")
    third = materialize(cache, archive.sha256, fetch)
    assert len(calls) == 3 and not (third / "repo" / "extra.py").exists()


def test_fetched_bytes_that_do_not_match_are_refused_and_not_cached(task_dir: Path, tmp_path: Path) -> None:
    """If the transport hands over other bytes, materialize raises and leaves no cache entry."""
    archive = pack_task(task_dir)
    other = pack_task(write_fix_add(tmp_path / "o" / "mini"))  # no run.sh: other bytes
    assert other.sha256 != archive.sha256
    cache = tmp_path / "cache"
    with pytest.raises(VerificationError):
        materialize(cache, archive.sha256, lambda: other.data)
    assert not (cache / archive.sha256).exists()
    assert [p.name for p in cache.iterdir()] == []


def test_concurrent_materialize_of_one_hash_yields_one_good_copy(task_dir: Path, tmp_path: Path) -> None:
    """Eight threads unpacking the same archive at once all get the same verified folder."""
    archive = pack_task(task_dir)
    cache = tmp_path / "cache"
    results: list[Path] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(materialize(cache, archive.sha256, lambda: archive.data))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(set(results)) == 1
    assert archive_digest(results[0]) == archive.sha256
    assert sorted(p.name for p in cache.iterdir()) == [archive.sha256]
