"""Scripts run by a vLLM verification environment's python (never imported by the bot).

This directory goes on that python's ``sys.path`` after the vLLM tree; its modules import only
the standard library, torch, transformers and vLLM.
"""
