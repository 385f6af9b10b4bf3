"""A plan's identity on GitHub, written and parsed in one place.

What the bot published is found again on GitHub by what this module writes: a fingerprint per
fix (``recipe:Class[@variant]:base12``), a deterministic branch name, and hidden
``<!-- bot:... -->`` markers in PR bodies, issue comments and the dashboard issue. A group
plan has a fingerprint of its own (``group:...``) and carries one member marker per class,
so every class keeps its own fingerprint: a class found in any PR's body (as the fingerprint
of a single-class PR or a member of a group) is a class already proposed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

# The characters a fingerprint may hold (checked before one goes into a body or a branch).
FINGERPRINT = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")
# A branch the bot made: bot/<recipe>/<slug>.
BOT_BRANCH = re.compile(r"^bot/[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*$")
GROUP_PREFIX = "group:"

REVIEWER_MARKER = "<!-- bot:reviewer -->"
DASHBOARD_MARKER = "<!-- bot:dashboard -->"
RESULTS_START = "<!-- bot:results:start -->"
RESULTS_END = "<!-- bot:results:end -->"

# Written as ``bot:fingerprint=FP``; older bodies and hand-written ones may use ``:``.
_FINGERPRINT_MARKER = re.compile(r"<!--\s*bot:(fingerprint|member)[=:]\s*([^\s>]+)\s*-->")
_FINGERPRINT_LINE = re.compile(r"^<!-- bot:(?:fingerprint|member)=.*-->$")
_BODY_SHA = re.compile(r"<!-- bot:body-sha=([0-9a-f]+) -->")
# The marker trails the text: GitHub renders no checkbox when a comment leads the item.
# Bodies saved from GitHub's web editor end their lines with \r\n.
_APPROVE_TASK = re.compile(
    r"^[ \t]*[-*+][ \t]+\[([ xX])\][ \t].*?"
    r"<!--[ \t]*bot:approve=([^\s<>]+?)(?:[ \t]+review=([^\s<>]+?))?[ \t]*-->[ \t\r]*$",
    re.M,
)


# -- fingerprints and branches ---------------------------------------------------------------


def fingerprint(recipe: str, class_name: str, variant: str | None, base_commit: str) -> str:
    """One class's fix at one base commit."""
    return f"{recipe}:{class_name}" + (f"@{variant}" if variant else "") + f":{base_commit[:12]}"


def group_fingerprint(group: str, members: Iterable[str], base_commit: str) -> str:
    """A group plan's own fingerprint: its key, the base commit and which members it holds
    (another set of members is another PR)."""
    digest = _members_digest(members)
    return f"{GROUP_PREFIX}{_slug(group)}:{base_commit[:12]}:{digest}"


def is_group_fingerprint(value: str) -> bool:
    return value.startswith(GROUP_PREFIX)


def class_key(value: str) -> str | None:
    """A class fingerprint without its base commit (``recipe:Class[@variant]``): the same fix
    proposed on an older base is the same class. None for a group's own fingerprint."""
    if is_group_fingerprint(value) or value.count(":") < 2:
        return None
    return value.rsplit(":", 1)[0]


def is_group_of(value: str, group: str) -> bool:
    """Whether ``value`` is the fingerprint of a plan of group ``group`` (any members, any
    base)."""
    return is_group_fingerprint(value) and value.split(":")[1] == _slug(group)


def fix_key(value: str) -> str | None:
    """A plan's fingerprint without its base commit: what stays the same when the upstream
    moves and the same fix is planned again. A class plan's ``recipe:Class[@variant]``; a
    group's ``group:<key>:<members digest>`` (the same members, so the same PR). None for a
    value that is neither."""
    if is_group_fingerprint(value):
        parts = value.split(":")
        return f"{GROUP_PREFIX}{parts[1]}:{parts[3]}" if len(parts) == 4 else None
    return class_key(value)


def branch_name(recipe: str, class_name: str, variant: str | None) -> str:
    return f"bot/{recipe}/{_class_slug(class_name)}" + (f"-{variant}" if variant else "")


def group_branch_name(group: str, members: Iterable[str]) -> str:
    return f"bot/group/{_slug(group)}-{_members_digest(members)}"


def _members_digest(members: Iterable[str]) -> str:
    """Which members, by fix: a member's fingerprint without its base commit, so the same
    classes planned again after the upstream moved are the same group, on the same branch."""
    keys = sorted({class_key(m) or m for m in members})
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:10]


def _class_slug(class_name: str) -> str:
    slug = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", class_name).lower()
    return _slug(slug)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


# -- PR body markers -------------------------------------------------------------------------


def fingerprint_marker(value: str) -> str:
    return f"<!-- bot:fingerprint={value} -->"


def member_marker(value: str) -> str:
    return f"<!-- bot:member={value} -->"


def identity_markers(plan_fingerprint: str, members: Iterable[str]) -> list[str]:
    """The lines a PR body carries: each member's marker (unless it is the plan's own, as in a
    group of one), then the plan's fingerprint."""
    lines = [member_marker(m) for m in dict.fromkeys(members) if m != plan_fingerprint]
    return [*lines, fingerprint_marker(plan_fingerprint)]


def is_identity_line(line: str) -> bool:
    """A fingerprint or member marker line (compose_body writes them afresh)."""
    return bool(_FINGERPRINT_LINE.match(line.strip()))


def plan_fingerprint_in(body: str) -> str | None:
    """The fingerprint of the plan a body was published for (its last fingerprint marker)."""
    found = [m[2] for m in _FINGERPRINT_MARKER.finditer(body) if m[1] == "fingerprint"]
    return found[-1] if found else None


def fingerprints_in(body: str) -> set[str]:
    """Every fingerprint a body names: the plan's and each member's."""
    return {m[2] for m in _FINGERPRINT_MARKER.finditer(body)}


def body_sha_marker(digest: str) -> str:
    return f"<!-- bot:body-sha={digest} -->"


def body_sha_in(body: str) -> str | None:
    found = _BODY_SHA.search(body)
    return found.group(1) if found else None


def has_body_sha(line: str) -> bool:
    return bool(_BODY_SHA.search(line))


# -- issue comments and the dashboard issue --------------------------------------------------


def status_marker(issue_number: int) -> str:
    """The sticky comment's marker on a triaged issue (one comment per issue, updated)."""
    return f"<!-- bot:status issue={issue_number} -->"


_STATUS = re.compile(r"<!--[ \t]*bot:status[ \t]+issue=\d+[ \t]*-->")


def is_status_comment(body: str) -> bool:
    """Whether a comment carries the sticky status comment's marker (:func:`status_marker`):
    the bot's own words on an issue, never the reporter's."""
    return bool(_STATUS.search(body))


def approve_marker(value: str, review: str) -> str:
    return f"<!-- bot:approve={value} review={review} -->"


_REQUEST_TASK = re.compile(
    r"^[ \t]*[-*+][ \t]+\[([ xX])\][ \t].*?<!--[ \t]*bot:request=([^\s<>]+?)[ \t]*-->[ \t\r]*$",
    re.M,
)


def request_marker(value: str) -> str:
    """A requestable item's marker on the dashboard issue (a plan nobody asked for yet)."""
    return f"<!-- bot:request={value} -->"


def ticked_requests(body: str) -> set[str]:
    """The fingerprint of every ticked request box in a dashboard issue body."""
    return {m[2] for m in _REQUEST_TASK.finditer(body) if m[1] in "xX"}


def ticked_approvals(body: str) -> set[tuple[str, str]]:
    """(fingerprint, review hash) of every ticked box in a dashboard issue body."""
    return {(m[2], m[3] or "") for m in _APPROVE_TASK.finditer(body) if m[1] in "xX"}


def ticked_as_rendered(body: str, box: tuple[str, str], rendered: str) -> bool:
    """Whether ``box`` is ticked on a line that, unticked, is exactly ``rendered``: a marker
    moved onto another proposal's line (anyone who can edit the issue can do that) makes the
    line say one thing and approve another, so such a tick counts for nothing."""
    for match in _APPROVE_TASK.finditer(body):
        if match[1] in "xX" and (match[2], match[3] or "") == box:
            line = match[0].strip()
            unticked = re.sub(r"^([-*+][ \t]+)\[[xX]\]", r"\1[ ]", line, count=1)
            return unticked == rendered
    return False
