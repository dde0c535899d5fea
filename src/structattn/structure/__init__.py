"""Word-level relations and their expansion to sub-word token masks.

Pipeline: ``Parse`` records -> [`build_word_structures`][structattn.structure.example.build_word_structures] (compact
per-sentence blocks) -> [`encode_words`][structattn.structure.align.encode_words] (tokens aligned to words, windows) ->
`StructureCollator` (``[batch, T, T]`` bool ``structure_mask``).
"""
from .align import EncodedWindow, encode_words, first_subword_positions
from .example import WordStructure, build_word_structures
from .expand import ExpansionRules, example_word_mask, expand_to_tokens, token_mask
from .relations import RELATIONS, batch_word_masks, get_relation, tree_distances, word_mask

__all__ = ["EncodedWindow", "encode_words", "first_subword_positions", "StructureCollator", "WordStructure",
           "build_word_structures", "ExpansionRules", "example_word_mask", "expand_to_tokens", "token_mask",
           "RELATIONS", "batch_word_masks", "get_relation", "tree_distances", "word_mask"]


def __getattr__(name):
    if name == "StructureCollator":  # torch: imported on use, so the relations' names load without it
        from .collate import StructureCollator

        return StructureCollator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
