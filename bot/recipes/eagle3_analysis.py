"""Static questions about EAGLE-3 support that the eagle3-* recipes share.

All answers come from the class index: no vLLM import, no torch. Each answer carries the
file:line evidence a maintainer needs to check it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.recipes.base import Finding
from bot.recipes.evidence import Bound, Evidence, Located
from bot.tree.index import DECODER_ATTRIBUTE, ClassIndex, ClassRef, External
from bot.tree.layout import INTERFACES_MODULE
from bot.tree.model_registry import GENERATION_CATEGORIES, RegistryEntry

INTERFACE = "SupportsEagle3"  # what a target declares to be loadable for EAGLE-3
MIXIN = "EagleModelMixin"  # what its decoder takes to collect the aux hidden states
SUPPORTS_EAGLE3 = ClassRef(INTERFACES_MODULE, INTERFACE)
EAGLE_MODEL_MIXIN = ClassRef(INTERFACES_MODULE, MIXIN)

# Interfaces and flags that mark pooling / embedding / reward / ranking models.
_POOLING_BASES = frozenset(
    {
        "VllmModelForPooling",
        "SupportsCrossEncoding",
        "SupportsScore",
        "SupportsLateInteraction",
    }
)
_POOLING_FLAGS = ("is_pooling_model",)


@dataclass(frozen=True)
class Construction:
    """``self.<attribute> = <cls>(...)`` somewhere in the owner's methods."""

    cls: ClassRef
    attribute: str
    owner: ClassRef
    line: int


@dataclass(frozen=True)
class AuxCollection:
    forward_owner: ClassRef
    forward_line: int
    helper_lines: tuple[int, ...]  # calls of EagleModelMixin._maybe_add_hidden_state
    layer_check_lines: tuple[int, ...]  # reads of self.aux_hidden_state_layers
    aux_lines: tuple[int, ...]  # every line naming aux_hidden_states

    @property
    def collects(self) -> bool:
        return bool(self.helper_lines) or bool(self.layer_check_lines and self.aux_lines)


def class_finding(
    recipe: str,
    ref: ClassRef,
    entries: list[RegistryEntry],
    evidence: Evidence,
    summary: str,
) -> Finding:
    """A finding about ``ref``, registered under ``entries``."""
    where = evidence.cls
    return Finding(
        recipe=recipe,
        class_name=ref.name,
        module=ref.module,
        path=where.path,
        line=where.line,
        architectures=tuple(sorted({e.arch for e in entries})),
        evidence=evidence,
        summary=summary,
    )


def locate(index: ClassIndex, ref: ClassRef) -> Located:
    facts = index.class_facts(ref)
    return Located(ref.name, index.path_of(ref), facts["line"] if facts else 0)


def declares_eagle3(index: ClassIndex, ref: ClassRef) -> bool:
    if SUPPORTS_EAGLE3 in index.ancestors(ref):
        return True
    flag = index.find_class_attr(ref, "supports_eagle3")
    return bool(flag and flag[1] == {"const": True})


def is_pooling_model(index: ClassIndex, ref: ClassRef, entries: list[RegistryEntry]) -> bool:
    if entries and not any(e.category in GENERATION_CATEGORIES for e in entries):
        return True
    for ancestor in index.ancestors(ref):
        name = ancestor.name if isinstance(ancestor, ClassRef) else ancestor.dotted.split(".")[-1]
        if name in _POOLING_BASES:
            return True
    for flag in _POOLING_FLAGS:
        found = index.find_class_attr(ref, flag)
        if found and found[1] == {"const": True}:
            return True
    return False


def constructed(index: ClassIndex, ref: ClassRef, attribute: str) -> list[Construction]:
    """The classes ``ref`` assigns to ``self.<attribute>``, most-derived assignment first.

    Understands ``self.model = X(...)``, a parameter default (``model_type=X``), a local alias,
    a factory method (``self.model = self._init_model(...)`` that returns ``X(...)``) and a
    class attribute (``self.model = self.model_cls(...)`` with ``model_cls = X``).
    """
    for owner in index.ancestors(ref):
        if not isinstance(owner, ClassRef):
            continue
        facts = index.class_facts(owner)
        if not facts:
            continue
        found: list[Construction] = []
        for method in facts["methods"].values():
            for attr, callee, line in method["assigns"]:
                if attr != attribute:
                    continue
                for cls in _callee_classes(index, ref, owner, callee):
                    found.append(Construction(cls, attribute, owner, line))
        if found:
            return found
    return []


def _callee_classes(
    index: ClassIndex, ref: ClassRef, owner: ClassRef, callee: list[str]
) -> list[ClassRef]:
    kind, name = callee
    if kind == "registered":
        return []  # by architecture name: the wrapper recipe resolves it through the registry
    if kind == "ref":
        return [r for r in index.resolve(owner.module, name) if isinstance(r, ClassRef)]
    # self.<name>(...): a factory method or a class attribute, looked up from the concrete class
    method = index.find_method(ref, name)
    if method is not None:
        method_owner, facts = method
        classes: list[ClassRef] = []
        for ret_kind, ret_name in facts["returns"]:
            if ret_kind == "ref":
                resolved = index.resolve(method_owner.module, ret_name)
                classes.extend(r for r in resolved if isinstance(r, ClassRef))
        return classes
    attr = index.find_class_attr(ref, name)
    if attr is not None and isinstance(attr[1], dict) and "ref" in attr[1]:
        attr_owner, value = attr
        resolved = index.resolve(attr_owner.module, value["ref"])
        return [r for r in resolved if isinstance(r, ClassRef)]
    return []


def mixin_chain(index: ClassIndex, ref: ClassRef) -> list[ClassRef] | None:
    """From ``ref`` up to the class whose bases list EagleModelMixin (that class last)."""
    chain = index.path_to(ref, EAGLE_MODEL_MIXIN)
    return chain[:-1] if chain else None


def aux_collection(index: ClassIndex, ref: ClassRef) -> AuxCollection | None:
    found = index.find_method(ref, "forward")
    if found is None:
        return None
    owner, facts = found
    aux = facts.get("aux", {})
    return AuxCollection(
        forward_owner=owner,
        forward_line=facts["line"],
        helper_lines=tuple(aux.get("helper", ())),
        layer_check_lines=tuple(aux.get("layers_attr", ())),
        aux_lines=tuple(aux.get("aux_names", ())),
    )


def external_name(base: ClassRef | External) -> str:
    return base.name if isinstance(base, ClassRef) else base.dotted


def decoder_evidence_line(decoder: Bound) -> str:
    """A finding's decoder in `bot scan`'s table; its recipe adds what else it knows."""
    return f"{decoder.attribute} = {decoder.name} ({decoder.path}:{decoder.line})"


def is_multimodal(index: ClassIndex, ref: ClassRef) -> bool:
    # SupportsMultiModal brings get_language_model(), which the interface follows instead of self.
    return any(
        isinstance(a, ClassRef) and a.name == "SupportsMultiModal" for a in index.ancestors(ref)
    )


def forwards_decoder_output(
    index: ClassIndex, ref: ClassRef, attribute: str = DECODER_ATTRIBUTE
) -> bool:
    """Whether ``ref.forward`` returns what ``self.<attribute>(...)`` returned, untouched.

    The decoder returns ``(hidden_states, aux_hidden_states)`` when aux layers are set; a
    forward that post-processes its output would break on the tuple, so the declaration alone
    would not be enough. A class without a forward of its own in the index is not judged here.
    """
    found = index.find_method(ref, "forward")
    if found is None:
        return True
    return attribute in found[1].get("passthrough", [])
