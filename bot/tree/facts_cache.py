"""Per-file facts cached by content hash, in one SQLite store per kind under the user cache dir.

Whatever is derived from a file's text alone (class facts, error signatures) is keyed by the
hash of that text, so a second run over an unchanged tree, or over a release that shares most
files with one already seen, parses nothing. A run reads only the keys of the tree it scans
(never the whole store), writes only what it parsed, and records which keys each tree uses:
entries that no recorded tree uses any more, and trees that no longer exist, are pruned when a
tree's set changes. So a warm scan costs what the tree costs, however many releases the cache
has seen. :meth:`FactsStore.content_keys` also records each file's key with its stat, so a warm
scan reads no file whose stat is unchanged (as git's index does).

:func:`remembered` keeps one answer per tree the same way (an analysis of a few files that
are not class facts: the model registry, the speculative-decoding loaders), keyed by the
content it reads.

Values are pickles of plain data only (dicts, lists, strings, numbers, tuples, sets): an entry
that names any class or function is refused, so a planted cache cannot run code. A damaged
store is reported and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import pickle
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bot.config import cache_dir

log = logging.getLogger(__name__)

_REMEMBERED: dict[tuple[str, str], Any] = {}  # this process's answers of remembered()
_BATCH = 500  # keys per query (SQLite's default limit on parameters is 999)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS facts (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
    "CREATE TABLE IF NOT EXISTS tree_keys (tree TEXT NOT NULL, key TEXT NOT NULL, "
    "PRIMARY KEY (tree, key)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS tree_keys_key ON tree_keys (key)",
    "CREATE TABLE IF NOT EXISTS file_keys (tree TEXT NOT NULL, path TEXT NOT NULL, "
    "stat TEXT NOT NULL, key TEXT NOT NULL, PRIMARY KEY (tree, path)) WITHOUT ROWID",
)
# A file changed less than this long before its stat was taken is not recorded with its key: a
# second write within the same tick of the file system's clock (2 s on FAT) could leave every
# field of its stat as it was (git's "racily clean" files).
_SETTLED_NS = 2_000_000_000


def content_key(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def decoded(data: bytes) -> str:
    """A file's bytes as ``Path.read_text(encoding="utf-8")`` reads them (universal newlines);
    UnicodeDecodeError as it does."""
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def remembered(
    kind: str,
    version: int,
    tree: Path,
    content: bytes,
    compute: Callable[[], Any],
    valid_entry: Callable[[Any], bool] | None = None,
) -> Any:
    """What ``compute()`` answers about ``tree``, as plain data, cached by ``content`` (every
    byte the answer depends on: the files it reads, with their paths): from this process's
    memory, else from the store ``kind`` (bump ``version`` when the answer's shape or meaning
    changes), else computed and stored. One answer per tree and kind: the tree's key is
    recorded, and answers no tree uses any more are pruned, as the index's are. Callers must
    not change the value (it is shared)."""
    key = content_key(content)
    memo = (str(cache_file(kind, version)), key)
    if memo in _REMEMBERED:
        return _REMEMBERED[memo]
    with open_store(kind, version, valid_entry) as store:
        found = store.get([key])
        if key in found:
            value = found[key]
        else:
            value = compute()
            store.put({key: value})
        store.record_tree(tree, [key])
    if len(_REMEMBERED) >= 64:
        _REMEMBERED.clear()
    _REMEMBERED[memo] = value
    return value


def cache_file(kind: str, version: int) -> Path:
    tag = f"v{version}-py{sys.version_info.major}{sys.version_info.minor}"
    return cache_dir() / "index" / f"{kind}-{tag}.sqlite3"


class _PlainUnpickler(pickle.Unpickler):
    """Only plain data: a value that names any class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


class _Corrupt(Exception):
    pass


class FactsStore:
    """The store of one kind of facts. Use :func:`open_store`."""

    def __init__(self, path: Path, valid_entry: Callable[[Any], bool] | None) -> None:
        self.path = path
        self._valid = valid_entry
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection | None:
        """The open store; None when it cannot be opened (then nothing is cached)."""
        if self._db is None:
            try:
                self._db = self._open()
            except sqlite3.DatabaseError:  # not a database, or a damaged one
                self._rebuild()
                with contextlib.suppress(OSError, sqlite3.Error):
                    self._db = self._open()
            except (OSError, sqlite3.Error):
                return None
        return self._db

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            for statement in _SCHEMA:
                db.execute(statement)
        except sqlite3.Error:
            db.close()
            raise
        return db

    def get(self, keys: Iterable[str]) -> dict[str, Any]:
        """The stored values of ``keys`` (those present). A damaged store is reported, emptied
        and read as empty."""
        try:
            return self._get(list(dict.fromkeys(keys)))
        except (_Corrupt, sqlite3.DatabaseError):
            self._rebuild()
            return {}

    def _get(self, keys: list[str]) -> dict[str, Any]:
        db = self._connect()
        if db is None:
            return {}
        found: dict[str, Any] = {}
        for batch in _batches(keys):
            marks = ",".join("?" * len(batch))
            query = f"SELECT key, value FROM facts WHERE key IN ({marks})"  # "?" marks only
            for key, blob in db.execute(query, batch):
                found[key] = self._decode(blob)
        return found

    def _decode(self, blob: bytes) -> Any:
        try:
            value = _PlainUnpickler(io.BytesIO(blob)).load()
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with our cache, it is rebuilt
            raise _Corrupt(str(exc)) from None
        if self._valid is not None and not self._valid(value):
            raise _Corrupt("an entry is not what the cache holds")
        return value

    def put(self, items: dict[str, Any]) -> None:
        """Store ``items`` (a cache we cannot write only costs time)."""
        db = self._connect()
        if db is None or not items:
            return
        rows = [(k, pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)) for k, v in items.items()]
        with contextlib.suppress(sqlite3.Error), _transaction(db):
            db.executemany("INSERT OR REPLACE INTO facts (key, value) VALUES (?, ?)", rows)

    def content_keys(
        self, tree: Path, files: Sequence[str | Path], *, reuse: bool = True
    ) -> list[str]:
        """The content key of each of ``files`` (paths inside the resolved ``tree``). A file
        whose stat (device, inode, size, modification and change times) is the one recorded
        with its key by the last call for ``tree`` is not read; ``reuse=False`` reads every
        file (and records them afresh). Any write changes a file's change time, which no
        program can set back, so an edited file is read again."""
        name, prefix = str(tree), f"{tree}{os.sep}"
        recorded = self._recorded_keys(name) if reuse else {}
        settled = time.time_ns() - _SETTLED_NS
        keys: list[str] = []
        rows: dict[str, tuple[str, str]] = {}
        for path in files:
            text = str(path)
            relative = text[len(prefix) :] if text.startswith(prefix) else text
            stat = os.stat(text)  # before reading: a write in between changes it for next time
            signature = (
                f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"
            )
            known = recorded.get(relative)
            if known is not None and known[0] == signature:
                key = known[1]
            else:
                with open(text, "rb") as file:
                    key = content_key(file.read())
            keys.append(key)
            if max(stat.st_mtime_ns, stat.st_ctime_ns) < settled:
                rows[relative] = (signature, key)
        if rows != recorded:
            self._record_keys(name, rows)
        return keys

    def _recorded_keys(self, tree: str) -> dict[str, tuple[str, str]]:
        db = self._connect()
        if db is None:
            return {}
        with contextlib.suppress(sqlite3.Error):
            query = "SELECT path, stat, key FROM file_keys WHERE tree = ?"
            return {path: (stat, key) for path, stat, key in db.execute(query, (tree,))}
        return {}

    def _record_keys(self, tree: str, rows: dict[str, tuple[str, str]]) -> None:
        db = self._connect()
        if db is None:
            return
        with contextlib.suppress(sqlite3.Error), _transaction(db):
            db.execute("DELETE FROM file_keys WHERE tree = ?", (tree,))
            db.executemany(
                "INSERT INTO file_keys (tree, path, stat, key) VALUES (?, ?, ?, ?)",
                [(tree, path, stat, key) for path, (stat, key) in rows.items()],
            )

    def record_tree(self, tree: Path, keys: Iterable[str]) -> None:
        """Remember the keys ``tree`` uses; when they changed, prune what no tree uses."""
        db = self._connect()
        if db is None:
            return
        name, wanted = str(tree.resolve()), set(keys)
        with contextlib.suppress(sqlite3.Error):
            rows = db.execute("SELECT key FROM tree_keys WHERE tree = ?", (name,))
            if {key for (key,) in rows} == wanted:
                return
            with _transaction(db):
                db.execute("DELETE FROM tree_keys WHERE tree = ?", (name,))
                db.executemany(
                    "INSERT INTO tree_keys (tree, key) VALUES (?, ?)", [(name, k) for k in wanted]
                )
                trees = [t for (t,) in db.execute("SELECT DISTINCT tree FROM tree_keys")]
                gone = [(t,) for t in trees if not Path(t).is_dir()]
                db.executemany("DELETE FROM tree_keys WHERE tree = ?", gone)
                db.executemany("DELETE FROM file_keys WHERE tree = ?", gone)
                db.execute("DELETE FROM facts WHERE key NOT IN (SELECT key FROM tree_keys)")

    def _rebuild(self) -> None:
        log.warning("the cache %s was corrupt; it is rebuilt", self.path)
        self.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{self.path}{suffix}").unlink()

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None


@contextlib.contextmanager
def open_store(
    kind: str, version: int, valid_entry: Callable[[Any], bool] | None = None
) -> Iterator[FactsStore]:
    store = FactsStore(cache_file(kind, version), valid_entry)
    try:
        yield store
    finally:
        store.close()


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _batches(keys: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(keys), _BATCH):
        yield keys[start : start + _BATCH]
