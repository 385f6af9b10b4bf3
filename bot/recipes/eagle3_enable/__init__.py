"""Fix class ``eagle3-enable``: the decoder learns to collect aux hidden states and the target
declares ``SupportsEagle3``.

``recipe`` detects and plans it, ``analysis`` says whether a decoder can take the mechanical
edit, ``shared`` fixes a decoder several targets share, ``publish`` is what ``bot publish``
re-checks for its edits, ``cases`` its VALID / INVALID cases (run by tests/test_recipe_cases.py).
Registered by one line in bot/recipes/__init__.py. Imports name the module, never this package.
"""
