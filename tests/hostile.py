"""What an attacker plants in a runs folder."""

import os
from pathlib import Path


class Planted:
    """Runs a shell command when unpickled: what a hostile cache file would hold."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (os.system, (f"touch {self.marker}",))
