"""The package list, which pyproject.toml cannot both find and extend (see its [tool.setuptools]
comment): every package under bot/, found, and the two top-level directories that ship inside
it. Everything else about the build is in pyproject.toml."""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["bot", "bot.*"]), "bot._templates", "bot._workflows"])
