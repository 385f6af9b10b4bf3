"""Stage 1 of the flow, scan: every recipe's findings in a vLLM tree, the re-scan after an edit,
which findings matter first, and how they are shown.

Unprivileged. Read by triage, propose and verify; the journal records what it finds (from
bot/pipeline.py). Imports name the module (``bot.scan.findings``), never this package.
"""
