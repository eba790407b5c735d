"""Exception types.  The CLI turns each into one line on stderr and exit code 2.

:func:`printable` escapes the control characters of a name (a file name) put into a
message, so that the message stays one line.
"""

import re


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


#: Escapes of the control characters people know by a letter.
_LETTER_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text) -> str:
    """``text`` with every non-printable character written as an escape, for one-line messages.

    Control characters (``\\n`` ``\\r`` ``\\t``, ``\\x1b``, ``\\x00``, DEL, C1), line
    and paragraph separators, format characters (bidi overrides) and lone surrogates
    (bytes of a file name that are not UTF-8) become ``\\n``, ``\\xNN``, ``\\uNNNN``;
    every other character, spaces and non-ASCII letters included, stays as it is.  A
    file name put through it is one line that cannot move the cursor or change the
    terminal's colours::

        >>> printable("a\\nb\\x1b[31m.npz")
        'a\\\\nb\\\\x1b[31m.npz'
        >>> printable("café w.npz")
        'café w.npz'
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    if ch in _LETTER_ESCAPES:
        return _LETTER_ESCAPES[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def one_line(message) -> str:
    """``message`` as one line for the CLI's ``error:`` output: each run of spaces, tabs
    and line breaks becomes one space (a plug-in exception's message over several lines
    reads on), and every other non-printable character is escaped (:func:`printable`).

    Code that puts a file name into a message should pass it through :func:`printable`
    itself: a line break inside a name then shows as ``\\n``, not as a space.
    """
    return printable(_LAYOUT.sub(" ", str(message)).strip())


#: Spaces, tabs and line breaks (what :func:`one_line` joins into one space).
_LAYOUT = re.compile(r"[ \t\n\r\f\v]+")
