"""One exception hierarchy for the package. Messages are for people: name the thing at fault and what
to do."""


class RosLnnError(Exception):
    """Base of every error this package raises on purpose."""


class ModelError(RosLnnError):
    """A model file is missing, unreadable, or its metadata does not fit the configuration."""


class DataError(RosLnnError):
    """Input data (a bag, a dataset, an array) is missing, malformed or insufficient."""


class ConfigError(RosLnnError):
    """A parameter or configuration file is invalid."""
