"""The cases of recipe ``core-drafter-loader`` and its publish rules (bot/recipes/cases.py).

``Demo`` is an enable target (the standard decoder of eagle3-enable's cases) whose decoder sits
at ``self.transformer`` and keeps its embedding as ``wte``; the tree's loaders read the
decoder as ``target_language_model.model`` and look the embedding up as ``embed_tokens`` or
``embedding``, as 0.34.0's do. The plan rewrites both loader lines and adds the helper to
``models/utils.py``. A tree whose loaders already fall back and find the embedding by type
reports nothing.
"""

from __future__ import annotations

from bot.recipes.cases import Invalid, Quiet, RecipeCases, SyntheticTree, Valid
from bot.recipes.eagle3_enable.cases import DECODER, HEADER, LAYER, TARGET, demo_tree

LOADER = "vllm/v1/worker/gpu/spec_decode/eagle/utils.py"
UTILS = "vllm/model_executor/models/utils.py"

LOADER_TEXT = '''import torch.nn as nn

from vllm.model_executor.models.utils import PPMissingLayer


def maybe_share_target_embed(draft_model, draft_inner, target_inner):
    """Share the target input embedding with the drafter when needed."""
    target_embed = getattr(target_inner, "embed_tokens", None) or getattr(
        target_inner, "embedding", None
    )
    if isinstance(target_embed, PPMissingLayer):
        target_embed = None
    if target_embed is not None:
        draft_inner.embed_tokens = target_embed


def load_eagle_model(target_model, eagle_model):
    target_language_model = (
        target_model.get_language_model()
        if hasattr(target_model, "get_language_model")
        else target_model
    )
    target_inner = target_language_model.model
    maybe_share_target_embed(eagle_model, eagle_model.model, target_inner)
    return eagle_model
'''
UTILS_TEXT = '''import torch.nn as nn

from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding


class PPMissingLayer(nn.Identity):
    """A layer another pipeline stage holds."""


def make_layers(num_layers, layer_fn, prefix):
    layers = nn.ModuleList(layer_fn(prefix=f"{prefix}.{i}") for i in range(num_layers))
    return 0, num_layers, layers
'''
EMBEDDING = "        self.norm = RMSNorm(8)\n"
WTE = EMBEDDING + "        self.wte = VocabParallelEmbedding(16, 8)\n"
TRANSFORMER_DECODER = DECODER.replace(EMBEDDING, WTE).replace(
    "self.embed_tokens(", "self.embed_input_ids("
)
TRANSFORMER_TARGET = TARGET.replace("self.model", "self.transformer")
IMPORTS = HEADER + (
    "from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding\n"
)


def loader_tree(loader: str = LOADER_TEXT, utils: str = UTILS_TEXT) -> SyntheticTree:
    demo = demo_tree(IMPORTS + LAYER + TRANSFORMER_DECODER + TRANSFORMER_TARGET)
    return SyntheticTree(
        files={**demo.files, LOADER: loader, UTILS: utils},
        registry=demo.registry,
    )


FALLBACK = '    target_inner = getattr(target_language_model, "model", target_language_model)'
HELPER_CALL = "    target_embed = get_input_embedding(target_inner)"
HELPER_DEF = "def get_input_embedding(model: nn.Module) -> nn.Module | None:"

LOADERS = Valid(
    "a decoder at self.transformer with its embedding at wte: both loader lines and the helper",
    loader_tree(),
    "maybe_share_target_embed",
    reports="refuse 1 enable targets, 1 of which are ready",
    adds=(
        FALLBACK,
        HELPER_CALL,
        HELPER_DEF,
        "from vllm.model_executor.models.utils import PPMissingLayer, get_input_embedding",
    ),
)

SERVED = loader_tree(
    LOADER_TEXT.replace(
        "    target_inner = target_language_model.model",
        FALLBACK,
    ).replace(
        """    target_embed = getattr(target_inner, "embed_tokens", None) or getattr(
        target_inner, "embedding", None
    )
""",
        """    target_embed = next(
        (m for m in target_inner.modules() if isinstance(m, VocabParallelEmbedding)), None
    )
""",
    )
)

CASES = RecipeCases(
    valid=(LOADERS,),
    invalid=(
        Invalid(
            "the loader reads another attribute than the protocol's fallback",
            LOADERS,
            LOADER,
            (FALLBACK, FALLBACK.replace('"model"', '"transformer"')),
            "the change to load_eagle_model is not the edit the recipe makes",
        ),
        Invalid(
            "the helper no longer skips the lm_head",
            LOADERS,
            UTILS,
            ("        and not isinstance(module, ParallelLMHead)\n", ""),
            "the change to get_input_embedding is not the edit the recipe makes",
        ),
        Invalid(
            "the helper call dropped: the embedding is looked up by one name",
            LOADERS,
            LOADER,
            (HELPER_CALL, '    target_embed = getattr(target_inner, "embed_tokens", None)'),
            "the change to maybe_share_target_embed is not the edit the recipe makes",
        ),
    ),
    quiet=(
        Quiet(
            "loaders that fall back and find the embedding by type refuse no target",
            SERVED,
            "maybe_share_target_embed",
        ),
    ),
)
