"""A cache of pristine MariaDB data directories: ``mariadb-install-db`` once per server version and options.

What ``mariadb-install-db`` writes depends on the server's version and the install options, not on where
the data directory lives; it costs seconds on a host and a minute under the lab VM's emulated CPU, for every
sqlbench run. So the first run's freshly installed data directory (before its server ever starts) is copied
into ``<cache>/mariadb/<key>/data`` and later runs copy it from there onto their target instead.

- ``<cache>``: ``$IOLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/iolab``, else ``~/.cache/iolab``; none (no
  ``$HOME`` and no passwd entry): :class:`NoCache`, and the caller installs as with an unwritable cache.
- ``<key>``: a hash of the version string and the install argv without its paths (``--datadir``,
  ``--tmpdir``; the account it runs as stays in it, through ``setpriv``'s ids).
- An entry is filled atomically: copied into a temporary sibling with its ``entry.json`` (what made it,
  when, and a manifest of every file) written last, then renamed into place; a process that loses the race
  uses the winner's entry and removes its own copy.
- An entry is used only when its ``entry.json`` is there and the files match its manifest; otherwise, or
  when the cache cannot be read or written (a read-only root, as in the lab VM), the caller runs
  ``mariadb-install-db`` as before: the cache never fails a run (the reason is logged at INFO). A damaged
  entry is then replaced by that install's copy (moved aside, the new one renamed into place, the old one
  removed), so the run after copies again.
- The entries hold the root account's tables: every directory in them is 0700 (root's); a copy taken out
  gets the modes ``mariadb-install-db`` gave and the server's account as owner.

Only data is copied: holes, unwritten extents (SEEK_DATA) and chunks of zeros are skipped. The entry keeps
them as holes (about 15 MiB on disk); a copy onto a target is allocated in full first (``posix_fallocate``),
as InnoDB's own ``fallocate`` left its 96 MiB redo log, so the target holds what install-db would have
written there, and the copy does not write (or under the lab VM's emulated CPU, compare) 100 MiB of zeros.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import hashlib
import json
import logging
import os
import shutil
import socket
import stat
import time
from pathlib import Path

log = logging.getLogger(__name__)

ENTRY_FILE = "entry.json"
FORMAT = 1
PATH_OPTIONS = ("--datadir=", "--tmpdir=")
CHUNK = 1 << 20


def cache_root() -> Path:
    """Where iolab keeps what it may recompute: ``$IOLAB_CACHE_DIR``, ``$XDG_CACHE_HOME/iolab``, ``~/.cache/iolab``."""
    if os.environ.get("IOLAB_CACHE_DIR"):
        return Path(os.environ["IOLAB_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "iolab"
    try:
        return Path.home() / ".cache" / "iolab"
    except (RuntimeError, KeyError) as exc:  # no $HOME and no passwd entry for our uid
        raise NoCache(f"IOLAB_CACHE_DIR and XDG_CACHE_HOME are unset and the home directory of uid {os.getuid()} "
                      f"is unknown ({exc or type(exc).__name__})") from None


class NoCache(Exception):
    """No cache directory resolves (see :func:`cache_root`): nothing is looked up nor kept."""


@dataclasses.dataclass(frozen=True)
class Key:
    """What a pristine data directory depends on: the server's version string and the install argv sans paths."""
    version: str
    argv: tuple

    @classmethod
    def of(cls, version: str, argv) -> "Key":
        return cls(version, tuple(a for a in argv if not str(a).startswith(PATH_OPTIONS)))

    @property
    def name(self) -> str:
        text = json.dumps({"version": self.version, "argv": list(self.argv)}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def path(self) -> Path:
        return cache_root() / "mariadb" / self.name


@dataclasses.dataclass(frozen=True)
class Entry:
    path: Path
    meta: dict
    output: str = ""  # the install-db.txt of the run that made it

    @property
    def data(self) -> Path:
        return self.path / "data"


class Unusable(Exception):
    """An entry that is there but cannot be used (incomplete, corrupt, unreadable)."""


def manifest(data: Path) -> list[list]:
    """Every path under ``data``: [relative path, "d"/"f", mode, size] (sorted: a directory before what it holds)."""
    rows = []
    for dirpath, dirnames, filenames in os.walk(data):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else None
            if kind is None:
                raise Unusable(f"{path} is neither a plain file nor a directory")
            rows.append([str(path.relative_to(data)), kind, st.st_mode & 0o7777, st.st_size if kind == "f" else 0])
    return sorted(rows)


def lookup(key: Key) -> Entry | None:
    """The usable entry for ``key``; None when there is none yet; :class:`Unusable` when it is broken;
    :class:`NoCache` when no cache directory resolves."""
    path = key.path()
    if not path.exists():
        return None
    try:
        meta = json.loads((path / ENTRY_FILE).read_text())
        if meta.get("format") != FORMAT or meta.get("key") != key.name or not isinstance(meta.get("modes"), dict):
            raise Unusable(f"its {ENTRY_FILE} is of another format or key")
        found = manifest(path / "data")
        output = (path / "install-db.txt").read_text(errors="replace")
    except FileNotFoundError as exc:
        raise Unusable(f"{exc.filename} is missing (an interrupted or damaged entry)") from None
    except (OSError, ValueError) as exc:
        raise Unusable(f"cannot read it: {exc}") from None
    if found != meta.get("manifest"):
        wanted = {row[0]: row for row in meta.get("manifest") or []}
        have = {row[0]: row for row in found}
        odd = sorted(set(wanted) ^ set(have)) or sorted(p for p in wanted if wanted[p] != have[p])
        raise Unusable(f"its files differ from its manifest ({', '.join(odd[:3])})")
    return Entry(path, meta, output)


def data_segments(fd: int, size: int) -> list[tuple[int, int]]:
    """(start, end) of the parts of a file that may hold data: holes and unwritten (fallocated) extents are
    left out where the file system tells them apart (SEEK_DATA), else the whole file."""
    segments, pos = [], 0
    while pos < size:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but hole after pos
                break
            if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP) and not segments:
                return [(0, size)]
            raise
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        segments.append((start, end))
        pos = end
    return segments


def copy_file(src: Path, dst: Path, *, allocate: bool) -> None:
    """``src`` to a new ``dst`` writing only its data (not its holes nor its chunks of zeros); ``allocate``:
    the whole size allocated first, as InnoDB's fallocate left its files (else the zeros stay holes)."""
    with open(src, "rb") as fin, open(dst, "xb") as fout:
        size = os.fstat(fin.fileno()).st_size
        try:
            if allocate and size:
                os.posix_fallocate(fout.fileno(), 0, size)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # ENOSPC and the like: the copy fails
                raise
        fout.truncate(size)
        zero = bytes(CHUNK)
        for start, end in data_segments(fin.fileno(), size):
            fin.seek(start)
            for offset in range(start, end, CHUNK):
                chunk = fin.read(min(CHUNK, end - offset))
                if chunk != (zero if len(chunk) == CHUNK else bytes(len(chunk))):
                    fout.seek(offset)
                    fout.write(chunk)


def copy_tree(src: Path, dst: Path, *, allocate: bool, uid: int | None = None, gid: int | None = None,
              dir_mode: int | None = None, modes: dict | None = None) -> list[list]:
    """``src`` to a new ``dst`` (plain files and directories, :func:`copy_file`); modes from ``modes``
    (relative path -> mode) or the source, directories ``dir_mode`` when given; owner ``uid``/``gid`` when given.
    Returns the source's :func:`manifest`, its one walk (anything else in it: :class:`Unusable`, nothing copied)."""
    def finish(path: Path, rel: str, mode: int) -> None:
        if uid is not None:
            os.chown(path, uid, gid)
        os.chmod(path, (modes or {}).get(rel, mode))

    rows = manifest(src)
    dst.mkdir(mode=0o700)
    for rel, kind, mode, _ in rows:  # sorted: each directory is made before what it holds
        if kind == "d":
            (dst / rel).mkdir(mode=0o700)
        else:
            copy_file(src / rel, dst / rel, allocate=allocate)
            finish(dst / rel, rel, mode)
    for rel, kind, mode, _ in rows:  # a directory's mode once all it holds is in
        if kind == "d":
            finish(dst / rel, rel, dir_mode if dir_mode is not None else mode)
    finish(dst, ".", dir_mode if dir_mode is not None else src.stat().st_mode & 0o7777)
    return rows


def copy_out(entry: Entry, dest: Path, *, uid: int, gid: int) -> None:
    """The entry's data directory to a new ``dest``, with install-db's modes and owned by ``uid``/``gid``."""
    copy_tree(entry.data, dest, allocate=True, uid=uid, gid=gid, modes=entry.meta["modes"])


def _private_dir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)


def _remove_abandoned(parent: Path) -> None:
    """Temporary siblings left by a process that died while filling an entry."""
    for tmp in parent.glob(".tmp-*-*-*"):
        pid = tmp.name.split("-")[-2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            log.info("removing %s, left by a run that died while filling the cache", tmp)
            shutil.rmtree(tmp, ignore_errors=True)


def store(key: Key, data: Path, *, install_output: Path, seconds: float, argv) -> Entry | None:
    """Keep the freshly installed ``data`` as the entry for ``key``; the entry in place (ours, or the
    race winner's), or None when the cache cannot take it (logged at INFO, never raised). A damaged entry
    in the way is replaced (:func:`_replace`)."""
    tmp = None
    try:
        final = key.path()
        tmp = final.with_name(f".tmp-{key.name}-{os.getpid()}-{time.monotonic_ns()}")
        _private_dir(final.parent)
        _remove_abandoned(final.parent)
        tmp.mkdir(mode=0o700)
        rows = copy_tree(data, tmp / "data", allocate=False, dir_mode=0o700)  # sparse: 15 MiB of data, not 110
        shutil.copyfile(install_output, tmp / "install-db.txt")
        meta = {"format": FORMAT, "key": key.name, "version": key.version, "argv": [str(a) for a in argv],
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "created_by": f"pid {os.getpid()} on {socket.gethostname()}", "install_seconds": round(seconds, 2),
                "modes": {".": data.stat().st_mode & 0o7777, **{rel: mode for rel, _, mode, _ in rows}},
                # what copy_tree made of the rows: the files' modes and sizes, every directory 0700
                "manifest": [[rel, kind, 0o700 if kind == "d" else mode, size] for rel, kind, mode, size in rows]}
        (tmp / ENTRY_FILE).write_text(json.dumps(meta, indent=1) + "\n")
        os.chmod(tmp / ENTRY_FILE, 0o600)
        ours = Entry(final, meta, install_output.read_text(errors="replace"))
    except (OSError, Unusable, NoCache) as exc:
        log.info("the pristine MariaDB data directory is not cached (%s); later runs install theirs too", exc)
        if tmp is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(tmp)
        return None
    try:
        os.rename(tmp, final)
        log.info("kept the pristine MariaDB data directory as %s for later runs", final)
        return ours
    except OSError as exc:  # an entry is there (ENOTEMPTY/EEXIST): another run's, or a damaged one
        error = exc.strerror
    try:
        theirs = lookup(key)
    except Unusable as exc:
        return _replace(key, tmp, ours, exc)
    shutil.rmtree(tmp, ignore_errors=True)
    log.info("the pristine cache entry %s was made meanwhile by another run (%s); keeping it", final, error)
    return theirs


def _replace(key: Key, tmp: Path, ours: Entry, damage: Unusable) -> Entry | None:
    """The damaged entry at ``ours.path`` moved aside, the complete ``tmp`` renamed into its place, the damaged
    one removed: the path holds the damaged entry, nothing, or ours, never a part of one. A run that
    put its own there meanwhile wins (ours is dropped, theirs returned)."""
    final = ours.path
    # a temporary sibling's name: _remove_abandoned removes it should this process die before it does
    aside = final.with_name(f".tmp-{key.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        try:
            os.rename(final, aside)
        except FileNotFoundError:  # another run moved it meanwhile
            pass
        os.rename(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("the damaged pristine cache entry %s was not replaced (%s)", final, exc.strerror)
        with contextlib.suppress(Unusable):
            return lookup(key)
        return None
    finally:
        _discard(aside)
    log.info("replaced the damaged pristine cache entry %s (%s) by this run's install for later runs", final, damage)
    return ours


def _discard(path: Path) -> None:
    """Remove a directory tree, or whatever else is at ``path`` (nothing there: nothing done)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def describe(entry: Entry, seconds: float) -> str:
    """install-db.txt's header for a copied data directory: where it came from, and what made it."""
    meta = entry.meta
    return (f"# mariadb-install-db was not run: the data directory was copied in {seconds:.2f} s from the pristine "
            f"cache entry {entry.path}\n"
            f"# (key {meta['key']}, made {meta['created']} by {meta['created_by']} in {meta['install_seconds']} s, "
            f"for {meta['version']}); that install's output:\n")
