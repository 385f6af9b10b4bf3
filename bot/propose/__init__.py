"""Stage 3 of the flow, propose: from a finding (and optionally a triaged issue) to a plan
directory, one class or a group of one fix shape, for any recipe.

Unprivileged: it runs the recipes' codemods in a scratch worktree. Verify checks what it
writes; publish never imports it (tests/test_publish_imports.py). It may read publish's pure
modules (the write-up, the contribution rules, what is already published). Imports name the
module, never this package.
"""
