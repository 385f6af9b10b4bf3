"""The journal: what the bot found, proposed, verified and published (one SQLite file).
``bot sync``, which takes GitHub's word for what was published, lives with the dashboard
(:mod:`bot.dashboard.sync`): it reads the dashboard issue's ticked boxes.

Written by bot/pipeline.py only; read by the dashboard and the CLI. Imports name the module,
never this package.
"""
