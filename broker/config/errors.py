"""The config error type: raised by configuration and by the layers that check what
configuration names (key stores, JAAS configs, principal rules)."""


class ConfigError(ValueError):
    """A broker configuration value is missing, malformed or inconsistent.

    The message always starts with the offending key, e.g.
    ``num.network.threads: must be >= 1, got 0``, so that an operator can find
    the line in server.properties without reading a traceback.
    """


CONFIG_ERROR_EXIT_CODE = 2
"""`broker serve`'s exit code for a configuration error, whichever process found it: a
cluster's supervisor exits with it when one of its processes did."""
