"""The GitHub and git edge: the REST/GraphQL client, git commits and pushes, issue sources,
the shipped Actions workflows, and a plan's identity (fingerprints, markers) on GitHub.

Used by triage (issues), sync and publish. Imports name the module, never this package.
"""
