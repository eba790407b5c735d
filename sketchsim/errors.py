"""Exception types.  The CLI turns each into one line on stderr and exit code 2."""


class SketchsimError(Exception):
    """Base class of every error caused by bad input or a bad plug-in.

    Messages speak of parameters, not command-line flags: ``param`` names the
    library parameter at fault (``"codewords"``), and the CLI shows it as the
    flag that sets it (``--codewords``).
    """

    def __init__(self, message: str = "", param: str | None = None):
        super().__init__(message)
        self.param = param


class ProtocolError(SketchsimError):
    """A protocol broke its own declaration (symbol outside its alphabet, ...)."""


class PluginError(SketchsimError):
    """A protocol plug-in could not be found, imported or configured."""


class FamilyError(SketchsimError):
    """A family file or family specification is malformed."""
