"""Stage 2 of the flow, triage: a GitHub issue -> which architecture lacks ``SupportsEagle3``, how
sure we are, and which upstream issues are candidates.

Unprivileged. Reads the scan's view of a tree; its verdict goes to propose. Publish never
imports it (tests/test_publish_imports.py). Imports name the module, never this package.
"""
