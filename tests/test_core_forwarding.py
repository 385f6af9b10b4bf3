"""What the core-eagle3-forwarding codemod's defaults do when they run.

The skeleton's interfaces module (the protocol's two defaults as vLLM writes them) is rewritten
by the codemod with the guard's raise and executed; wrappers over three kinds of language
model call the protocol's methods. A wrapper the defaults serve today (its language model's
``.model`` has ``EagleModelMixin``) keeps today's path even when its language model overrides
the methods (the Qwen3.5 family); one whose language model declares the interface but keeps
its decoder elsewhere is forwarded to; one whose language model cannot collect gets the
tree's clear error, not an ``AssertionError``.
"""

from __future__ import annotations

import textwrap
from types import ModuleType
from typing import Any

import pytest

from bot.recipes.core_eagle3_forwarding.codemods import RAISES, forward_eagle3_defaults
from tests.synthetic import INTERFACES

HELPER = "\n\ndef supports_eagle3(model):\n    return getattr(model, 'supports_eagle3', False)\n"


def interfaces(source: str) -> ModuleType:
    module = ModuleType("interfaces")
    exec(compile(source, "interfaces.py", "exec"), module.__dict__)  # noqa: S102 - our text
    return module


@pytest.fixture(scope="module")
def forwarding() -> ModuleType:
    return interfaces(forward_eagle3_defaults(textwrap.dedent(INTERFACES) + HELPER, RAISES))


def kinds(m: ModuleType) -> dict[str, Any]:
    """A decoder with the mixin, and three language models around it."""

    class Decoder(m.EagleModelMixin):
        def __init__(self) -> None:
            self.layers = list(range(8))
            self.set: tuple[int, ...] | None = None

        def _set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            self.set = layers

    class Overriding(m.SupportsEagle3):
        """Declares the interface over a `.model` decoder and overrides both methods."""

        def __init__(self) -> None:
            self.model = Decoder()
            self.calls: list[str] = []

        def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            self.calls.append("override")

        def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
            return (0,)

    class Elsewhere(m.SupportsEagle3):
        """Declares the interface, its decoder at `.transformer` reached by its own methods."""

        def __init__(self) -> None:
            self.transformer = Decoder()

        def set_aux_hidden_state_layers(self, layers: tuple[int, ...]) -> None:
            self.transformer._set_aux_hidden_state_layers(layers)

        def get_eagle3_default_aux_hidden_state_layers(self) -> tuple[int, ...]:
            return (1, 4, 5)

    class Incapable:
        """Neither declares the interface nor has a decoder with the mixin."""

        def __init__(self) -> None:
            self.model = object()

    class Wrapper(m.SupportsMultiModal, m.SupportsEagle3):
        def __init__(self, language_model: object) -> None:
            self.language_model = language_model

    return {
        "overriding": Overriding,
        "elsewhere": Elsewhere,
        "incapable": Incapable,
        "wrapper": Wrapper,
    }


def test_a_wrapper_served_today_keeps_the_unwrap(forwarding: ModuleType) -> None:
    k = kinds(forwarding)
    lm = k["overriding"]()
    wrapper = k["wrapper"](lm)
    wrapper.set_aux_hidden_state_layers((2, 4, 5))
    assert lm.model.set == (2, 4, 5) and lm.calls == []
    assert wrapper.get_eagle3_default_aux_hidden_state_layers() == (2, 4, 5)


def test_a_language_model_reaching_its_decoder_itself_is_forwarded_to(
    forwarding: ModuleType,
) -> None:
    k = kinds(forwarding)
    lm = k["elsewhere"]()
    wrapper = k["wrapper"](lm)
    wrapper.set_aux_hidden_state_layers((1, 3))
    assert lm.transformer.set == (1, 3)
    assert wrapper.get_eagle3_default_aux_hidden_state_layers() == (1, 4, 5)


def test_a_language_model_that_cannot_collect_gets_the_guards_error(
    forwarding: ModuleType,
) -> None:
    k = kinds(forwarding)
    wrapper = k["wrapper"](k["incapable"]())
    for call in (
        lambda: wrapper.set_aux_hidden_state_layers((1,)),
        wrapper.get_eagle3_default_aux_hidden_state_layers,
    ):
        with pytest.raises(RuntimeError, match="but Incapable does not"):
            call()


def test_the_unrewritten_defaults_fail_there(forwarding: ModuleType) -> None:
    """Before the fix the same wrappers fail: the defaults unwrap `.model` blindly."""
    plain = interfaces(textwrap.dedent(INTERFACES) + HELPER)
    k = kinds(plain)
    with pytest.raises(AttributeError):
        k["wrapper"](k["elsewhere"]()).set_aux_hidden_state_layers((1, 3))
    with pytest.raises(AttributeError):
        k["wrapper"](k["incapable"]()).set_aux_hidden_state_layers((1,))


def test_a_model_without_a_language_model_runs_the_defaults_as_before(
    forwarding: ModuleType,
) -> None:
    k = kinds(forwarding)
    lm = k["overriding"]()
    forwarding.SupportsEagle3.set_aux_hidden_state_layers(lm, (3,))  # the default, on a text model
    assert lm.model.set == (3,)
