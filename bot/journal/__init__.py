"""The journal: what the bot found, proposed, verified and published (one SQLite file), and
``bot sync``, which takes GitHub's word for what was published.

Written by bot/pipeline.py only; read by the dashboard and the CLI. Imports name the module,
never this package.
"""
