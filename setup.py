"""The package, and the recordings it ships: ``docs/recordings`` becomes ``profiling_guide/recordings``.

Everything else is in ``pyproject.toml``. The packages are listed here
because ``profiling_guide.recordings`` lives outside ``src/`` (``package-dir``
maps it), where ``[tool.setuptools.packages.find]`` cannot find it.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages("src"), "profiling_guide.recordings"])
