"""The commands of `bot`, one module per family: each `add_<command>(sub)` adds its
subcommand to the parser (bot/cli.py lists them), its `cmd_<command>(args)` runs it. Heavy
libraries are imported inside the command that needs them (`bot scan` loads no git, GitHub or
Jinja library: tests/test_scan_imports.py)."""
