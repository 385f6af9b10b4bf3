"""The journal: what the bot found, proposed, verified and published, in one SQLite file.

GitHub stays the source of truth for what was published; ``bot sync`` rebuilds missing rows
from it. Every method opens its own short-lived connection, so one :class:`Journal` can be
shared by the dashboard's worker threads. WAL mode lets readers run while one writer writes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.config import home_dir
from bot.errors import BotError
from bot.plan import READY, Plan, PlanDir, WithPrMarkdown, read_plan_dir, write_plan_dir
from bot.verify.verification import Verification as RecordedVerification

log = logging.getLogger(__name__)

FOUND = "found"
PROPOSED = "proposed"
VERIFIED = "verified"
FAILED = "failed"
APPROVED = "approved"
PR_OPEN = "pr_open"
MERGED = "merged"
CLOSED = "closed"
REJECTED = "rejected"
REQUESTED = "requested"  # the event of a maintainer's request for a proposal's PR
STATES = (FOUND, PROPOSED, VERIFIED, FAILED, APPROVED, PR_OPEN, MERGED, CLOSED, REJECTED)

# Which state may follow which. Publishing outcomes (pr_open / merged / closed) come from
# GitHub through record_pr, which may override these: GitHub is the source of truth.
TRANSITIONS: dict[str, frozenset[str]] = {
    FOUND: frozenset({PROPOSED, APPROVED, REJECTED}),
    PROPOSED: frozenset({VERIFIED, FAILED, REJECTED}),
    VERIFIED: frozenset({APPROVED, REJECTED, PROPOSED, FAILED}),
    FAILED: frozenset({PROPOSED, VERIFIED, REJECTED}),
    APPROVED: frozenset({PR_OPEN, VERIFIED, FOUND, FAILED}),
    PR_OPEN: frozenset({MERGED, CLOSED}),
    CLOSED: frozenset({PR_OPEN}),
    MERGED: frozenset(),
    REJECTED: frozenset({PROPOSED}),
}
APPROVABLE = (FOUND, VERIFIED)
REVERIFIABLE = (PROPOSED, VERIFIED, FAILED)
REJECTABLE = (FOUND, PROPOSED, VERIFIED, FAILED)
PENDING = (FOUND, VERIFIED)  # waiting for a maintainer's decision
_PR_STATES = {"open": PR_OPEN, "merged": MERGED, "closed": CLOSED}

_SCHEMA = """
CREATE TABLE IF NOT EXISTS findings (
    id INTEGER PRIMARY KEY,
    recipe TEXT NOT NULL,
    class_name TEXT NOT NULL,
    path TEXT NOT NULL,
    line INTEGER,
    architectures TEXT NOT NULL,
    evidence TEXT NOT NULL,
    summary TEXT NOT NULL,
    tree_root TEXT NOT NULL,
    base_commit TEXT NOT NULL,
    version TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    UNIQUE (version, base_commit, recipe, class_name, path)
);
CREATE TABLE IF NOT EXISTS proposals (
    id INTEGER PRIMARY KEY,
    fingerprint TEXT NOT NULL UNIQUE,
    state TEXT NOT NULL,
    recipe TEXT,
    class_name TEXT,
    vllm_version TEXT,
    base_commit TEXT,
    issue_number INTEGER,
    issue_title TEXT,
    plan_path TEXT,
    plan_json TEXT NOT NULL,
    patch TEXT NOT NULL,
    pr_markdown TEXT NOT NULL,
    pr_number INTEGER,
    pr_url TEXT,
    comment_url TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS verifications (
    id INTEGER PRIMARY KEY,
    proposal_id INTEGER NOT NULL REFERENCES proposals(id),
    passed INTEGER,
    data TEXT NOT NULL,
    recorded_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    proposal_id INTEGER REFERENCES proposals(id),
    at TEXT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT,
    note TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS triaged_issues (
    number INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    url TEXT NOT NULL,
    state TEXT NOT NULL,
    architecture TEXT,
    recorded_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_proposal ON events (proposal_id, id);
CREATE INDEX IF NOT EXISTS verifications_by_proposal ON verifications (proposal_id, id);
"""


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class ProposalRecord(WithPrMarkdown):
    """A proposal as the journal keeps it: its copy of the plan directory's files (the plan as
    JSON), where it stands in review, and what GitHub has for it."""

    id: int
    fingerprint: str
    state: str
    recipe: str | None
    class_name: str | None
    vllm_version: str | None
    base_commit: str | None
    issue_number: int | None
    issue_title: str | None
    plan_path: str | None
    plan: dict[str, Any]
    patch: str
    pr_markdown: str
    pr_number: int | None
    pr_url: str | None
    comment_url: str | None
    created_at: str
    updated_at: str

    @property
    def title(self) -> str:
        return self.pr_title or self.plan.get("title") or f"{self.recipe}: {self.class_name}"

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "plan"}
        data["title"] = self.title
        data["triage"] = self.plan.get("triage")
        data["verification"] = self.plan.get("verification")
        return data


@dataclass
class Event:
    id: int
    proposal_id: int | None
    at: str
    actor: str
    action: str
    from_state: str | None
    to_state: str | None
    note: str


@dataclass
class Verification:
    id: int
    proposal_id: int
    passed: bool | None
    data: dict[str, Any]
    recorded_at: str


@dataclass
class FindingRow:
    id: int
    recipe: str
    class_name: str
    path: str
    line: int | None
    architectures: list[str]
    evidence: dict[str, Any]
    summary: str
    tree_root: str
    base_commit: str
    version: str
    recorded_at: str
    proposal_id: int | None = None
    proposal_state: str | None = None


@dataclass(frozen=True)
class TriagedIssue:
    """An upstream issue and the architecture triage tied it to (None: triage could not)."""

    number: int
    title: str
    url: str
    state: str  # GitHub's: "open" or "closed"
    architecture: str | None
    recorded_at: str = ""


@dataclass
class FindingFilter:
    recipe: str | None = None
    version: str | None = None
    text: str | None = None
    limit: int = 500


@dataclass
class Summary:
    states: dict[str, int] = field(default_factory=dict)
    recipes: dict[str, dict[str, int]] = field(default_factory=dict)
    findings_by_recipe: dict[str, int] = field(default_factory=dict)
    findings_by_version: dict[str, int] = field(default_factory=dict)
    findings_total: int = 0


def plan_fingerprint(plan: Plan, patch: str) -> str:
    """The plan's own fingerprint, or a stable one derived from what it would publish."""
    if plan.fingerprint:
        return plan.fingerprint
    key = json.dumps(
        [plan.recipe, plan.class_name, plan.base_commit, plan.issue_number, patch],
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:32]


def _replaces_what_was_verified(previous: sqlite3.Row, patch: str, base_commit: str | None) -> bool:
    return previous["patch"] != patch or (previous["base_commit"] or None) != (base_commit or None)


def _approvable(verification: Mapping[str, Any]) -> bool | None:
    """Whether a recorded verification lets a maintainer approve; None when it says nothing
    (no verdict at all). A record too partial to read (older journals kept only the verdict)
    approves only what it says passed."""
    passed = verification.get("passed")
    if passed is None:
        return None
    try:
        return RecordedVerification.from_json(dict(verification)).approvable
    except BotError:
        return passed is True


def _initial_state(plan: Plan) -> str:
    if plan.status != READY:
        return FOUND
    if plan.verification is None:
        return PROPOSED
    return VERIFIED if plan.verification.approvable else FAILED


class Journal:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or home_dir() / "journal.sqlite3"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._open()
            except sqlite3.DatabaseError as exc:
                # A damaged journal must not stop the bot: keep it aside for a post-mortem
                # and start afresh (`bot sync` rebuilds what was published from GitHub).
                if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                    raise
                aside = self._move_aside()
                log.warning(
                    "the journal %s was corrupt (%s); moved to %s and rebuilt",
                    self.path,
                    exc,
                    aside.name,
                )
                self._open()
        except (sqlite3.Error, OSError) as exc:
            raise BotError(f"cannot open the journal {self.path}: {exc}") from None

    def _open(self) -> None:
        with self._connect() as conn:
            if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)

    def _move_aside(self) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        os.replace(self.path, aside)
        for suffix in ("-wal", "-shm"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                os.replace(side, aside.with_name(aside.name + suffix))
        return aside

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        # isolation_level=None: we issue BEGIN ourselves where atomicity matters.
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA foreign_keys=ON")
        try:
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken with BEGIN IMMEDIATE so racing writers serialise."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- writing ---------------------------------------------------------------------------

    def record_findings(
        self,
        findings: Iterable[Mapping[str, Any]],
        tree_root: Path | str,
        base_commit: str,
        version: str | None,
    ) -> int:
        """Replace the findings of one tree (a re-scan supersedes the last one)."""
        version = version or "unknown"
        rows = []
        for finding in findings:
            try:
                rows.append(
                    (
                        str(finding["recipe"]),
                        str(finding["class"]),
                        str(finding["path"]),
                        finding.get("line"),
                        json.dumps(list(finding.get("architectures") or [])),
                        json.dumps(finding.get("evidence") or {}, sort_keys=True),
                        str(finding.get("summary") or ""),
                        str(tree_root),
                        base_commit,
                        version,
                        _now(),
                    )
                )
            except KeyError as exc:
                raise BotError(f"a finding lacks the field {exc.args[0]!r}") from None
        with self._write() as conn:
            conn.execute(
                "DELETE FROM findings WHERE version = ? AND base_commit = ?", (version, base_commit)
            )
            conn.executemany(
                "INSERT OR REPLACE INTO findings (recipe, class_name, path, line, architectures,"
                " evidence, summary, tree_root, base_commit, version, recorded_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        return len(rows)

    def record_triaged_issue(self, issue: TriagedIssue) -> None:
        """Keep what triage said about one issue (the latest triage of a number wins); a
        finding whose architectures include it gains demand (bot/scan/priority.py)."""
        with self._write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO triaged_issues"
                " (number, title, url, state, architecture, recorded_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    int(issue.number),
                    issue.title[:300],
                    issue.url[:500],
                    issue.state,
                    issue.architecture,
                    _now(),
                ),
            )

    def triaged_issues(self) -> list[TriagedIssue]:
        with self._connect() as conn:
            rows = conn.execute("SELECT * FROM triaged_issues ORDER BY number").fetchall()
        return [TriagedIssue(**dict(row)) for row in rows]

    def record_proposal(self, plan_dir: Path, actor: str = "bot") -> int:
        """Store a plan directory's content; the same fingerprint again updates that row."""
        loaded = read_plan_dir(plan_dir)
        plan = loaded.plan
        fingerprint = plan_fingerprint(plan, loaded.patch)
        plan_json = plan.to_json()
        now = _now()
        columns = {
            # A group lists under its name, its classes joined (the plan holds each member).
            "recipe": plan.recipe or (f"group:{plan.group}" if plan.is_group else None),
            "class_name": plan.class_name or ", ".join(m.class_name for m in plan.members) or None,
            "vllm_version": plan.vllm_version,
            "base_commit": plan.base_commit,
            "issue_number": plan.issue_number,
            "issue_title": plan.issue_title,
            "plan_path": str(plan_dir.resolve()),
            "plan_json": plan_json,
            "patch": loaded.patch,
            "pr_markdown": loaded.pr_markdown,
            "updated_at": now,
        }
        with self._write() as conn:
            row = conn.execute(
                "SELECT id FROM proposals WHERE fingerprint = ?", (fingerprint,)
            ).fetchone()
            if row is not None:
                proposal_id = int(row["id"])
                previous = self._row(conn, proposal_id)
                assignments = ", ".join(f"{name} = ?" for name in columns)
                conn.execute(
                    f"UPDATE proposals SET {assignments} WHERE id = ?",
                    (*columns.values(), proposal_id),
                )
                if _replaces_what_was_verified(previous, loaded.patch, plan.base_commit):
                    self._reset_after_repropose(conn, proposal_id, previous["state"], plan, actor)
                return proposal_id
            state = _initial_state(plan)
            names = ", ".join(["fingerprint", "state", "created_at", *columns])
            marks = ", ".join("?" * (len(columns) + 3))
            cursor = conn.execute(
                f"INSERT INTO proposals ({names}) VALUES ({marks})",
                (fingerprint, state, now, *columns.values()),
            )
            proposal_id = int(cursor.lastrowid or 0)
            self._event(conn, proposal_id, actor, "recorded", None, state, str(plan_dir))
            if plan.verification:
                self._insert_verification(conn, proposal_id, plan.verification.to_json())
            return proposal_id

    def _reset_after_repropose(
        self, conn: sqlite3.Connection, proposal_id: int, current: str, plan: Plan, actor: str
    ) -> None:
        """New bytes need new evidence and a new review: back to proposed (found without a
        patch). GitHub's final word on a published PR (merged, closed) is left alone."""
        if current in (MERGED, CLOSED):
            return
        new_state = PROPOSED if plan.status == READY else FOUND
        conn.execute(
            "UPDATE proposals SET state = ?, updated_at = ? WHERE id = ?",
            (new_state, _now(), proposal_id),
        )
        note = "the patch changed: earlier verification and approval no longer apply"
        self._event(conn, proposal_id, actor, "reproposed", current, new_state, note)

    def record_verification(
        self, proposal_id: int, verification: Mapping[str, Any], actor: str = "bot"
    ) -> str:
        """Store a verification run; a proposal awaiting one moves to verified (approvable:
        :attr:`Verification.approvable`) or failed."""
        passed = _approvable(verification)
        with self._write() as conn:
            current = self._state(conn, proposal_id)
            self._insert_verification(conn, proposal_id, verification)
            plan = json.loads(self._row(conn, proposal_id)["plan_json"])
            plan["verification"] = dict(verification)
            conn.execute(
                "UPDATE proposals SET plan_json = ?, updated_at = ? WHERE id = ?",
                (json.dumps(plan, indent=2, sort_keys=True) + "\n", _now(), proposal_id),
            )
            if current in REVERIFIABLE and passed is not None:
                new_state = VERIFIED if passed else FAILED
                if new_state != current:
                    self._set_state(conn, proposal_id, current, new_state)
                    self._event(conn, proposal_id, actor, "verified", current, new_state, "")
                return new_state
            return current

    def transition(self, proposal_id: int, new_state: str, actor: str, note: str = "") -> str:
        """Move a proposal along the state machine; returns the state it left."""
        if new_state not in STATES:
            raise BotError(f"unknown proposal state {new_state!r}")
        with self._write() as conn:
            current = self._state(conn, proposal_id)
            if new_state not in TRANSITIONS[current]:
                raise BotError(f"proposal {proposal_id} is {current}; it cannot become {new_state}")
            self._set_state(conn, proposal_id, current, new_state)
            self._event(conn, proposal_id, actor, new_state, current, new_state, note)
            return current

    def claim(
        self, proposal_id: int, allowed_from: Iterable[str], new_state: str, actor: str, note: str
    ) -> str | None:
        """Atomically move from one of ``allowed_from`` to ``new_state``.

        Returns the state it left, or None when another request got there first (the
        proposal is no longer in an allowed state). Only the caller that gets a state back
        may act on it: this is what makes approve publish exactly once.
        """
        allowed = tuple(allowed_from)
        with self._write() as conn:
            current = self._state(conn, proposal_id)
            marks = ", ".join("?" * len(allowed))
            cursor = conn.execute(
                "UPDATE proposals SET state = ?, updated_at = ?"
                f" WHERE id = ? AND state IN ({marks})",
                (new_state, _now(), proposal_id, *allowed),
            )
            if cursor.rowcount != 1:
                return None
            self._event(conn, proposal_id, actor, new_state, current, new_state, note)
            return current

    def record_pr(
        self,
        proposal_id: int,
        pr_number: int | None,
        pr_url: str | None,
        state: str,
        actor: str = "bot",
        comment_url: str | None = None,
    ) -> str:
        """Record what GitHub says about the published PR (``open``/``merged``/``closed``)."""
        new_state = _PR_STATES.get(state, state)
        if new_state not in (PR_OPEN, MERGED, CLOSED):
            raise BotError(f"unknown PR state {state!r}; expected open, merged or closed")
        with self._write() as conn:
            row = self._row(conn, proposal_id)
            current = row["state"]
            conn.execute(
                "UPDATE proposals SET pr_number = ?, pr_url = ?, state = ?, updated_at = ?,"
                " comment_url = COALESCE(?, comment_url) WHERE id = ?",
                (pr_number, pr_url, new_state, _now(), comment_url, proposal_id),
            )
            if current != new_state or row["pr_number"] != pr_number:
                note = f"PR #{pr_number}" if pr_number else ""
                self._event(conn, proposal_id, actor, "pr", current, new_state, note)
            return new_state

    def record_comment(self, proposal_id: int, comment_url: str, actor: str = "bot") -> None:
        with self._write() as conn:
            state = self._state(conn, proposal_id)
            conn.execute(
                "UPDATE proposals SET comment_url = ?, updated_at = ? WHERE id = ?",
                (comment_url, _now(), proposal_id),
            )
            self._event(conn, proposal_id, actor, "commented", state, state, comment_url)

    def add_event(self, proposal_id: int | None, actor: str, action: str, note: str = "") -> None:
        with self._write() as conn:
            state = self._state(conn, proposal_id) if proposal_id is not None else None
            self._event(conn, proposal_id, actor, action, state, state, note)

    def record_request(self, proposal_id: int, login: str, note: str = "") -> None:
        """A maintainer asked for this proposal's PR (a ticked request on the dashboard issue):
        demand, as a triaged issue or a public draft is (bot/publish/pr.py ``demand_of``)."""
        self.add_event(proposal_id, login, REQUESTED, note)

    def requested_by(self, proposal_id: int) -> str | None:
        """The maintainer who first requested the proposal's PR, if one did."""
        with self._connect() as conn:
            row = conn.execute(
                "SELECT actor FROM events WHERE proposal_id = ? AND action = ? ORDER BY id LIMIT 1",
                (proposal_id, REQUESTED),
            ).fetchone()
        return str(row["actor"]) if row else None

    def import_published(
        self,
        fingerprint: str,
        title: str,
        body: str,
        pr_number: int | None,
        pr_url: str | None,
        state: str,
        upstream_issue: int | None = None,
    ) -> int | None:
        """Add a row for something GitHub shows as published but the journal lacks.

        Returns the new proposal id, or None when the fingerprint is already known.
        """
        new_state = _PR_STATES.get(state, state)
        if new_state not in STATES:
            raise BotError(f"unknown state {state!r}")
        now = _now()
        plan = {"status": READY, "reason": "rebuilt from GitHub by bot sync", "title": title}
        with self._write() as conn:
            if conn.execute(
                "SELECT 1 FROM proposals WHERE fingerprint = ?", (fingerprint,)
            ).fetchone():
                return None
            cursor = conn.execute(
                "INSERT INTO proposals (fingerprint, state, issue_number, plan_json, patch,"
                " pr_markdown, pr_number, pr_url, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, '', ?, ?, ?, ?, ?)",
                (
                    fingerprint,
                    new_state,
                    upstream_issue,
                    json.dumps(plan),
                    f"{title}\n\n{body}",
                    pr_number,
                    pr_url,
                    now,
                    now,
                ),
            )
            proposal_id = int(cursor.lastrowid or 0)
            self._event(conn, proposal_id, "sync", "rebuilt", None, new_state, pr_url or "")
            return proposal_id

    # -- reading ---------------------------------------------------------------------------

    def proposal(self, proposal_id: int) -> ProposalRecord:
        with self._connect() as conn:
            return _proposal(self._row(conn, proposal_id))

    def proposal_by_fingerprint(self, fingerprint: str) -> ProposalRecord | None:
        with self._connect() as conn:
            row = conn.execute(
                "SELECT * FROM proposals WHERE fingerprint = ?", (fingerprint,)
            ).fetchone()
        return _proposal(row) if row else None

    def proposals(self, states: Iterable[str] | None = None) -> list[ProposalRecord]:
        query, params = "SELECT * FROM proposals", ()
        if states is not None:
            wanted = tuple(states)
            query += f" WHERE state IN ({', '.join('?' * len(wanted))})"
            params = wanted
        with self._connect() as conn:
            rows = conn.execute(query + " ORDER BY id DESC", params).fetchall()
        return [_proposal(row) for row in rows]

    def events(self, proposal_id: int | None = None, limit: int = 200) -> list[Event]:
        with self._connect() as conn:
            if proposal_id is None:
                rows = conn.execute(
                    "SELECT * FROM events ORDER BY id DESC LIMIT ?", (limit,)
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT * FROM events WHERE proposal_id = ? ORDER BY id LIMIT ?",
                    (proposal_id, limit),
                ).fetchall()
        return [Event(**dict(row)) for row in rows]

    def verifications(self, proposal_id: int) -> list[Verification]:
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT * FROM verifications WHERE proposal_id = ? ORDER BY id", (proposal_id,)
            ).fetchall()
        return [
            Verification(
                id=row["id"],
                proposal_id=row["proposal_id"],
                passed=None if row["passed"] is None else bool(row["passed"]),
                data=json.loads(row["data"]),
                recorded_at=row["recorded_at"],
            )
            for row in rows
        ]

    def findings(self, where: FindingFilter | None = None) -> list[FindingRow]:
        where = where or FindingFilter()
        clauses, params = [], []
        if where.recipe:
            clauses.append("f.recipe = ?")
            params.append(where.recipe)
        if where.version:
            clauses.append("f.version = ?")
            params.append(where.version)
        if where.text:
            clauses.append("(f.class_name LIKE ? OR f.path LIKE ? OR f.architectures LIKE ?)")
            like = "%" + where.text.replace("%", "").replace("_", "") + "%"
            params += [like, like, like]
        sql = (
            "SELECT f.*, (SELECT p.id FROM proposals p WHERE p.class_name = f.class_name"
            " AND p.recipe = f.recipe ORDER BY p.id DESC LIMIT 1) AS proposal_id,"
            " (SELECT p.state FROM proposals p WHERE p.class_name = f.class_name"
            " AND p.recipe = f.recipe ORDER BY p.id DESC LIMIT 1) AS proposal_state"
            " FROM findings f"
        )
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY f.version DESC, f.recipe, f.class_name LIMIT ?"
        params.append(where.limit)
        with self._connect() as conn:
            rows = conn.execute(sql, params).fetchall()
        result = []
        for row in rows:
            data = dict(row)
            data["architectures"] = json.loads(data["architectures"])
            data["evidence"] = json.loads(data["evidence"])
            result.append(FindingRow(**data))
        return result

    def finding_facets(self) -> tuple[list[str], list[str]]:
        """The recipes and versions present, for the overview's filter choices."""
        with self._connect() as conn:
            recipes = [
                r[0] for r in conn.execute("SELECT DISTINCT recipe FROM findings ORDER BY 1")
            ]
            versions = [
                r[0] for r in conn.execute("SELECT DISTINCT version FROM findings ORDER BY 1 DESC")
            ]
        return recipes, versions

    def summary(self) -> Summary:
        result = Summary(states={state: 0 for state in STATES})
        with self._connect() as conn:
            for row in conn.execute(
                "SELECT COALESCE(recipe, '(none)') AS recipe, state, COUNT(*) AS n"
                " FROM proposals GROUP BY 1, 2"
            ):
                result.states[row["state"]] += row["n"]
                result.recipes.setdefault(row["recipe"], {})[row["state"]] = row["n"]
            for row in conn.execute("SELECT recipe, COUNT(*) AS n FROM findings GROUP BY 1"):
                result.findings_by_recipe[row["recipe"]] = row["n"]
            for row in conn.execute("SELECT version, COUNT(*) AS n FROM findings GROUP BY 1"):
                result.findings_by_version[row["version"]] = row["n"]
        result.findings_total = sum(result.findings_by_recipe.values())
        return result

    def materialise(self, proposal_id: int) -> Path:
        """A plan directory for publishing: the original if it still matches, else a copy."""
        proposal = self.proposal(proposal_id)
        original = _original_plan_dir(proposal)
        if original is not None:
            return original.path
        plan = Plan.from_dict(proposal.plan)
        target = Path(tempfile.mkdtemp(prefix=f"bot-plan-{proposal_id}-"))
        write_plan_dir(target, plan, proposal.patch, proposal.pr_markdown)
        return target

    def as_published(self, proposal_id: int) -> ProposalRecord:
        """The proposal with patch.diff, pr.md and plan.json as :meth:`materialise` would hand
        them to publishing (read from the plan directory when it is still this proposal's):
        what the dashboard shows for review, so that the review is of exactly what ships."""
        proposal = self.proposal(proposal_id)
        original = _original_plan_dir(proposal)
        if original is None:
            return proposal
        return replace(
            proposal,
            plan=json.loads(original.plan.to_json()),
            patch=original.patch,
            pr_markdown=original.pr_markdown,
        )

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _row(conn: sqlite3.Connection, proposal_id: int) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM proposals WHERE id = ?", (proposal_id,)).fetchone()
        if row is None:
            raise BotError(f"no proposal {proposal_id} in the journal")
        return row

    def _state(self, conn: sqlite3.Connection, proposal_id: int) -> str:
        return str(self._row(conn, proposal_id)["state"])

    @staticmethod
    def _set_state(conn: sqlite3.Connection, proposal_id: int, old: str, new: str) -> None:
        conn.execute(
            "UPDATE proposals SET state = ?, updated_at = ? WHERE id = ? AND state = ?",
            (new, _now(), proposal_id, old),
        )

    @staticmethod
    def _event(
        conn: sqlite3.Connection,
        proposal_id: int | None,
        actor: str,
        action: str,
        from_state: str | None,
        to_state: str | None,
        note: str,
    ) -> None:
        conn.execute(
            "INSERT INTO events (proposal_id, at, actor, action, from_state, to_state, note)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (proposal_id, _now(), actor, action, from_state, to_state, note),
        )

    @staticmethod
    def _insert_verification(
        conn: sqlite3.Connection, proposal_id: int, verification: Mapping[str, Any]
    ) -> None:
        passed = verification.get("passed")
        conn.execute(
            "INSERT INTO verifications (proposal_id, passed, data, recorded_at)"
            " VALUES (?, ?, ?, ?)",
            (
                proposal_id,
                None if passed is None else int(bool(passed)),
                json.dumps(dict(verification), sort_keys=True),
                _now(),
            ),
        )


def _original_plan_dir(proposal: ProposalRecord) -> PlanDir | None:
    """The plan directory the proposal was recorded from, if it still holds this proposal."""
    if not proposal.plan_path:
        return None
    try:
        loaded = read_plan_dir(Path(proposal.plan_path))
    except BotError:
        return None
    if plan_fingerprint(loaded.plan, loaded.patch) != proposal.fingerprint:
        return None
    return loaded


def _proposal(row: sqlite3.Row) -> ProposalRecord:
    data = dict(row)
    data["plan"] = json.loads(data.pop("plan_json"))
    return ProposalRecord(**data)
