"""``eagle3-enable`` for a decoder several targets share: fixed together, or not at all.

When one decoder's ``forward`` runs under several registered targets (OpenPangu's three
classes build ``OpenPanguModel``; ``LongcatFlashNgramForCausalLM`` builds ``FlashNgramModel``,
which inherits ``FlashModel``'s forward), the capture added once reaches all of them. Declaring
the interface on only one would leave the others with the capture and no interface, so the
targets form one set: ready together when every member is ready on its own, each refused with
every blocker of the set named otherwise. One plan fixes the set (:func:`shared_plan`): the
mixin and the capture on the decoder whose forward they run, the interface on every target,
the regression test listing every architecture and a contributed forward test per target.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.recipes.eagle3_enable_analysis import Refusal
from bot.tree.index import ClassIndex, ClassRef

if TYPE_CHECKING:
    from bot.recipes.eagle3_enable import Candidate


def join_shared(
    index: ClassIndex, found: Sequence[Candidate], sharers: Mapping[ClassRef, Sequence[ClassRef]]
) -> list[Candidate]:
    """``found`` with each set of targets that share a forward joined: every member ready
    (``shared`` naming the set) when all are, else each refused naming the set's blockers."""
    by_ref = {c.ref: c for c in found}
    sets = _connected(sharers, [c.ref for c in found if c.owner not in (None, c.decoder)])
    joined: list[Candidate] = []
    for candidate in found:
        members = sets.get(candidate.ref)
        if members is None:
            joined.append(candidate)
            continue
        blockers = _set_blockers(index, candidate, [by_ref.get(m) for m in members], members)
        if blockers:
            own = candidate.verdict
            reasons = [own.reason] if isinstance(own, Refusal) else []
            verdict = Refusal("; and ".join(dict.fromkeys([*reasons, *blockers])))
            joined.append(replace(candidate, verdict=verdict, shared=()))
        else:
            joined.append(replace(candidate, shared=members))
    return joined


def _connected(
    sharers: Mapping[ClassRef, Sequence[ClassRef]], alone: Sequence[ClassRef]
) -> dict[ClassRef, tuple[ClassRef, ...]]:
    """Each target that shares a forward (or inherits one) mapped to its whole set, sorted."""
    links: dict[ClassRef, set[ClassRef]] = {}
    for ref, others in sharers.items():
        for other in others:
            links.setdefault(ref, set()).add(other)
            links.setdefault(other, set()).add(ref)
    for ref in alone:
        links.setdefault(ref, set())
    sets: dict[ClassRef, tuple[ClassRef, ...]] = {}
    for start in links:
        if start in sets:
            continue
        seen, todo = {start}, [start]
        while todo:
            for nxt in links.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        members = tuple(sorted(seen))
        for ref in members:
            sets[ref] = members
    return sets


def _set_blockers(
    index: ClassIndex,
    candidate: Candidate,
    members: Sequence[Candidate | None],
    refs: Sequence[ClassRef],
) -> list[str]:
    """What keeps ``candidate``'s set from being fixed together, in plain words."""
    owner = candidate.captured
    own = candidate.verdict.reason if isinstance(candidate.verdict, Refusal) else None
    blockers: list[str] = []
    for ref, member in zip(refs, members, strict=True):
        if member is None:
            blockers.append(f"{ref.name} is not a target this recipe can fix")
        elif member.ref == candidate.ref:
            continue
        elif isinstance(member.verdict, Refusal):
            same = member.verdict.reason == own
            why = "for the same reason" if same else f"({member.verdict.reason})"
            blockers.append(f"{ref.name} is refused {why}")
        elif member.captured != owner:
            blockers.append(
                f"{ref.name}'s decoder runs {member.captured.name}.forward, not {owner.name}'s"
            )
    if blockers:
        names = ", ".join(r.name for r in refs if r != candidate.ref)
        blockers = [
            f"{owner.name}.forward runs in {names} too, so they are fixed together only, and "
            + "; ".join(blockers)
        ]
    if not any(m is not None and m.decoder == owner for m in members):
        blockers.append(
            f"{candidate.decoder.name} inherits forward from {owner.name}, which no target "
            "builds itself; editing it reaches decoders this recipe does not check"
        )
    return blockers


def lead(members: Sequence[Candidate], index: ClassIndex) -> Candidate:
    """The member a set's plan is named after: the first (by file, then name) whose own
    decoder is the one gaining the capture."""
    own = [m for m in members if m.decoder == m.captured]
    return min(own or members, key=lambda m: (index.path_of(m.ref), m.ref.name))
