"""What a person attested before a PR is opened, bound to the patch and to the body they saw.

vLLM's ``AGENTS.md``: "Pure code-agent PRs are **not allowed**. A human submitter must
understand and defend the change end-to-end. The submitting human must review every changed
line and run relevant tests." So nothing is pushed until a person has seen the diff and the
exact body that will be posted, and said they read every changed line. Their answer is an
:class:`Attestation`, bound to the patch hash (what they read) and the body's hash (what they
saw); publish refuses one that names another patch or another body, so a publish-time fact that
would change the body (a new duplicate-search result, a GPU run GitHub now confirms) means
asking again.

Three paths, one record:

- the CLI (``bot propose`` / ``bot publish``): the submitter, at the confirmation prompt or with
  ``--read-every-line --body-sha SHA`` after reading ``bot publish --preview``;
- the review dashboard: the approving maintainer, ticking "I read every changed line" under the
  body shown to them (the form carries that body's hash) and confirming the name and e-mail
  address they sign the commit off with;
- GitHub Actions: the required reviewer who approved the run's ``publish`` environment, whose
  approval comment says ``read every changed line``, names the patch hash and carries their own
  ``Signed-off-by: Name <email>`` line (GitHub records the comment with the approval; the Action
  shows no body before that approval, so none is bound).

An approver's attestation carries their :class:`Signer`: the commit is theirs (its author and its
``Signed-off-by``, the DCO being the signer's own statement), never the operator's sign-off on
someone else's approval (:mod:`bot.publish.signoff` checks the address is one GitHub ties to
their login).

Whether the person ran the tests is not asked: it is read from the verification record, which
names who ran ``bot verify`` (``Verification.ran_by``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from bot.errors import BotError
from bot.publish.contrib_rules import quote

SUBMITTER = "submitter"  # the person whose token opens the PR
APPROVER = "approver"  # a maintainer who approved it for the submitter's token
ROLES = (SUBMITTER, APPROVER)

# Where the submitter read the diff and the body (the body's first person says "I read every
# changed line of the patch and this description (<via>)").
CLI_CONFIRMATION = "at the `bot publish` confirmation"
CLI_FLAGS = "with `bot publish --read-every-line --body-sha`"
DASHBOARD = "on the bot's review dashboard, after reading the diff and this body"
READ_EVERY_LINE = "The submitting human must review every changed line and run relevant tests."
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$")
# What an approval comment must say (case and spacing aside) and the patch hash it names.
_COMMENT_READ = re.compile(r"(?i)\bread\s+every\s+changed\s+line\b")
_COMMENT_HASH = re.compile(r"sha256:([0-9a-f]{12,64})")
_COMMENT_SIGNOFF = re.compile(
    r"(?im)^[ \t]*signed-off-by:[ \t]*([^<\n]*?)[ \t]*<([^<>\n]*)>[ \t]*$"
)
# A DCO signer as git writes them: a name on one line without <, > or @, and an e-mail address.
_SIGNER_NAME = re.compile(r"[^<>@]{1,100}")
_SIGNER_EMAIL = re.compile(r"[A-Za-z0-9._+-]{1,64}@[A-Za-z0-9.-]{1,190}")


@dataclass(frozen=True)
class Signer:
    """Who signs the commit off (``Signed-off-by: name <email>``) and authors it: the person
    who attested, in their own words. ``verified`` holds the addresses GitHub listed as this
    person's verified e-mails when they signed in with their own token (the dashboard), if it
    could read them."""

    name: str
    email: str
    verified: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        name, email = self.name.strip(), self.email.strip()
        if not name or not email:
            raise BotError(
                "give the name and e-mail address you sign the commit off with "
                "(`Signed-off-by`, the DCO: your own statement); nothing was published"
            )
        if not name.isprintable() or not _SIGNER_NAME.fullmatch(name):
            raise BotError(
                f"not a name to sign off with (one line, no <, > or @): {name[:60]!r}; "
                "nothing was published"
            )
        if not _SIGNER_EMAIL.fullmatch(email):
            raise BotError(f"not an e-mail address: {email[:60]!r}; nothing was published")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "email", email)

    @property
    def identity(self) -> str:
        return f"{self.name} <{self.email}>"


@dataclass(frozen=True)
class Attestation:
    login: str  # the person's GitHub login
    role: str  # SUBMITTER or APPROVER
    via: str  # where they said it, in words the body can show
    read_every_line: bool
    patch_hash: str  # "sha256:..." of the patch.diff they read
    body_sha: str | None = None  # sha256 of the body they saw; None where none was shown
    signer: Signer | None = None  # an approver's own sign-off (a submitter's is configured)

    def __post_init__(self) -> None:
        if not _LOGIN.match(self.login):
            raise BotError(f"not a GitHub login: {self.login[:60]!r}")
        if self.role not in ROLES:
            raise BotError(f"an attestation's role is {' or '.join(ROLES)}, not {self.role!r}")

    def seen(self, body: str) -> Attestation:
        """This attestation, bound to ``body`` (what the person was shown)."""
        return replace(self, body_sha=body_sha(body))


@dataclass(frozen=True)
class Preview:
    """What publish is about to do, for the person who attests: the patch, its hash, who opens
    the PR, and the body as it would be posted for a given attestation."""

    patch: str
    patch_hash: str
    submitter: str  # the token's login
    body_for: Callable[[Attestation], str]
    title: str


# Called once, before anything is pushed; returns the person's attestation, or None (nothing is
# published).
Attester = Callable[[Preview], Attestation | None]


def body_sha(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def require(attestation: Attestation | None, patch_hash: str, body: str) -> Attestation:
    """The attestation publish may open a PR on: someone read every changed line of this very
    patch and, where a body was shown, saw this very body. Else a one-line refusal."""
    if attestation is None:
        raise BotError(
            "nobody attested this change: the submitter (or an approving maintainer) must read "
            f"the diff and the body first ({quote(READ_EVERY_LINE)}); nothing was published"
        )
    if not attestation.read_every_line:
        raise BotError(
            f"@{attestation.login} did not attest reading every changed line "
            f"({quote(READ_EVERY_LINE)}); nothing was published"
        )
    if attestation.patch_hash != patch_hash:
        raise BotError(
            f"@{attestation.login} attested patch {attestation.patch_hash[:19]}, not this one "
            f"({patch_hash[:19]}); review it again. Nothing was published"
        )
    if attestation.body_sha is not None and attestation.body_sha != body_sha(body):
        raise BotError(
            f"the body changed since @{attestation.login} saw it (a publish-time fact, such as "
            "the duplicate search or a confirmed GPU run, differs); review it again. Nothing "
            "was published"
        )
    return attestation


@dataclass(frozen=True)
class Given:
    """An attester that answers with an attestation made beforehand (the dashboard's form, the
    Action's environment approval). Publish reads it before it commits: an approver's
    attestation decides who authors and signs off the commit."""

    attestation: Attestation | None

    def __call__(self, _: Preview) -> Attestation | None:
        return self.attestation


def given(attestation: Attestation | None) -> Attester:
    return Given(attestation)


def in_advance(attest: Attester) -> Attestation | None:
    """The attestation ``attest`` answers with whatever it is shown, if made beforehand."""
    return attest.attestation if isinstance(attest, Given) else None


def from_approval_comment(
    login: str, comment: str, via: str, patch_hash: str
) -> Attestation | None:
    """A required reviewer's approval comment as an attestation: it must say "read every
    changed line" and name the patch hash (at least its first 12 hex digits); else None. Its
    ``Signed-off-by: Name <email>`` line, if any, is the reviewer's :class:`Signer` (publish
    refuses an approval without one)."""
    if not _COMMENT_READ.search(comment or ""):
        return None
    named = _COMMENT_HASH.findall(comment or "")
    digest = patch_hash.removeprefix("sha256:")
    if not any(digest.startswith(prefix) for prefix in named):
        return None
    signoffs = _COMMENT_SIGNOFF.findall(comment or "")
    signer = Signer(*signoffs[-1]) if signoffs else None
    return Attestation(login, APPROVER, via, True, patch_hash, signer=signer)


def as_submitter(preview: Preview, via: str) -> Attestation:
    """The submitter's attestation of reading every line, not yet bound to a body."""
    return Attestation(preview.submitter, SUBMITTER, via, True, preview.patch_hash)


def at_terminal(
    show: Callable[[str], None], ask: Callable[[str], bool], via: str = CLI_CONFIRMATION
) -> Attester:
    """The CLI's confirmation: ``show`` the diff and the exact body, then ``ask`` the submitter
    whether they read every changed line and post exactly that body."""

    def attest(preview: Preview) -> Attestation | None:
        candidate = as_submitter(preview, via)
        body = preview.body_for(candidate)
        show(shown(preview, body))
        question = (
            f"You are @{preview.submitter}; the PR is opened with your token. Did you read every "
            "changed line of the diff above, and do you post exactly this body? [y/N] "
        )
        return candidate.seen(body) if ask(question) else None

    return attest


def with_flags(read_every_line: bool, sha: str, via: str = CLI_FLAGS) -> Attester:
    """``--read-every-line --body-sha SHA``: the submitter read the body ``bot publish
    --preview`` printed (its hash is SHA) and every changed line."""

    def attest(preview: Preview) -> Attestation | None:
        return Attestation(
            preview.submitter, SUBMITTER, via, read_every_line, preview.patch_hash, sha
        )

    return attest


def previewing(show: Callable[[str, str], None]) -> Attester:
    """``--preview``: show what would be posted, and its hash; attest nothing."""

    def attest(preview: Preview) -> Attestation | None:
        body = preview.body_for(as_submitter(preview, CLI_FLAGS))
        show(shown(preview, body), body_sha(body))
        return None

    return attest


def shown(preview: Preview, body: str) -> str:
    """The diff and the body as the submitter is shown them, with the body's hash."""
    return (
        f"--- patch.diff ({preview.patch_hash}) ---\n{preview.patch}"
        f"--- the PR, exactly as it will be posted ---\n{preview.title}\n\n{body}"
        f"--- end of the body (body sha256 {body_sha(body)}) ---"
    )
