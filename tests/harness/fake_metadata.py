"""What the unit tests' fake Metadata objects share with pyprod's Metadata: a version whose
every change is told to the update listeners (the RecordAccumulator's metadata_updated), as
Metadata.update() does."""


class ListenedVersion:
    _version = 0

    @property
    def version(self):
        return self._version

    @version.setter
    def version(self, version):
        self._version = version
        for fn in self.__dict__.get("_listeners", ()):
            fn(version)

    def add_update_listener(self, fn):
        self.__dict__.setdefault("_listeners", []).append(fn)
