"""Fix class ``eagle3-wrapper``: a multimodal wrapper over an EAGLE-3-capable language model.

``recipe`` detects and plans it, ``publish`` is what ``bot publish`` re-checks for its edits,
``cases`` its VALID / INVALID cases (run by tests/test_recipe_cases.py). Registered by one line
in bot/recipes/__init__.py. Imports name the module, never this package.
"""
