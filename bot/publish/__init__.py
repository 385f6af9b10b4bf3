"""Stage 5 of the flow, publish: the privileged half, the only code that holds the write token.

It re-derives what it pushes instead of trusting the plan artifact (the base tree, each
recipe's publish rules, the GPU run on GitHub's word), then opens one pull request per fix.
What it can run is what it imports, so no chain of imports from here may reach
``bot/propose/``, ``bot/pipeline.py``, ``bot/triage/`` or a module of ``bot/verify/`` that
starts processes (tests/test_publish_imports.py enforces it). Imports name the module, never
this package.
"""
