"""Who authors and signs off the commit publish pushes.

A ``Signed-off-by`` line is its signer's own statement (the Developer Certificate of Origin):
nobody signs it for another person. So the commit is signed off by the person whose attestation
publishes it (:mod:`bot.publish.attestation`):

- the submitter (CLI): the identity configured for them, ``BOT_SUBMITTER_NAME`` /
  ``BOT_SUBMITTER_EMAIL``; they also commit it;
- an approving maintainer (the dashboard, the Action's ``publish`` environment): the name and
  address they gave with their approval, which make them the commit's author and its
  ``Signed-off-by``. The operator's identity stays the committer (their token pushes the branch
  and opens the PR), never the signer. The address must be one GitHub ties to the approver's
  login: their noreply address, their public e-mail, a verified e-mail their own token listed
  when they signed in to the dashboard, or, for the token's own user, the configured submitter
  address. Anything else is refused in one line, and nothing is published.
"""

from __future__ import annotations

from bot.config import GitHubSettings
from bot.errors import BotError
from bot.github.client import GitHubClient
from bot.publish.attestation import APPROVER, Attestation, Signer


def signer_of(
    attestation: Attestation | None, client: GitHubClient, settings: GitHubSettings
) -> Signer:
    """Who signs the commit off for ``attestation`` (known before the commit is made; None:
    the submitter attests later, at the confirmation). ``settings`` carry the submitter's
    identity (:func:`bot.publish.pr.with_submitter`)."""
    if attestation is None or attestation.role != APPROVER:
        return Signer(settings.git_name, settings.git_email)
    login = attestation.login
    signer = attestation.signer
    if signer is None:
        raise BotError(
            f"@{login} approved without the name and e-mail address they sign the commit off "
            "with: a `Signed-off-by` is its signer's own statement (DCO), and the operator "
            "never signs off another person's approval; nothing was published"
        )
    tied = addresses_of(login, client) | {a.lower() for a in signer.verified}
    if login.lower() == client.login.lower():
        tied.add(settings.git_email.lower())  # the token's own user: their configured address
    if signer.email.lower() not in tied:
        raise BotError(
            f"{signer.email} is not an address GitHub ties to @{login} (their noreply address, "
            "public e-mail, or a verified e-mail of the account they signed in with): the "
            "commit is signed off by its approver and nobody else; nothing was published"
        )
    return signer


def addresses_of(login: str, client: GitHubClient) -> set[str]:
    """The addresses GitHub itself attributes to ``login``, as anyone's token can read them:
    both forms of its noreply address and its public e-mail (lower case)."""
    profile = client.user_profile(login)
    found = {f"{login}@users.noreply.github.com".lower()}
    if isinstance(profile.get("id"), int):
        found.add(f"{profile['id']}+{login}@users.noreply.github.com".lower())
    if isinstance(profile.get("email"), str) and profile["email"]:
        found.add(profile["email"].lower())
    return found


def check_signed_by(attestation: Attestation, signer: Signer, settings: GitHubSettings) -> None:
    """The attestation publish goes on is the one the commit was signed off for."""
    if attestation.role == APPROVER:
        expected = attestation.signer
        same = expected is not None and expected.identity == signer.identity
    else:
        same = (settings.git_name, settings.git_email) == (signer.name, signer.email)
    if not same:
        raise BotError(
            f"the commit is signed off by {signer.name}, not by @{attestation.login} who "
            "attested it; nothing was published"
        )
