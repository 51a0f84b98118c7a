"""dubbo-py's release, the one version source (``pyproject.toml`` reads it from here).

A module of its own at the bottom layer, so code anywhere in the package (the CLI's
``--version``, the ``release`` parameter of registered URLs) reads it without importing the
package's public front door, which imports every layer.
"""

__version__ = "0.1.0"
