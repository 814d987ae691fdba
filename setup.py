"""Package discovery only: maps the folder `envs/` to the import name `coplay_envs`.

pyproject.toml holds all metadata; setuptools' declarative config cannot rename a folder tree, so this
file lists `coplay.*` and `envs/*` (as `coplay_envs.*`) so wheels and editable installs agree.
"""

from setuptools import find_packages, setup

packages = find_packages(include=["coplay", "coplay.*"])
packages += ["coplay_envs"] + [f"coplay_envs.{p}" for p in find_packages("envs")]
setup(packages=packages, package_dir={"coplay_envs": "envs"})
