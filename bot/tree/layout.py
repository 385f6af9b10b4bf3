"""Where things are in a vLLM tree: each path the bot reads or writes, and the platform packages,
spelled once (tests/test_vllm_facts.py fails when one of these values is written elsewhere in
bot/). The model packages themselves are :data:`bot.tree.index.MODEL_PACKAGES`."""

from __future__ import annotations

from collections.abc import Sequence

# vLLM's model registry: architecture -> (module, class).
REGISTRY_PATH = "vllm/model_executor/models/registry.py"
# The interfaces every model class declares (SupportsEagle3, EagleModelMixin, ...).
INTERFACES_MODULE = "vllm.model_executor.models.interfaces"
INTERFACES_PATH = INTERFACES_MODULE.replace(".", "/") + ".py"
# The example models of the tests (`_<CATEGORY>_EXAMPLE_MODELS`) and the test of the registry.
TEST_REGISTRY_PATH = "tests/models/registry.py"
REGISTRY_TEST = "tests/models/test_registry.py"
# The tree's rules for tests (0.34.0 on): real constructors, a test through LLM, a CI step.
AGENTS_RULES = "tests/AGENTS.md"
# The speculative-decoding tests, and the one file the tests through LLM go to.
SPEC_DECODE_TESTS = "tests/v1/spec_decode"
LLM_TEST_PATH = f"{SPEC_DECODE_TESTS}/test_eagle3_targets.py"
# The CI steps (one YAML file per area) that select which tests run.
TEST_AREAS = ".buildkite/test_areas"

# Platform sub-packages of vllm/models/<name>/, one of which is chosen at import time.
PLATFORMS = frozenset({"nvidia", "amd", "xpu", "cpu", "tpu"})


def platform_of(parts: Sequence[str]) -> str | None:
    """``amd`` for vllm/models/<pkg>/amd/...: ``parts`` are a file's path parts or a module's
    dotted parts; None outside a platform package."""
    if len(parts) > 4 and tuple(parts[:2]) == ("vllm", "models") and parts[3] in PLATFORMS:
        return parts[3]
    return None
