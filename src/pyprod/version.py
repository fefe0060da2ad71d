"""pyprod's version, in one place (the package and the ApiVersions request read it)."""
__version__ = "0.1.0"
