"""Report ``eagle3-broken-claim``: a class declares ``SupportsEagle3`` but would fail when used.

``recipe`` detects it, ``fix`` says which eagle3-enable plan repairs it (or what blocks one),
``cases`` its cases (run by tests/test_recipe_cases.py). Registered by one line in
bot/recipes/__init__.py. Imports name the module, never this package.
"""
