"""Installed versions, read from package metadata without importing the package: what the
frameworks' adapters, the run's settings and the report's environment all need."""

from __future__ import annotations

from importlib import metadata

# Which distribution package provides each framework: any of them counts as installed.
FRAMEWORK_DISTRIBUTIONS = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly", "tensorflow-intel"),
    "torch": ("torch",),
}


def framework_version(framework: str) -> str | None:
    """Version of an installed framework, read without importing it."""
    return first_installed(FRAMEWORK_DISTRIBUTIONS[framework])


def first_installed(dists: tuple[str, ...]) -> str | None:
    """Version of the first of these distributions that is installed, or None."""
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def dist_version(name: str) -> str:
    """Version of an installed distribution, or "not installed"."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"
