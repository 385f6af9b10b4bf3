"""Fix class ``eagle3-interface``: a text model whose decoder is EAGLE-3 ready lacks the
``SupportsEagle3`` declaration.

``recipe`` detects and plans it, ``publish`` is what ``bot publish`` re-checks for its edits,
``cases`` its VALID / INVALID cases (run by tests/test_recipe_cases.py). Registered by one line
in bot/recipes/__init__.py. Imports name the module, never this package.
"""
