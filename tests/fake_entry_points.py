"""A stand-in for ``importlib.metadata.EntryPoint`` in discovery tests."""


class FakeEntryPoint:
    """An entry point whose ``load`` returns ``obj`` or raises ``exc``."""

    def __init__(self, name, value, obj=None, exc=None):
        self.name, self.value, self._obj, self._exc = name, value, obj, exc

    def load(self):
        if self._exc is not None:
            raise self._exc
        return self._obj
