"""Exception types.  The CLI turns each into one line on stderr and exit code 2."""


class SketchsimError(Exception):
    """Base class of every error caused by bad input or a bad plug-in."""


class ProtocolError(SketchsimError):
    """A protocol broke its own declaration (symbol outside its alphabet, ...)."""


class PluginError(SketchsimError):
    """A protocol plug-in could not be found, imported or configured."""


class FamilyError(SketchsimError):
    """A family file or family specification is malformed."""
